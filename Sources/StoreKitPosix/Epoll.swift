import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// An epoll instance: the daemon's serving loop waits on it.
public final class Epoll {
    public struct Events: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public static let readable = Events(rawValue: EPOLLIN.rawValue)
        public static let writable = Events(rawValue: EPOLLOUT.rawValue)
        public static let hangup = Events(rawValue: EPOLLHUP.rawValue)
        public static let error = Events(rawValue: EPOLLERR.rawValue)
        public static let peerClosed = Events(rawValue: EPOLLRDHUP.rawValue)
    }

    public let fd: Int32
    private var tokens = [UInt64](repeating: 0, count: 256)
    private var events = [UInt32](repeating: 0, count: 256)

    public init() throws(Errno) {
        fd = try retryingSyscall { epoll_create1(Int32(EPOLL_CLOEXEC)) }
    }

    deinit { Glibc.close(fd) }

    public func add(_ target: Int32, events: Events, token: UInt64) throws(Errno) {
        _ = try retryingSyscall(.epollControl, on: target) { storekit_epoll_ctl(fd, EPOLL_CTL_ADD, target, events.rawValue, token) }
    }

    public func modify(_ target: Int32, events: Events, token: UInt64) throws(Errno) {
        _ = try retryingSyscall(.epollControl, on: target) { storekit_epoll_ctl(fd, EPOLL_CTL_MOD, target, events.rawValue, token) }
    }

    public func remove(_ target: Int32) {
        _ = storekit_epoll_ctl(fd, EPOLL_CTL_DEL, target, 0, 0)
    }

    /// Whether any fd is ready now. Level-triggered readiness is reported again by `wait`.
    public func hasReadyEvents() -> Bool {
        tokens.withUnsafeMutableBufferPointer { tokenBuffer in
            events.withUnsafeMutableBufferPointer { eventBuffer in
                storekit_epoll_wait(fd, tokenBuffer.baseAddress, eventBuffer.baseAddress, 1, 0)
            }
        } > 0
    }

    /// Waits up to `timeout` ms (-1 forever) and calls `body` for each ready (token, events).
    public func wait(timeout: Int32, _ body: (UInt64, Events) -> Void) throws(Errno) {
        let count: Int32
        let result = tokens.withUnsafeMutableBufferPointer { tokenBuffer in
            events.withUnsafeMutableBufferPointer { eventBuffer in
                storekit_epoll_wait(fd, tokenBuffer.baseAddress, eventBuffer.baseAddress, 256, timeout)
            }
        }
        if result < 0 {
            let error = Errno.current
            if error == .interrupted { return }
            throw error
        }
        count = result
        for index in 0..<Int(count) { body(tokens[index], Events(rawValue: events[index])) }
    }
}

/// An eventfd used to wake the loop from another thread (signals, background checks).
public final class WakeupEvent: @unchecked Sendable {   // an eventfd's write and read are thread-safe
    private let event: FileDescriptor
    /// The eventfd's number, for epoll: valid while this lives.
    public var fd: Int32 { event.rawValue }

    public init() throws(Errno) {
        event = FileDescriptor(adopting: try retryingSyscall { eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK)) })
    }

    public func signal() {
        var one: UInt64 = 1
        _ = Glibc.write(fd, &one, 8)
    }

    public func drain() {
        var value: UInt64 = 0
        _ = Glibc.read(fd, &value, 8)
    }
}
