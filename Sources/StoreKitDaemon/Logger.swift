import CSystemd
#if canImport(Glibc)
import Glibc
#endif

/// Where log lines go: native journald entries (structured fields) or plain stderr lines.
public enum LogTarget: Sendable, Equatable {
    case journal
    case stderr

    /// Journal when asked, or when stderr is the journal stream systemd gave us (`JOURNAL_STREAM`
    /// matches fd 2's device:inode); stderr otherwise — never a journal socket that may be absent.
    public static func detect(requested: String?, environment: [String: String]) -> LogTarget {
        switch requested {
        case "journal": return .journal
        case "stderr", "console": return .stderr
        default: break
        }
        guard let stream = environment["JOURNAL_STREAM"] else { return .stderr }
        let parts = stream.split(separator: ":")
        var status = stat()
        guard parts.count == 2, fstat(2, &status) == 0,
              let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return .stderr }
        return UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode ? .journal : .stderr
    }
}

/// Syslog priorities as journald uses them.
public enum LogPriority: Int, Sendable, Comparable {
    case err = 3, warning = 4, notice = 5, info = 6, debug = 7

    public static func < (lhs: LogPriority, rhs: LogPriority) -> Bool { lhs.rawValue < rhs.rawValue }

    var label: String {
        switch self {
        case .err: "error"
        case .warning: "warning"
        case .notice: "notice"
        case .info: "info"
        case .debug: "debug"
        }
    }
}

/// The daemon's one logger value: messages plus UPPER_CASE `STOREKIT_*` fields and a MESSAGE_ID.
public struct Logger: Sendable {
    public var target: LogTarget
    public var maximumPriority: LogPriority

    public init(target: LogTarget, maximumPriority: LogPriority = .info) {
        self.target = target
        self.maximumPriority = maximumPriority
    }

    /// Longest MESSAGE written, in bytes; longer ones are cut and say how much was cut.
    public static let messageLimit = 2048
    /// Longest field value written (fields carry client strings such as app ids).
    public static let fieldLimit = 256

    public func log(_ priority: LogPriority, _ rawMessage: String, id: MessageID? = nil, fields rawFields: [(String, String)] = []) {
        guard priority <= maximumPriority else { return }
        // Messages and fields carry strings clients chose (app ids, product ids, usernames): a
        // newline in one must not start a forged line, and a megabyte must not be written whole.
        let message = Self.sanitized(rawMessage, limit: Self.messageLimit)
        let fields = rawFields.map { ($0.0, Self.sanitized($0.1, limit: Self.fieldLimit)) }
        switch target {
        case .journal:
            var entries = ["MESSAGE=\(message)", "PRIORITY=\(priority.rawValue)", "SYSLOG_IDENTIFIER=storekitd"]
            if let id { entries.append("MESSAGE_ID=\(id.rawValue)") }
            for (key, value) in fields { entries.append("\(key)=\(value)") }
            Self.send(entries)
        case .stderr:
            var line = "storekitd[\(priority.label)]: \(message)"
            if !fields.isEmpty {
                line += " (" + fields.map { "\($0.0)=\($0.1)" }.joined(separator: " ") + ")"
            }
            line += "\n"
            var bytes = Array(line.utf8)
            _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
        }
    }

    /// `text` with control characters escaped (`\n`, `\t`, `\xNN`, `\u{NNNN}` for C1 and line
    /// separators) and cut at `limit` UTF-8 bytes with a note of what was cut.
    public static func sanitized(_ text: String, limit: Int) -> String {
        let utf8 = text.utf8
        if utf8.count <= limit, !utf8.contains(where: { $0 < 0x20 || $0 == 0x7f || $0 == 0xc2 || $0 == 0xe2 }) { return text }
        var result = ""
        result.reserveCapacity(min(utf8.count, limit) + 16)
        var written = 0
        var consumed = 0
        for scalar in text.unicodeScalars {
            let piece: String
            switch scalar.value {
            case 0x0a: piece = "\\n"
            case 0x09: piece = "\\t"
            case 0x0d: piece = "\\r"
            case 0x00..<0x20, 0x7f: piece = "\\x" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
            case 0x80..<0xa0, 0x2028, 0x2029: piece = "\\u{" + String(scalar.value, radix: 16) + "}"
            default: piece = String(scalar)
            }
            if written + piece.utf8.count > limit {
                result += "…[\(utf8.count - consumed) more bytes]"
                return result
            }
            result += piece
            written += piece.utf8.count
            consumed += scalar.utf8.count
        }
        return result
    }

    private static func send(_ entries: [String]) {
        var buffers = entries.map { Array($0.utf8) }
        var vectors: [iovec] = []
        vectors.reserveCapacity(buffers.count)
        for index in buffers.indices {
            buffers[index].withUnsafeMutableBytes { raw in
                vectors.append(iovec(iov_base: raw.baseAddress, iov_len: raw.count))
            }
        }
        // The iovecs point into `buffers`, which stays alive (and unmoved) until after the call.
        withExtendedLifetime(buffers) {
            _ = sd_journal_sendv(&vectors, Int32(vectors.count))
        }
    }

    public func error(_ message: String, id: MessageID? = nil, fields: [(String, String)] = []) {
        log(.err, message, id: id, fields: fields)
    }

    public func warning(_ message: String, id: MessageID? = nil, fields: [(String, String)] = []) {
        log(.warning, message, id: id, fields: fields)
    }

    public func notice(_ message: String, id: MessageID? = nil, fields: [(String, String)] = []) {
        log(.notice, message, id: id, fields: fields)
    }

    public func info(_ message: String, id: MessageID? = nil, fields: [(String, String)] = []) {
        log(.info, message, id: id, fields: fields)
    }

    public func debug(_ message: String, id: MessageID? = nil, fields: [(String, String)] = []) {
        log(.debug, message, id: id, fields: fields)
    }
}

/// One MESSAGE_ID per kind of event; `systemd/storekitd.catalog` explains each.
public enum MessageID: String, Sendable, CaseIterable {
    case started = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d60"
    case stopped = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d61"
    case stateChanged = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d62"
    case finished = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d63"
    case observerConnected = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d64"
    case observerDisconnected = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d65"
    case refused = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d66"
    case reloaded = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d67"
    case recovery = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d68"
    case integrityFailure = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d69"
    case protocolError = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d6a"
    case storageFailure = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d6b"
    case observerActivation = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d6c"
    case signingKey = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d6d"
    case signingKeyExposed = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d6e"
    case contentUnavailable = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d6f"
    case contentRequested = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d70"
    case entitlementsRevoked = "6c3b1d2e9f0a4b7c8d5e1f2a3b4c5d71"
}
