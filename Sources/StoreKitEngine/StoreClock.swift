import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

/// The store's clock: real time plus a persisted offset that `storekitctl clock advance` grows,
/// and the `TimeRate` that sets how long subscription periods last on it.
/// Every transaction date and scheduled event is read from it, never from the wall clock directly.
public struct StoreClock: Sendable, Equatable {
    /// Milliseconds added to real time. Only ever grows, so store time never goes back.
    public var offsetMilliseconds: Int64
    public var rate: TimeRate

    /// The clock is never advanced past 9999-12-31T23:59:59.999Z: RFC 3339 has four-digit years,
    /// and every date computed from the clock (renewals, expiries) stays far from Int64's limits.
    public static let latestMilliseconds: Int64 = 253_402_300_799_999

    public init(offsetMilliseconds: Int64 = 0, rate: TimeRate = .realTime) {
        self.offsetMilliseconds = offsetMilliseconds
        self.rate = rate
    }

    public static func realTimeMilliseconds() -> Int64 { WallClock.milliseconds() }

    public func now() -> Int64 { Self.realTimeMilliseconds() + offsetMilliseconds }
}
