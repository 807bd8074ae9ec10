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
