import StoreKitPosix

/// Transaction identifiers look like the App Store's: 16 digits, from `first` up. Every backend
/// hands them out above the clock's (`fromClock()`), so a ledger moved into another database
/// keeps giving ids above every id it gave before.
public enum TransactionIDs {
    public static let first: UInt64 = 2_000_000_000_000_001

    /// Microseconds since 2026-01-01T00:00:00Z, above `first`: 16 decimal digits, like the App
    /// Store's, for the next 250 years. No daemon gives ids faster than one per microsecond, so
    /// ids from the clock stay ahead of every id given earlier on this machine unless the wall
    /// clock is set back.
    public static func fromClock() -> UInt64 {
        let microseconds = WallClock.microseconds() - clockEpochMicroseconds
        return first + UInt64(max(microseconds, 0))
    }

    static let clockEpochMicroseconds: Int64 = 1_767_225_600 * 1_000_000
}
