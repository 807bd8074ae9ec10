/// Why a byte sequence is not a valid frame or message. Decoding never traps on bad input.
public struct WireError: Error, Equatable, CustomStringConvertible, Sendable {
    public enum Code: Equatable, Sendable {
        case truncated
        case frameTooLarge(length: Int, limit: Int)
        case emptyFrame
        case unknownMessageType(UInt8)
        case invalidUTF8
        case invalidValue(String)
        case trailingBytes(Int)
        case versionMismatch(client: UInt16, server: UInt16)
    }

    public let code: Code

    public init(_ code: Code) { self.code = code }

    public var description: String {
        switch code {
        case .truncated: return "message is truncated"
        case .frameTooLarge(let length, let limit): return "frame of \(length) bytes exceeds the limit of \(limit) bytes"
        case .emptyFrame: return "frame has no message type"
        case .unknownMessageType(let type): return "unknown message type \(type)"
        case .invalidUTF8: return "string is not valid UTF-8"
        case .invalidValue(let what): return "invalid value: \(what)"
        case .trailingBytes(let count): return "\(count) unexpected bytes after the message"
        case .versionMismatch(let client, let server): return "protocol version \(client) is not supported (server speaks \(server))"
        }
    }
}
