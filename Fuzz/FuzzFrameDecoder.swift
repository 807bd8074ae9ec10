// libFuzzer target `frame-decoder`: FrameDecoder fed a byte stream in arbitrary pieces, the way the
// daemon's read loop feeds it, and every complete body handed to ClientMessage.decode.
//
// Input layout (so that the fuzzer controls the limit and the split as well as the bytes):
//   byte 0  maximum body size: 0 = Frame.defaultMaximumBodySize (1 MiB), n = n * 4 bytes
//   byte 1  how the stream is cut: 0 = one append, 1 = one byte per append, n = pseudo-random
//           pieces of 1 ... 2^(n % 13) bytes from a generator seeded with n
//   byte 2  the stream is the rest of the input repeated 1 + (byte 2 % 32) times (reaches the
//           decoder's buffer compaction, which starts past 64 KiB consumed, with small inputs)
//   rest    the stream: u32-LE-length-prefixed frames, or anything
//
// Properties checked: nothing traps; the frames, the error and the number of buffered bytes left
// are the same as a one-pass reference decoder over the whole stream computes; every body is
// non-empty and within the limit; both `append` overloads (collection, raw buffer) are used.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFrameDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeBufferPointer(start: data, count: size)
    guard input.count >= 3 else { return 0 }
    let limit = input[0] == 0 ? Frame.defaultMaximumBodySize : Int(input[0]) * 4
    let cut = input[1]
    let repeats = 1 + Int(input[2] % 32)
    var stream: [UInt8] = []
    stream.reserveCapacity((input.count - 3) * repeats)
    for _ in 0..<repeats { stream.append(contentsOf: input[3...]) }

    let expected = ReferenceFrames(stream, limit: limit)

    var decoder = FrameDecoder(maximumBodySize: limit)
    var frames: [[UInt8]] = []
    var failure: WireError?
    var generator = UInt64(cut) &* 0x9E37_79B9_7F4A_7C15 | 1
    var offset = 0
    var piece = 0
    feeding: while offset < stream.count {
        let length: Int
        switch cut {
        case 0: length = stream.count
        case 1: length = 1
        default:
            generator ^= generator << 13; generator ^= generator >> 7; generator ^= generator << 17
            length = 1 + Int(generator % UInt64(1 << (Int(cut) % 13)))
        }
        let end = min(offset + length, stream.count)
        if piece % 2 == 0 {
            decoder.append(stream[offset..<end])
        } else {
            stream.withUnsafeBytes { raw in decoder.append(UnsafeRawBufferPointer(rebasing: raw[offset..<end])) }
        }
        piece += 1
        offset = end
        do {
            while let body = try decoder.next() {
                guard !body.isEmpty, body.count <= limit else {
                    fatalError("FrameDecoder returned a body of \(body.count) bytes with limit \(limit)")
                }
                frames.append(body)
                _ = try? ClientMessage.decode(body)
            }
        } catch {
            failure = error
            break feeding
        }
        guard decoder.bufferedByteCount >= 0, decoder.bufferedByteCount <= offset else {
            fatalError("FrameDecoder reports \(decoder.bufferedByteCount) buffered bytes after \(offset) appended")
        }
    }

    guard frames == expected.frames else {
        fatalError("FrameDecoder returned \(frames.count) frames, the reference \(expected.frames.count) (limit \(limit), cut \(cut))")
    }
    guard failure == expected.failure else {
        fatalError("FrameDecoder error \(String(describing: failure)) but reference \(String(describing: expected.failure))")
    }
    if failure == nil, decoder.bufferedByteCount != expected.leftover {
        fatalError("FrameDecoder keeps \(decoder.bufferedByteCount) bytes, the reference \(expected.leftover)")
    }
    return 0
}

/// The framing rules of docs/protocol.md §2 applied in one pass over the whole stream.
struct ReferenceFrames {
    var frames: [[UInt8]] = []
    var failure: WireError?
    var leftover = 0

    init(_ stream: [UInt8], limit: Int) {
        var at = 0
        while stream.count - at >= 4 {
            let length = Int(stream[at]) | Int(stream[at + 1]) << 8 | Int(stream[at + 2]) << 16 | Int(stream[at + 3]) << 24
            if length > limit {
                failure = WireError(.frameTooLarge(length: length, limit: limit))
                return
            }
            if length == 0 {
                failure = WireError(.emptyFrame)
                return
            }
            guard stream.count - at - 4 >= length else { break }
            frames.append(Array(stream[(at + 4)..<(at + 4 + length)]))
            at += 4 + length
        }
        leftover = stream.count - at
    }
}
