import StoreKitWire
import Testing

@Suite("ServerMessage encoding")
struct ServerMessageTests {
    @Test("the samples cover every server message type (128…143) and every result code")
    func samplesCoverEveryType() {
        let types = Set(WireSamples.serverMessages.map { $0.encode()[0] })
        #expect(types == Set(128...143))
        var codes = Set<UInt16>()
        for case .result(_, let code, _, _, _) in WireSamples.serverMessages { codes.insert(code.rawValue) }
        #expect(codes == Set(ResultCode.allCases.map(\.rawValue)))
    }

    @Test("encode → decode gives the same message", arguments: WireSamples.serverMessages)
    func roundTrip(message: ServerMessage) throws {
        #expect(try ServerMessage.decode(message.encode()) == message)
    }

    @Test("encode(into:) appends exactly encode()")
    func encodeIntoAppends() {
        for message in WireSamples.serverMessages {
            var writer = WireWriter()
            writer.u8(0xAA)
            message.encode(into: &writer)
            #expect(writer.bytes == [0xAA] + message.encode())
        }
    }

    @Test("the result(_:_:) shorthand fills the defaults")
    func resultShorthand() {
        #expect(ServerMessage.result(9, .ok) == .result(requestID: 9, code: .ok, detail: 0, value: 0, message: ""))
        #expect(ServerMessage.result(9, .storeKit, detail: 5, value: 7, "no")
            == .result(requestID: 9, code: .storeKit, detail: 5, value: 7, message: "no"))
    }

    @Test("every proper prefix of an encoding throws .truncated (the empty one .emptyFrame)",
          arguments: WireSamples.serverMessages)
    func truncatedPrefixesThrow(message: ServerMessage) {
        let body = message.encode()
        #expect(throws: WireError(.emptyFrame)) { try ServerMessage.decode([]) }
        for length in 1..<body.count {
            #expect(throws: WireError(.truncated), "prefix of \(length) of \(body.count) bytes") {
                try ServerMessage.decode(Array(body.prefix(length)))
            }
        }
    }

    @Test("bytes after a complete message are rejected", arguments: WireSamples.serverMessages)
    func trailingBytes(message: ServerMessage) {
        #expect(throws: WireError(.trailingBytes(1))) { try ServerMessage.decode(message.encode() + [0]) }
        #expect(throws: WireError(.trailingBytes(2))) { try ServerMessage.decode(message.encode() + [0xFF, 0xFF]) }
    }

    @Test("unknown type bytes, including every client type, are rejected",
          arguments: [0, 1, 10, 15, 17, 127, 144, 145, 200, 255] as [UInt8])
    func unknownType(type: UInt8) {
        #expect(throws: WireError(.unknownMessageType(type))) { try ServerMessage.decode([type]) }
    }

    @Test("an unknown result code is rejected")
    func unknownResultCode() {
        var body = ServerMessage.result(1, .ok).encode()
        body[5] = 0xE7
        body[6] = 0x03
        #expect(throws: WireError(.invalidValue("result code 999"))) { try ServerMessage.decode(body) }
        var control = ServerMessage.controlResult(requestID: 1, code: .ok, message: "", json: "").encode()
        control[5] = UInt8(ResultCode.allCases.count)   // one past the last code
        #expect(throws: WireError(.invalidValue("result code \(ResultCode.allCases.count)"))) { try ServerMessage.decode(control) }
    }

    @Test("an unknown transaction state is rejected", arguments: [5, 6, 0xFF] as [UInt8])
    func unknownTransactionState(raw: UInt8) {
        // updated: type(1) count(4) id(8) originalID marker(1) uid(4) app(4+0) product(4+0) quantity(4) state
        var body = ServerMessage.updated([WireSamples.minimalTransaction]).encode()
        let stateOffset = 1 + 4 + 8 + 1 + 4 + 4 + 4 + 4
        #expect(body[stateOffset] == TransactionState.purchasing.rawValue)
        body[stateOffset] = raw
        #expect(throws: WireError(.invalidValue("transaction state \(raw)"))) { try ServerMessage.decode(body) }
    }

    @Test("an unknown product type is rejected")
    func unknownProductKind() {
        var body = ServerMessage.promotedPurchase(WireSamples.minimalProduct).encode()
        body[1 + 4] = 4
        #expect(throws: WireError(.invalidValue("product type 4"))) { try ServerMessage.decode(body) }
    }

    @Test("a bad boolean or optional marker inside a transaction is rejected")
    func badMarkersInTransaction() {
        let body = ServerMessage.updated([WireSamples.minimalTransaction]).encode()
        var badOriginal = body
        badOriginal[1 + 4 + 8] = 2
        #expect(throws: WireError(.invalidValue("optional marker 2"))) { try ServerMessage.decode(badOriginal) }
        // finished sits after state(1) sequence(8) date(8); then seven absent optionals end the record.
        var badFinished = body
        badFinished[body.count - 8] = 3
        #expect(throws: WireError(.invalidValue("boolean byte 3"))) { try ServerMessage.decode(badFinished) }
        var badJWS = body
        badJWS[body.count - 1] = 0xFF
        #expect(throws: WireError(.invalidValue("optional marker 255"))) { try ServerMessage.decode(badJWS) }
    }

    @Test("an absurd list count throws .truncated instead of allocating",
          arguments: [
              [130, 0xFF, 0xFF, 0xFF, 0xFF],
              [131, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0],
              [132, 1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF],
              [132, 1, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF],
              [133, 1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3, 4, 5, 6, 7, 8],
              [136, 0xFF, 0xFF, 0xFF, 0xFF],
              [136, 0xFF, 0xFF, 0xFF, 0x7F, 0, 0, 0, 0],
              [138, 1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF],
              [140, 1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0x7F],
          ] as [[UInt8]])
    func absurdListCount(body: [UInt8]) {
        #expect(throws: WireError(.truncated)) { try ServerMessage.decode(body) }
    }

    @Test("a count that would fit only with elements smaller than possible is rejected")
    func listCountAboveMinimumSize() {
        // One minimal transaction is 50 bytes: claiming two with 50 bytes left must fail before decoding.
        var body = ServerMessage.updated([WireSamples.minimalTransaction]).encode()
        #expect(body.count == 1 + 4 + 50)
        body[1] = 2
        #expect(throws: WireError(.truncated)) { try ServerMessage.decode(body) }
    }
}
