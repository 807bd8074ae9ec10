#if canImport(Glibc)
import Glibc
#endif

/// The monotonic clock (`CLOCK_MONOTONIC`: never set back, not counting suspend), the one every
/// deadline, timeout and rate in the project reads, in the unit the caller needs.
public enum Monotonic {
    /// Now, as a `timespec`.
    public static func now() -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return now
    }

    public static func nanoseconds() -> UInt64 {
        let now = now()
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    public static func microseconds() -> Int64 {
        let now = now()
        return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000
    }

    public static func milliseconds() -> Int64 {
        let now = now()
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    public static func seconds() -> Double {
        let now = now()
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}

/// The wall clock (`CLOCK_REALTIME`: the date, which an administrator or NTP may set back): read
/// only where a date is meant — the store clock's real time, transaction ids, a file's age, a
/// copy's name — never for a deadline or a rate (`Monotonic`).
public enum WallClock {
    /// Now, as a `timespec`.
    public static func now() -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return now
    }

    /// Seconds since 1970 (`time_t`).
    public static func seconds() -> Int { now().tv_sec }

    public static func milliseconds() -> Int64 {
        let now = now()
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    public static func microseconds() -> Int64 {
        let now = now()
        return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000
    }
}
