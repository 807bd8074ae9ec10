#if canImport(Glibc)
import Glibc
#endif

/// The store's clock: real time plus a persisted offset that `storekitctl clock advance` grows.
/// Every transaction date and scheduled event is read from it, never from the wall clock directly.
public struct StoreClock: Sendable, Equatable {
    /// Milliseconds added to real time.
    public var offsetMilliseconds: Int64

    public init(offsetMilliseconds: Int64 = 0) {
        self.offsetMilliseconds = offsetMilliseconds
    }

    public static func realTimeMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    public func now() -> Int64 { Self.realTimeMilliseconds() + offsetMilliseconds }
}
