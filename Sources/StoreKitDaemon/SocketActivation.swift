import CSystemd
import StoreKitPosix
#if canImport(Glibc)
import Glibc
#endif

/// Listening sockets passed by the service manager, taken by name (`client`, `control`).
struct SocketActivation {
    var listeners: [SocketKind: Int32] = [:]

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
