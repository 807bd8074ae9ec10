// libFuzzer target `record-json`: the `-o json` rendering (TransactionRecord.json,
// ProductRecord.json, RFC3339, JSONValue.serialized) of every record a ServerMessage decodes to,
// so every value the wire types can carry reaches it. Seeds: the server-message corpus.
//
// Property: rendering never traps and always yields a document. Fuzz/crashes/record-json/ holds the
// inputs that trapped before JSONValue.swift clamped sequences and dates (commit ec1d532).

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRecordJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let message = try? ServerMessage.decode(Array(UnsafeBufferPointer(start: data, count: size))) else {
        return 0
    }
    var documents: [JSONValue] = []
    switch message {
    case .updated(let records), .removed(let records), .transactions(_, let records):
        documents = records.map(\.json)
    case .products(_, let products, _):
        documents = products.map(\.json)
    case .promotedPurchase(let product):
        documents = [product.json]
    default:
        return 0
    }
    let text = JSONValue.array(documents).serialized()
    guard text.hasPrefix("[") else { fatalError("JSON rendering produced \(text)") }
    return 0
}
