import StoreKitWire
import Testing

/// A reproducible generator so that a failing split can be replayed from its seed.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("Frame and FrameDecoder")
struct FrameTests {
    /// Every sample message of both directions, as frame bodies.
    static let bodies: [[UInt8]] = WireSamples.clientMessages.map { $0.encode() } + WireSamples.serverMessages.map { $0.encode() }

    static var stream: [UInt8] {
        var output: [UInt8] = []
        for body in bodies { Frame.append(body: body, to: &output) }
        return output
    }

    /// Feeds `chunks` one after the other, taking out every complete body after each.
    static func decode(_ chunks: [ArraySlice<UInt8>], maximumBodySize: Int = Frame.defaultMaximumBodySize) throws -> [[UInt8]] {
        var decoder = FrameDecoder(maximumBodySize: maximumBodySize)
        var result: [[UInt8]] = []
        for chunk in chunks {
            decoder.append(chunk)
            while let body = try decoder.next() { result.append(body) }
        }
        #expect(decoder.bufferedByteCount == 0)
        return result
    }

    @Test("a frame is a u32 little-endian length followed by the body")
    func layout() {
        #expect(Frame.encode(body: [0xAA, 0xBB, 0xCC]) == [3, 0, 0, 0, 0xAA, 0xBB, 0xCC])
        let body = [UInt8](repeating: 7, count: 0x0102_03)
        let frame = Frame.encode(body: body)
        #expect(Array(frame.prefix(4)) == [0x03, 0x02, 0x01, 0x00])
        #expect(Array(frame.dropFirst(4)) == body)
        var appended: [UInt8] = [9]
        Frame.append(body: [1], to: &appended)
        #expect(appended == [9, 1, 0, 0, 0, 1])
    }

    @Test("fed one byte at a time, the decoder yields every body exactly once")
    func byteByByte() throws {
        let stream = Self.stream
        var decoder = FrameDecoder()
        var result: [[UInt8]] = []
        for (index, byte) in stream.enumerated() {
            decoder.append(CollectionOfOne(byte))
            while let body = try decoder.next() { result.append(body) }
            #expect(decoder.bufferedByteCount <= index + 1)
        }
        #expect(result == Self.bodies)
        #expect(decoder.bufferedByteCount == 0)
        #expect(try decoder.next() == nil)
    }

    @Test("random splits of the stream give the same bodies", arguments: [1, 2, 3, 42, 2024, 0xDEAD_BEEF] as [UInt64])
    func randomSplits(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let stream = Self.stream
        var chunks: [ArraySlice<UInt8>] = []
        var offset = 0
        while offset < stream.count {
            // Mostly small chunks (header splits), sometimes large ones spanning several frames.
            let size = Bool.random(using: &random) ? Int.random(in: 1...7, using: &random) : Int.random(in: 1...400, using: &random)
            let end = min(stream.count, offset + size)
            chunks.append(stream[offset..<end])
            offset = end
        }
        #expect(try Self.decode(chunks) == Self.bodies)
    }

    @Test("two frames in one chunk come out one after the other")
    func twoFramesInOneChunk() throws {
        var decoder = FrameDecoder()
        decoder.append(Frame.encode(body: [1, 2]) + Frame.encode(body: [3]))
        #expect(try decoder.next() == [1, 2])
        #expect(try decoder.next() == [3])
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == 0)
    }

    @Test("a frame and a half: the half waits for the rest")
    func frameAndAHalf() throws {
        let second = Frame.encode(body: [4, 5, 6, 7])
        var decoder = FrameDecoder()
        decoder.append(Frame.encode(body: [1]) + second.prefix(6))
        #expect(try decoder.next() == [1])
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == 6)
        decoder.append(second.dropFirst(6))
        #expect(try decoder.next() == [4, 5, 6, 7])
    }

    @Test("an incomplete header returns nil without consuming anything")
    func partialHeader() throws {
        var decoder = FrameDecoder()
        #expect(try decoder.next() == nil)
        decoder.append([5, 0, 0])
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == 3)
    }

    @Test("the unsafe-pointer append is the same as the collection one")
    func appendRawBuffer() throws {
        let frame = Frame.encode(body: [9, 8, 7])
        var decoder = FrameDecoder()
        frame.withUnsafeBytes { decoder.append($0) }
        #expect(try decoder.next() == [9, 8, 7])
    }

    @Test("a length above the limit throws .frameTooLarge as soon as the header is in")
    func frameTooLarge() throws {
        var decoder = FrameDecoder(maximumBodySize: 16)
        decoder.append([17, 0, 0, 0])
        #expect(throws: WireError(.frameTooLarge(length: 17, limit: 16))) { try decoder.next() }

        var atLimit = FrameDecoder(maximumBodySize: 16)
        atLimit.append(Frame.encode(body: [UInt8](repeating: 1, count: 16)))
        #expect(try atLimit.next()?.count == 16)

        var huge = FrameDecoder()
        huge.append([0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: WireError(.frameTooLarge(length: 0xFFFF_FFFF, limit: Frame.defaultMaximumBodySize))) {
            try huge.next()
        }
    }

    @Test("a zero-length frame throws .emptyFrame")
    func emptyFrame() {
        var decoder = FrameDecoder()
        decoder.append([0, 0, 0, 0, 1, 0, 0, 0, 1])
        #expect(throws: WireError(.emptyFrame)) { try decoder.next() }
    }

    @Test("a long stream through the compaction path keeps every byte in order")
    func longStreamCompacts() throws {
        var random = SplitMix64(seed: 7)
        var bodies: [[UInt8]] = []
        var stream: [UInt8] = []
        for index in 0..<3000 {
            let body = (0..<Int.random(in: 1...120, using: &random)).map { UInt8(truncatingIfNeeded: $0 &+ index) }
            bodies.append(body)
            Frame.append(body: body, to: &stream)
        }
        var chunks: [ArraySlice<UInt8>] = []
        var offset = 0
        while offset < stream.count {
            let end = min(stream.count, offset + Int.random(in: 1...5000, using: &random))
            chunks.append(stream[offset..<end])
            offset = end
        }
        #expect(try Self.decode(chunks) == bodies)
    }

    @Test("a receipt's frame prefix and its data are the frame `.receipt` encodes to, and decode to it", arguments: [0, 1, 70_000])
    func receiptPrefix(size: Int) throws {
        let data = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let frame = Frame.receiptPrefix(requestID: 0xA1B2_C3D4, dataCount: data.count) + data
        #expect(frame == Frame.encode(body: ServerMessage.receipt(requestID: 0xA1B2_C3D4, data: data).encode()))
        var decoder = FrameDecoder(maximumBodySize: 1 << 20)
        decoder.append(frame)
        let body = try #require(try decoder.next())
        #expect(try ServerMessage.decode(body) == .receipt(requestID: 0xA1B2_C3D4, data: data))
    }
}
