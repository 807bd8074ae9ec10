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

    public func log(_ priority: LogPriority, _ message: String, id: MessageID? = nil, fields: [(String, String)] = []) {
        guard priority <= maximumPriority else { return }
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
}
