/// Messages the daemon sends. Type bytes 128–255; see docs/protocol.md.
public enum ServerMessage: Sendable, Equatable {
    /// Reply to hello: the peer's uid as the daemon sees it and the current storefront.
    case welcome(version: UInt16, uid: UInt32, storefrontCountryCode: String, storefrontID: String)
    /// The end of a request. `detail` is the `SKError.Code` when `code == .storeKit`;
    /// `value` is request-specific (the new transaction id for addPayment).
    case result(requestID: UInt32, code: ResultCode, detail: Int32, value: UInt64, message: String)
    /// Transactions that are new or changed (`paymentQueue(_:updatedTransactions:)`).
    case updated([TransactionRecord])
    /// Transactions that were finished (`paymentQueue(_:removedTransactions:)`).
    case removed([TransactionRecord])
    case products(requestID: UInt32, products: [ProductRecord], invalidIdentifiers: [String])
    case transactions(requestID: UInt32, transactions: [TransactionRecord])
    /// Reply to a control command: `json` is the command's JSON document.
    case controlResult(requestID: UInt32, code: ResultCode, message: String, json: String)
    case storefrontChanged(countryCode: String, identifier: String)
    case entitlementsRevoked(productIDs: [String])
    /// A promoted purchase offered to the app (`paymentQueue(_:shouldAddStorePayment:for:)`).
    case promotedPurchase(ProductRecord)

    enum Tag: UInt8 {
        case welcome = 128, result, updated, removed, products, transactions, controlResult,
             storefrontChanged, entitlementsRevoked, promotedPurchase
    }

    public static func result(_ requestID: UInt32, _ code: ResultCode, detail: Int32 = 0, value: UInt64 = 0, _ message: String = "") -> ServerMessage {
        .result(requestID: requestID, code: code, detail: detail, value: value, message: message)
    }

    public func encode() -> [UInt8] {
        var writer = WireWriter()
        encode(into: &writer)
        return writer.bytes
    }

    public func encode(into writer: inout WireWriter) {
        switch self {
        case .welcome(let version, let uid, let country, let id):
            writer.u8(Tag.welcome.rawValue); writer.u16(version); writer.u32(uid); writer.string(country); writer.string(id)
        case .result(let id, let code, let detail, let value, let message):
            writer.u8(Tag.result.rawValue); writer.u32(id); writer.u16(code.rawValue); writer.i32(detail)
            writer.u64(value); writer.string(message)
        case .updated(let transactions):
            writer.u8(Tag.updated.rawValue); Self.encode(transactions, into: &writer)
        case .removed(let transactions):
            writer.u8(Tag.removed.rawValue); Self.encode(transactions, into: &writer)
        case .products(let id, let products, let invalid):
            writer.u8(Tag.products.rawValue); writer.u32(id)
            writer.u32(UInt32(products.count))
            for product in products { product.encode(into: &writer) }
            writer.stringList(invalid)
        case .transactions(let id, let transactions):
            writer.u8(Tag.transactions.rawValue); writer.u32(id); Self.encode(transactions, into: &writer)
        case .controlResult(let id, let code, let message, let json):
            writer.u8(Tag.controlResult.rawValue); writer.u32(id); writer.u16(code.rawValue)
            writer.string(message); writer.string(json)
        case .storefrontChanged(let country, let id):
            writer.u8(Tag.storefrontChanged.rawValue); writer.string(country); writer.string(id)
        case .entitlementsRevoked(let productIDs):
            writer.u8(Tag.entitlementsRevoked.rawValue); writer.stringList(productIDs)
        case .promotedPurchase(let product):
            writer.u8(Tag.promotedPurchase.rawValue); product.encode(into: &writer)
        }
    }

    static func encode(_ transactions: [TransactionRecord], into writer: inout WireWriter) {
        writer.u32(UInt32(transactions.count))
        for transaction in transactions { transaction.encode(into: &writer) }
    }

    static func decodeTransactions(_ reader: inout WireReader) throws(WireError) -> [TransactionRecord] {
        let count = try reader.count(minimumElementSize: TransactionRecord.minimumEncodedSize)
        var transactions: [TransactionRecord] = []
        transactions.reserveCapacity(count)
        for _ in 0..<count { transactions.append(try TransactionRecord.decode(from: &reader)) }
        return transactions
    }

    static func decodeCode(_ reader: inout WireReader) throws(WireError) -> ResultCode {
        let raw = try reader.u16()
        guard let code = ResultCode(rawValue: raw) else { throw WireError(.invalidValue("result code \(raw)")) }
        return code
    }

    public static func decode(_ body: [UInt8]) throws(WireError) -> ServerMessage {
        var reader = WireReader(body)
        guard body.count > 0 else { throw WireError(.emptyFrame) }
        let rawTag = try reader.u8()
        guard let tag = Tag(rawValue: rawTag) else { throw WireError(.unknownMessageType(rawTag)) }
        let message: ServerMessage
        switch tag {
        case .welcome:
            message = .welcome(version: try reader.u16(), uid: try reader.u32(),
                               storefrontCountryCode: try reader.string(), storefrontID: try reader.string())
        case .result:
            message = .result(requestID: try reader.u32(), code: try decodeCode(&reader), detail: try reader.i32(),
                              value: try reader.u64(), message: try reader.string())
        case .updated:
            message = .updated(try decodeTransactions(&reader))
        case .removed:
            message = .removed(try decodeTransactions(&reader))
        case .products:
            let id = try reader.u32()
            let count = try reader.count(minimumElementSize: 30)
            var products: [ProductRecord] = []
            for _ in 0..<count { products.append(try ProductRecord.decode(from: &reader)) }
            message = .products(requestID: id, products: products, invalidIdentifiers: try reader.stringList())
        case .transactions:
            message = .transactions(requestID: try reader.u32(), transactions: try decodeTransactions(&reader))
        case .controlResult:
            message = .controlResult(requestID: try reader.u32(), code: try decodeCode(&reader),
                                     message: try reader.string(), json: try reader.string())
        case .storefrontChanged:
            message = .storefrontChanged(countryCode: try reader.string(), identifier: try reader.string())
        case .entitlementsRevoked:
            message = .entitlementsRevoked(productIDs: try reader.stringList())
        case .promotedPurchase:
            message = .promotedPurchase(try ProductRecord.decode(from: &reader))
        }
        try reader.expectEnd()
        return message
    }
}
