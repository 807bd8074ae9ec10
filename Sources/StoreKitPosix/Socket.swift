import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// A Unix socket (listening or connected) and its one owner, who closes it exactly once.
///
/// `~Copyable`, as `FileDescriptor`: passing it moves it, `close()` consumes it and reports what
/// `close(2)` said, and an owner that goes away without calling it closes it in `deinit`. EBADF
/// from `close` means the number was closed behind the owner's back (two owners): a bug, stopped
/// at once. Each method borrows it for one call of `UnixSocket`'s wrappers. `rawValue` is the
/// number for a call that only names it (epoll, the FD store), valid while the owner keeps it.
public struct Socket: ~Copyable {
    public let rawValue: Int32

    /// Takes ownership of an open socket.
    public init(adopting rawValue: Int32) {
        precondition(rawValue >= 0, "not a socket: \(rawValue)")
        self.rawValue = rawValue
    }

    deinit { _ = try? Self.close(rawValue) }

    /// Closes the socket. EINTR counts as closed (Linux has released the number).
    public consuming func close() throws(Errno) {
        let fd = rawValue
        discard self
        try Self.close(fd)
    }

    /// Closes `socket` if it is still open and leaves nil: what an owner that keeps its socket in
    /// an optional (a session, a listener) calls once; returns what `close(2)` said.
    public static func close(_ socket: inout Socket?) -> Errno? {
        do throws(Errno) {
            try socket.take()?.close()
            return nil
        } catch {
            return error
        }
    }

    static func close(_ fd: Int32) throws(Errno) {
        guard Glibc.close(fd) != 0 else { return }
        let error = Errno.current
        precondition(error != .badFileDescriptor, "socket \(fd) was closed by someone other than its owner")
        if error != .interrupted { throw error }
    }

    /// Binds `path` (removing a stale socket file first), listens, and sets its mode; non-blocking.
    public static func listen(path: String, mode: mode_t, backlog: Int32 = 4096) throws(Errno) -> Socket {
        Socket(adopting: try UnixSocket.listen(path: path, mode: mode, backlog: backlog))
    }

    /// Accepts one connection, non-blocking and close-on-exec; nil when none is pending.
    public borrowing func accept() throws(Errno) -> Socket? {
        try UnixSocket.accept(rawValue).map { Socket(adopting: $0) }
    }

    public borrowing func read(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> IOResult {
        try UnixSocket.read(rawValue, into: buffer)
    }

    public borrowing func write(_ buffer: UnsafeRawBufferPointer) throws(Errno) -> IOResult {
        try UnixSocket.write(rawValue, buffer)
    }

    /// Writes with `descriptor` attached to the first byte (SCM_RIGHTS).
    public borrowing func write(_ buffer: UnsafeRawBufferPointer, passing descriptor: Int32) throws(Errno) -> IOResult {
        try UnixSocket.write(rawValue, buffer, passing: descriptor)
    }

    /// Writes `buffers` in order in one gathering write, `descriptor` (if any) attached to the first byte.
    public borrowing func write(gathering buffers: UnsafeBufferPointer<iovec>, passing descriptor: Int32?) throws(Errno) -> IOResult {
        try UnixSocket.write(rawValue, gathering: buffers, passing: descriptor)
    }

    public borrowing func setNonBlocking(_ on: Bool) throws(Errno) {
        try UnixSocket.setNonBlocking(rawValue, on)
    }

    /// Who is on the other end (SO_PEERCRED).
    public borrowing func peerCredentials() throws(Errno) -> PeerCredentials {
        try PeerCredentials.of(rawValue)
    }
}

/// The signalfd the serving loop reads its signals from (SIGTERM, SIGINT, SIGHUP, blocked in
/// every thread before any starts), owned and closed once.
public struct SignalFD: ~Copyable {
    public let rawValue: Int32

    /// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and opens a non-blocking signalfd for them.
    public init() throws(Errno) {
        rawValue = try retryingSyscall { storekit_signalfd() }
    }

    deinit { _ = Glibc.close(rawValue) }

    /// The next pending signal's number; nil when none is pending.
    public borrowing func next() -> Int32? {
        let signal = storekit_read_signal(rawValue)
        return signal == 0 ? nil : signal
    }
}

/// A process's pidfd: a handle on that process (not on whichever process gets its pid next),
/// owned and closed once.
public struct PidFD: ~Copyable {
    public let rawValue: Int32

    /// Adopts an open pidfd (`SO_PEERPIDFD`'s).
    public init(adopting rawValue: Int32) {
        precondition(rawValue >= 0, "not a pidfd: \(rawValue)")
        self.rawValue = rawValue
    }

    /// `pidfd_open(pid)`.
    public init(pid: Int32) throws(Errno) {
        rawValue = try retryingSyscall { storekit_pidfd_open(pid) }
    }

    deinit { _ = Glibc.close(rawValue) }

    /// Whether the process has exited (its pidfd is readable).
    public borrowing func hasExited() -> Bool { storekit_poll_now(rawValue, Int16(POLLIN)) == 1 }
}
