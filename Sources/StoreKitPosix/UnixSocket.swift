import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// Outcome of a non-blocking read or write: EAGAIN is a value, not an error.
public enum IOResult: Equatable, Sendable {
    case transferred(Int)
    case wouldBlock
    case endOfFile
}

/// Thin wrappers over the socket syscalls used by the daemon, the client library and the CLI.
public enum UnixSocket {
    /// Binds `path` (removing a stale socket file first) and listens; the fd is non-blocking.
    public static func listen(path: String, mode: mode_t, backlog: Int32 = 4096) throws(Errno) -> Int32 {
        var status = stat()
        if lstat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFSOCK {
            unlink(path)
        }
        let fd = try retryingSyscall { storekit_listen_unix(path, backlog, 1) }
        if chmod(path, mode) != 0 {
            let error = Errno.current
            close(fd)
            throw error
        }
        return fd
    }

    /// A blocking connect to the socket at `path`.
    public static func connect(path: String) throws(Errno) -> Int32 {
        try retryingSyscall { storekit_connect_unix(path) }
    }

    /// Accepts one connection as a non-blocking, close-on-exec fd; nil when none is pending.
    public static func accept(_ listener: Int32) throws(Errno) -> Int32? {
        do {
            return try retryingSyscall(.accept, on: listener) { storekit_accept(listener) }
        } catch {
            if error == .wouldBlock { return nil }
            throw error
        }
    }

    public static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> IOResult {
        do {
            let count = try retryingSyscall(.read, on: fd) { Glibc.read(fd, buffer.baseAddress, buffer.count) }
            return count == 0 ? .endOfFile : .transferred(count)
        } catch {
            if error == .wouldBlock { return .wouldBlock }
            throw error
        }
    }

    public static func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) throws(Errno) -> IOResult {
        do {
            let count = try retryingSyscall(.send, on: fd) { send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL)) }
            return .transferred(count)
        } catch {
            if error == .wouldBlock { return .wouldBlock }
            throw error
        }
    }

    /// Writes bytes with `descriptor` attached to the first (SCM_RIGHTS): the peer receives a
    /// duplicate of it with the read that takes that byte; the caller still owns (and closes) its own.
    public static func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, passing descriptor: Int32) throws(Errno) -> IOResult {
        do {
            let count = try retryingSyscall(.send, on: fd) { storekit_send_with_fd(fd, buffer.baseAddress, buffer.count, descriptor) }
            return .transferred(count)
        } catch {
            if error == .wouldBlock { return .wouldBlock }
            throw error
        }
    }

    /// Writes `buffers` in order in one gathering write (sendmsg(2)), with `descriptor`, if any,
    /// attached to the first byte (SCM_RIGHTS); the caller still owns (and closes) its own.
    public static func write(_ fd: Int32, gathering buffers: UnsafeBufferPointer<iovec>, passing descriptor: Int32?) throws(Errno) -> IOResult {
        do {
            let count = try retryingSyscall(.send, on: fd) {
                storekit_sendv(fd, buffers.baseAddress, Int32(buffers.count), descriptor ?? -1)
            }
            return .transferred(count)
        } catch {
            if error == .wouldBlock { return .wouldBlock }
            throw error
        }
    }

    /// Reads what the socket holds, with any descriptors that came with it (SCM_RIGHTS, received
    /// close-on-exec; at most 253 a read). The caller owns them.
    public static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, descriptors: inout [Int32]) throws(Errno) -> IOResult {
        var received = [Int32](repeating: -1, count: 253)
        var count: Int32 = 0
        do {
            let bytes = try retryingSyscall(.read, on: fd) {
                storekit_recv_with_fds(fd, buffer.baseAddress?.assumingMemoryBound(to: CChar.self), buffer.count,
                                       &received, Int32(received.count), &count)
            }
            descriptors.append(contentsOf: received.prefix(Int(count)))
            return bytes == 0 ? .endOfFile : .transferred(bytes)
        } catch {
            if error == .wouldBlock { return .wouldBlock }
            throw error
        }
    }

    /// Writes all of `bytes` on a blocking fd.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(Errno) {
        var offset = 0
        while offset < bytes.count {
            let result = bytes.withUnsafeBytes { raw in
                Result { () throws(Errno) -> IOResult in try write(fd, UnsafeRawBufferPointer(rebasing: raw[offset...])) }
            }
            switch try result.get() {
            case .transferred(let count): offset += count
            case .wouldBlock, .endOfFile: throw Errno.wouldBlock
            }
        }
    }

    /// Binds a datagram socket at `path` (blocking), e.g. to play the service manager's notify socket.
    public static func bindDatagram(path: String) throws(Errno) -> Int32 {
        unlink(path)
        return try retryingSyscall { storekit_bind_unix_dgram(path) }
    }

    /// Receives one datagram as text, waiting at most `timeoutMilliseconds`; nil on timeout.
    public static func receiveDatagram(_ fd: Int32, timeoutMilliseconds: Int32) -> String? {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, timeoutMilliseconds) > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, 0)
        guard count >= 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }

    /// Waits up to `timeoutMilliseconds` (-1: no limit) until `fd` is readable or its peer hung up
    /// (poll POLLIN); false when the time ran out.
    public static func waitUntilReadable(_ fd: Int32, timeoutMilliseconds: Int32) throws(Errno) -> Bool {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return try retryingSyscall { poll(&descriptor, 1, timeoutMilliseconds) } > 0
    }

    /// SO_RCVTIMEO: a blocking read of `fd` gives up (EAGAIN) after `seconds`.
    public static func setReceiveTimeout(_ fd: Int32, seconds: Double) throws(Errno) {
        var value = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
        _ = try retryingSyscall(.socketOption, on: fd) { setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size)) }
    }

    public static func setNonBlocking(_ fd: Int32, _ on: Bool) throws(Errno) {
        _ = try retryingSyscall { storekit_set_nonblocking(fd, on ? 1 : 0) }
    }

    public static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }
}

/// Who is on the other end of a Unix socket, as the kernel reports it (SO_PEERCRED).
public struct PeerCredentials: Equatable, Sendable {
    public let pid: Int32
    public let uid: UInt32
    public let gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    public static func of(_ fd: Int32) throws(Errno) -> PeerCredentials {
        var credentials = storekit_ucred()
        _ = try retryingSyscall(.peerCredentials, on: fd) { storekit_peer_credentials(fd, &credentials) }
        return PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
    }
}
