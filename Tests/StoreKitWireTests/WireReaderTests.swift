import StoreKitWire
import Testing

@Suite("WireReader and WireWriter")
struct WireReaderTests {
    @Test("integers are little-endian and signed values keep their bit pattern")
    func integers() throws {
        var writer = WireWriter()
        writer.u8(0xAB)
        writer.u16(0x0102)
        writer.u32(0x0304_0506)
        writer.u64(0x0708_090A_0B0C_0D0E)
        writer.i32(-2)
        writer.i64(.min)
        writer.bool(true)
        writer.bool(false)
        #expect(Array(writer.bytes.prefix(15)) == [0xAB, 0x02, 0x01, 0x06, 0x05, 0x04, 0x03,
                                                   0x0E, 0x0D, 0x0C, 0x0B, 0x0A, 0x09, 0x08, 0x07])
        var reader = WireReader(writer.bytes)
        #expect(try reader.u8() == 0xAB)
        #expect(try reader.u16() == 0x0102)
        #expect(try reader.u32() == 0x0304_0506)
        #expect(try reader.u64() == 0x0708_090A_0B0C_0D0E)
        #expect(try reader.i32() == -2)
        #expect(try reader.i64() == .min)
        #expect(try reader.bool() == true)
        #expect(try reader.bool() == false)
        #expect(reader.remaining == 0)
        try reader.expectEnd()
        #expect(throws: WireError(.truncated)) { try reader.u8() }
    }

    @Test("optionals, blobs and string lists round-trip")
    func composites() throws {
        var writer = WireWriter()
        writer.optionalString(nil)
        writer.optionalString(WireSamples.unicode)
        writer.optionalI32(nil)
        writer.optionalI32(.min)
        writer.optionalI64(-1)
        writer.optionalU64(.max)
        writer.blob([0, 0xFF, 0x80])
        writer.stringList(["", WireSamples.unicode])
        var reader = WireReader(writer.bytes)
        #expect(try reader.optionalString() == nil)
        #expect(try reader.optionalString() == WireSamples.unicode)
        #expect(try reader.optionalI32() == nil)
        #expect(try reader.optionalI32() == .min)
        #expect(try reader.optionalI64() == -1)
        #expect(try reader.optionalU64() == .max)
        #expect(try reader.blob() == [0, 0xFF, 0x80])
        #expect(try reader.stringList() == ["", WireSamples.unicode])
        try reader.expectEnd()
    }

    @Test("a reader limited by `end` does not read past it")
    func readerEnd() throws {
        var reader = WireReader([1, 2, 3, 4, 5], offset: 1, end: 3)
        #expect(reader.remaining == 2)
        #expect(try reader.u16() == 0x0302)
        #expect(throws: WireError(.truncated)) { try reader.u8() }
        let partial = WireReader([1, 2, 3], offset: 1)
        #expect(throws: WireError(.trailingBytes(2))) { try partial.expectEnd() }
    }

    @Test("invalid UTF-8 in a string throws .invalidUTF8",
          arguments: [
              [0xC3, 0x28],             // bad continuation
              [0x80],                   // lone continuation
              [0xC0, 0x80],             // overlong NUL
              [0xED, 0xA0, 0x80],       // UTF-16 surrogate
              [0xF4, 0x90, 0x80, 0x80], // above U+10FFFF
              [0x61, 0xE2, 0x82],       // cut multi-byte sequence
              [0xFF],
          ] as [[UInt8]])
    func invalidUTF8(bytes: [UInt8]) {
        var string: [UInt8] = []
        withUnsafeBytes(of: UInt32(bytes.count).littleEndian) { string.append(contentsOf: $0) }
        string += bytes
        #expect(throws: WireError(.invalidUTF8)) { try ClientMessage.decode([1, 1, 0] + string) }
        #expect(throws: WireError(.invalidUTF8)) { try ClientMessage.decode([9, 1, 0, 0, 0] + string + [0, 0, 0, 0]) }
        #expect(throws: WireError(.invalidUTF8)) { try ClientMessage.decode([7, 1, 0, 0, 0, 1, 0, 0, 0] + string) }
        #expect(throws: WireError(.invalidUTF8)) { try ServerMessage.decode([135] + string + [0, 0, 0, 0]) }
        var reader = WireReader(string)
        #expect(throws: WireError(.invalidUTF8)) { try reader.string() }
    }

    @Test("string and list lengths beyond the bytes left throw .truncated without allocating",
          arguments: [
              [1, 1, 0, 0xFF, 0xFF, 0xFF, 0xFF],                   // hello: app length 4 GiB
              [1, 1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x61, 0x62],
              [7, 1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF],             // products: 4 G identifiers
              [7, 1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0],
              [7, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], // 3 strings, room for 2
              [9, 1, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF], // control: 4 G arguments
              [4, 1, 0, 0, 0, 0xFE, 0xFF, 0xFF, 0xFF],             // addPayment: key length
          ] as [[UInt8]])
    func absurdLengths(body: [UInt8]) {
        #expect(throws: WireError(.truncated)) { try ClientMessage.decode(body) }
    }

    @Test("count(minimumElementSize:) bounds the count by the bytes left")
    func countBound() throws {
        var fits = WireReader([2, 0, 0, 0] + [UInt8](repeating: 0, count: 8))
        #expect(try fits.count(minimumElementSize: 4) == 2)
        var tooMany = WireReader([3, 0, 0, 0] + [UInt8](repeating: 0, count: 8))
        #expect(throws: WireError(.truncated)) { try tooMany.count(minimumElementSize: 4) }
        var zeroSize = WireReader([0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: WireError(.truncated)) { try zeroSize.count(minimumElementSize: 0) }
    }

    @Test("WireError descriptions name the problem")
    func descriptions() {
        #expect(WireError(.frameTooLarge(length: 5, limit: 4)).description == "frame of 5 bytes exceeds the limit of 4 bytes")
        #expect(WireError(.unknownMessageType(200)).description == "unknown message type 200")
        #expect(WireError(.trailingBytes(3)).description == "3 unexpected bytes after the message")
    }
}
