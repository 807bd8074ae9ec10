/// Framing: every message travels as `u32 little-endian body length` + body, where the body starts
/// with a one-byte message type. The decoder accepts bytes in any split and yields whole bodies.
public enum Frame {
    public static let headerSize = 4
    public static let defaultMaximumBodySize = 1 << 20

    /// Appends one frame holding `body` to `output`.
    public static func append(body: [UInt8], to output: inout [UInt8]) {
        let length = UInt32(body.count).littleEndian
        withUnsafeBytes(of: length) { output.append(contentsOf: $0) }
        output.append(contentsOf: body)
    }

    /// The frame of `ServerMessage.receipt(requestID:data:)` up to its data: the frame is these
    /// bytes followed by the data's, so that a kept receipt of megabytes is sent as it is kept,
    /// not copied into each reply (the same bytes as `encode(body: message.encode())`).
    public static func receiptPrefix(requestID: UInt32, dataCount: Int) -> [UInt8] {
        var writer = WireWriter()
        writer.u8(ServerMessage.Tag.receipt.rawValue)
        writer.u32(requestID)
        writer.u32(UInt32(dataCount))
        var output: [UInt8] = []
        output.reserveCapacity(headerSize + writer.bytes.count)
        let length = UInt32(writer.bytes.count + dataCount).littleEndian
        withUnsafeBytes(of: length) { output.append(contentsOf: $0) }
        output.append(contentsOf: writer.bytes)
        return output
    }

    public static func encode(body: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(body.count + headerSize)
        append(body: body, to: &output)
        return output
    }
}

/// Incremental frame decoder: feed it bytes as they arrive, take complete bodies out.
public struct FrameDecoder: Sendable {
    public let maximumBodySize: Int
    private var buffer: [UInt8] = []
    private var start = 0

    public init(maximumBodySize: Int = Frame.defaultMaximumBodySize) {
        self.maximumBodySize = maximumBodySize
    }

    /// Bytes received but not yet returned as a frame (a partial frame, when non-zero).
    public var bufferedByteCount: Int { buffer.count - start }

    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 65_536 && start * 2 > buffer.count {
            buffer.removeSubrange(0..<start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    public mutating func append(_ pointer: UnsafeRawBufferPointer) {
        append(pointer.bindMemory(to: UInt8.self))
    }

    /// The next complete body, nil when more bytes are needed; throws when the stream is invalid.
    public mutating func next() throws(WireError) -> [UInt8]? {
        let available = buffer.count - start
        guard available >= Frame.headerSize else { return nil }
        var length = 0
        for index in 0..<4 { length |= Int(buffer[start + index]) << (8 * index) }
        guard length <= maximumBodySize else {
            throw WireError(.frameTooLarge(length: length, limit: maximumBodySize))
        }
        guard length > 0 else { throw WireError(.emptyFrame) }
        guard available >= Frame.headerSize + length else { return nil }
        let bodyStart = start + Frame.headerSize
        let body = Array(buffer[bodyStart..<(bodyStart + length)])
        start = bodyStart + length
        return body
    }
}
