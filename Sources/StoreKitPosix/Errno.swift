import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// A failed system call's errno, as a typed error.
public struct Errno: Error, Equatable, Hashable, CustomStringConvertible, Sendable {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static var current: Errno { Errno(rawValue: storekit_errno()) }

    public static let wouldBlock = Errno(rawValue: EAGAIN)
    public static let interrupted = Errno(rawValue: EINTR)
    public static let notFound = Errno(rawValue: ENOENT)
    public static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    public static let brokenPipe = Errno(rawValue: EPIPE)
    public static let connectionReset = Errno(rawValue: ECONNRESET)
    public static let noSpace = Errno(rawValue: ENOSPC)
    public static let addressInUse = Errno(rawValue: EADDRINUSE)
    public static let badFileDescriptor = Errno(rawValue: EBADF)
    public static let fileExists = Errno(rawValue: EEXIST)
    public static let invalidArgument = Errno(rawValue: EINVAL)
    public static let notSupported = Errno(rawValue: EOPNOTSUPP)
    public static let notImplemented = Errno(rawValue: ENOSYS)
    public static let diskQuotaExceeded = Errno(rawValue: EDQUOT)
    /// What opening a symbolic link with `O_NOFOLLOW` fails with.
    public static let tooManySymbolicLinks = Errno(rawValue: ELOOP)

    public var description: String { String(cString: strerror(rawValue)) }
}

/// The one place libc is called for fd-returning syscalls: retries EINTR, turns -1 into `Errno`.
@inline(__always)
public func retryingSyscall<T: BinaryInteger>(_ call: () -> T) throws(Errno) -> T {
    while true {
        let result = call()
        if result >= 0 { return result }
        let error = Errno.current
        if error == .interrupted { continue }
        throw error
    }
}

/// A system call made on a descriptor through `retryingSyscall(_:on:_:)`: what a test may make
/// fail (`SyscallFailures`).
public enum Syscall: String, Sendable, Hashable, CaseIterable {
    case read, write, send, accept, fsync, fdatasync, fstat, fchmod, ftruncate, fallocate, flock, syncFileRange, fstatvfs
    case epollControl, socketOption, peerCredentials
}

/// `retryingSyscall` for a call on the descriptor `fd`: in a build with test hooks, a failure
/// injected for this call on this descriptor (`SyscallFailures.inject`) is returned instead of
/// making the call, EINTR retried as a real one is, so a test makes a disk full, an I/O error or
/// an interrupted call happen where the daemon would meet it.
@inline(__always)
public func retryingSyscall<T: BinaryInteger>(_ syscall: Syscall, on fd: Int32, _ call: () -> T) throws(Errno) -> T {
    while true {
        #if STOREKIT_TEST_HOOKS
        if let injected = SyscallFailures.take(syscall, on: fd) {
            if injected == .interrupted { continue }
            throw injected
        }
        #endif
        let result = call()
        if result >= 0 { return result }
        let error = Errno.current
        if error == .interrupted { continue }
        throw error
    }
}
