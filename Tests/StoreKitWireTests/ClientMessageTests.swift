import StoreKitWire
import Testing

@Suite("ClientMessage encoding")
struct ClientMessageTests {
    @Test("the samples cover every client message type (1…17)")
    func samplesCoverEveryType() {
        let types = Set(WireSamples.clientMessages.map { $0.encode()[0] })
        #expect(types == Set(1...17))
    }

    @Test("encode → decode gives the same message", arguments: WireSamples.clientMessages)
    func roundTrip(message: ClientMessage) throws {
        let body = message.encode()
        #expect(try ClientMessage.decode(body) == message)
    }

    @Test("a message survives framing", arguments: WireSamples.clientMessages)
    func roundTripThroughFrame(message: ClientMessage) throws {
        var decoder = FrameDecoder()
        decoder.append(Frame.encode(body: message.encode()))
        let body = try #require(try decoder.next())
        #expect(try ClientMessage.decode(body) == message)
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == 0)
    }

    @Test("requestID is the field each request carries")
    func requestIDs() {
        #expect(ClientMessage.hello(version: 1, app: "a").requestID == nil)
        #expect(ClientMessage.subscribe(requestID: 11).requestID == 11)
        #expect(ClientMessage.unsubscribe(requestID: 12).requestID == 12)
        #expect(ClientMessage.addPayment(.init(requestID: 13, key: "", productID: "p", quantity: 1)).requestID == 13)
        #expect(ClientMessage.finish(requestID: 14, transactionID: 99).requestID == 14)
        #expect(ClientMessage.restore(requestID: 15, applicationUsername: nil).requestID == 15)
        #expect(ClientMessage.products(requestID: 16, identifiers: []).requestID == 16)
        #expect(ClientMessage.unfinished(requestID: 17).requestID == 17)
        #expect(ClientMessage.control(requestID: 18, command: "c", arguments: []).requestID == 18)
        #expect(ClientMessage.ping(requestID: 19).requestID == 19)
    }

    @Test("the layout is the documented one: type byte, little-endian integers, u32-prefixed UTF-8")
    func layout() {
        #expect(ClientMessage.hello(version: 0x0102, app: "é").encode() == [1, 0x02, 0x01, 2, 0, 0, 0, 0xC3, 0xA9])
        #expect(ClientMessage.finish(requestID: 0x0403_0201, transactionID: 0x0807_0605_0403_0201).encode()
            == [5, 1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8])
        #expect(ClientMessage.restore(requestID: 1, applicationUsername: nil).encode() == [6, 1, 0, 0, 0, 0])
        #expect(ClientMessage.restore(requestID: 1, applicationUsername: "").encode() == [6, 1, 0, 0, 0, 1, 0, 0, 0, 0])
        #expect(ClientMessage.products(requestID: 1, identifiers: ["a", "b"]).encode()
            == [7, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0x61, 1, 0, 0, 0, 0x62])
    }

    @Test("every proper prefix of an encoding throws .truncated (the empty one .emptyFrame)",
          arguments: WireSamples.clientMessages)
    func truncatedPrefixesThrow(message: ClientMessage) {
        let body = message.encode()
        #expect(throws: WireError(.emptyFrame)) { try ClientMessage.decode([]) }
        for length in 1..<body.count {
            #expect(throws: WireError(.truncated), "prefix of \(length) of \(body.count) bytes") {
                try ClientMessage.decode(Array(body.prefix(length)))
            }
        }
    }

    @Test("bytes after a complete message are rejected", arguments: WireSamples.clientMessages)
    func trailingBytes(message: ClientMessage) {
        #expect(throws: WireError(.trailingBytes(1))) { try ClientMessage.decode(message.encode() + [0]) }
        #expect(throws: WireError(.trailingBytes(3))) { try ClientMessage.decode(message.encode() + [1, 2, 3]) }
    }

    @Test("unknown type bytes, including every server type, are rejected",
          arguments: [0, 18, 19, 100, 127, 128, 129, 137, 140, 142, 200, 255] as [UInt8])
    func unknownType(type: UInt8) {
        #expect(throws: WireError(.unknownMessageType(type))) { try ClientMessage.decode([type]) }
        #expect(throws: WireError(.unknownMessageType(type))) { try ClientMessage.decode([type, 1, 0, 0, 0]) }
    }

    @Test("a boolean byte other than 0 or 1 is rejected", arguments: [2, 0x7F, 0xFF] as [UInt8])
    func badBool(byte: UInt8) {
        let body = ClientMessage.addPayment(.init(requestID: 1, key: "k", productID: "p", quantity: 1)).encode(version: 3)
        // Version 3 ends addPayment with the discount's optional marker, after the two booleans.
        var badRequestData = body
        badRequestData[body.count - 3] = byte
        #expect(throws: WireError(.invalidValue("boolean byte \(byte)"))) { try ClientMessage.decode(badRequestData, version: 3) }
        var badAskToBuy = body
        badAskToBuy[body.count - 2] = byte
        #expect(throws: WireError(.invalidValue("boolean byte \(byte)"))) { try ClientMessage.decode(badAskToBuy, version: 3) }
    }

    @Test("an optional marker other than 0 or 1 is rejected", arguments: [2, 0x80, 0xFF] as [UInt8])
    func badOptionalMarker(byte: UInt8) {
        var restore = ClientMessage.restore(requestID: 1, applicationUsername: nil).encode()
        restore[restore.count - 1] = byte
        #expect(throws: WireError(.invalidValue("optional marker \(byte)"))) { try ClientMessage.decode(restore) }

        // The marker of addPayment's applicationUsername sits before the two booleans; the
        // discount's is the last byte (version 3).
        var payment = ClientMessage.addPayment(.init(requestID: 1, key: "k", productID: "p", quantity: 1)).encode(version: 3)
        payment[payment.count - 4] = byte
        #expect(throws: WireError(.invalidValue("optional marker \(byte)"))) { try ClientMessage.decode(payment, version: 3) }
        var discount = ClientMessage.addPayment(.init(requestID: 1, key: "k", productID: "p", quantity: 1)).encode(version: 3)
        discount[discount.count - 1] = byte
        #expect(throws: WireError(.invalidValue("optional marker \(byte)"))) { try ClientMessage.decode(discount, version: 3) }
        // Version 4 adds the two JWS and the win-back offer, each an opt<string>: their markers are the last three bytes.
        for position in 1...3 {
            var jws = ClientMessage.addPayment(.init(requestID: 1, key: "k", productID: "p", quantity: 1)).encode(version: 4)
            jws[jws.count - position] = byte
            #expect(throws: WireError(.invalidValue("optional marker \(byte)"))) { try ClientMessage.decode(jws, version: 4) }
        }
    }
}
