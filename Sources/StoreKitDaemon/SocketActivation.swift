import CSystemd
import StoreKitPosix
#if canImport(Glibc)
import Glibc
#endif

/// Listening sockets passed by the service manager, taken by name (`client`, `control`).
struct SocketActivation {
    var listeners: [SocketKind: Int32] = [:]
    /// Connected sessions a previous run of the daemon put in the FD store (name `session.…`).
    var sessions: [(fd: Int32, name: String)] = []

    /// Reads `LISTEN_FDS`/`LISTEN_FDNAMES` (and unsets them); unknown or unfit fds are closed with a log line.
    static func receive(logger: Logger) -> SocketActivation {
        var activation = SocketActivation()
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        let count = sd_listen_fds_with_names(1, &names)
        guard count > 0 else { return activation }
        defer {
            if let names {
                for index in 0..<Int(count) { free(names[index]) }
                free(names)
            }
        }
        for index in 0..<Int(count) {
            let fd = SD_LISTEN_FDS_START + Int32(index)
            let name = names?[index].map { String(cString: $0) } ?? "unknown"
            if name.hasPrefix(SessionStoreName.prefix) {
                if sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 0, nil, 0) > 0 {
                    try? UnixSocket.setNonBlocking(fd, true)
                    activation.sessions.append((fd, name))
                } else {
                    logger.warning("Closing stored file descriptor \(fd) named '\(name)': not a connected Unix stream socket")
                    close(fd)
                }
                continue
            }
            guard let kind = SocketKind(rawValue: name) else {
                logger.warning("Closing passed file descriptor \(fd) with unknown name '\(name)'")
                close(fd)
                continue
            }
            guard sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0 else {
                logger.warning("Closing passed file descriptor \(fd) named '\(name)': not a listening Unix stream socket")
                close(fd)
                continue
            }
            guard activation.listeners[kind] == nil else {
                logger.warning("Closing duplicate passed socket \(fd) named '\(name)'")
                close(fd)
                continue
            }
            try? UnixSocket.setNonBlocking(fd, true)
            activation.listeners[kind] = fd
        }
        return activation
    }
}

/// How a session is named in the FD store: `session.<unique>.<observing 0|1>.<app>`.
enum SessionStoreName {
    static let prefix = "session."

    static func make(unique: String, observing: Bool, app: String) -> String? {
        let name = "\(prefix)\(unique).\(observing ? 1 : 0).\(app)"
        // FDNAME= allows up to 255 printable characters, no ':'.
        return name.utf8.count <= 255 && !name.contains(":") ? name : nil
    }

    static func parse(_ name: String) -> (observing: Bool, app: String)? {
        let parts = name.dropFirst(prefix.count).split(separator: ".", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[1] == "0" || parts[1] == "1", !parts[2].isEmpty else { return nil }
        return (parts[1] == "1", String(parts[2]))
    }
}
