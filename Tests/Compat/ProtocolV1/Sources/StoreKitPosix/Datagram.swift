import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// One datagram with the file descriptors that came with it (SCM_RIGHTS).
public struct ReceivedDatagram: Sendable {
    public let text: String
    public let fds: [Int32]
}

extension UnixSocket {
    /// Receives one datagram and its fds, waiting at most `timeoutMilliseconds`; nil on timeout.
    public static func receiveDatagramWithFDs(_ fd: Int32, timeoutMilliseconds: Int32) -> ReceivedDatagram? {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, timeoutMilliseconds) > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: 65_536)
        var fds = [Int32](repeating: -1, count: 253)
        var count: Int32 = 0
        let length = storekit_recv_with_fds(fd, &buffer, buffer.count, &fds, 253, &count)
        guard length >= 0 else { return nil }
        let text = String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return ReceivedDatagram(text: text, fds: Array(fds.prefix(Int(count))))
    }
}
