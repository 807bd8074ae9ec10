import StoreKitWire

/// How fast subscriptions run in the simulated store, as `SKTestSession.TimeRate` (same raw values,
/// which are also what `_timeRate` in a `.storekit` file holds).
///
/// The store clock itself always runs at real speed (plus the offset `clock advance` adds); a rate
/// compresses the *lengths* of subscription periods, grace periods and billing retry, as Xcode's
/// test environment does: with `monthlyRenewalEveryThirtySeconds` a `P1M` subscription bought now
/// expires — and renews — 30 seconds later, and its `expiresDate` says so.
extension TimeRate {
    static let second: Int64 = 1000
    static let minute: Int64 = 60 * second
    static let hour: Int64 = 60 * minute
    static let day: Int64 = 24 * hour

    private enum Scale {
        case real
        /// Virtual day length in real milliseconds: every duration shrinks by `day / length`.
        case dayLasts(Int64)
        /// Month and week lengths (real ms) as Apple's tables give them; days scale from the week.
        case monthly(month: Int64, week: Int64)
        /// Every period, whatever its length.
        case fixed(Int64)
    }

    private var scale: Scale {
        switch self {
        case .realTime: .real
        case .oneHourIsOneDay: .dayLasts(Self.hour)
        case .thirtyMinutesIsOneDay: .dayLasts(30 * Self.minute)
        case .fiveMinutesIsOneDay: .dayLasts(5 * Self.minute)
        case .oneMinuteIsOneDay: .dayLasts(Self.minute)
        case .thirtySecondsIsOneDay: .dayLasts(30 * Self.second)
        case .oneSecondIsOneDay: .dayLasts(Self.second)
        case .monthlyRenewalEveryHour: .monthly(month: Self.hour, week: 15 * Self.minute)
        case .monthlyRenewalEveryThirtyMinutes: .monthly(month: 30 * Self.minute, week: 10 * Self.minute)
        case .monthlyRenewalEveryFifteenMinutes: .monthly(month: 15 * Self.minute, week: 5 * Self.minute)
        case .monthlyRenewalEveryFiveMinutes: .monthly(month: 5 * Self.minute, week: 3 * Self.minute)
        case .monthlyRenewalEveryThirtySeconds: .monthly(month: 30 * Self.second, week: 10 * Self.second)
        case .oneRenewalEveryFifteenMinutes: .fixed(15 * Self.minute)
        case .oneRenewalEveryFiveMinutes: .fixed(5 * Self.minute)
        case .oneRenewalEveryMinute: .fixed(Self.minute)
        case .oneRenewalEveryThirtySeconds: .fixed(30 * Self.second)
        case .oneRenewalEveryTenSeconds: .fixed(10 * Self.second)
        case .oneRenewalEveryTwoSeconds: .fixed(2 * Self.second)
        }
    }

    /// When a run of `times` periods that starts at `start` ends (calendar months in real time).
    /// Always later than `start`, so a schedule built on it always moves forward.
    public func end(of period: SubscriptionPeriod, times: Int = 1, from start: Int64) -> Int64 {
        let count = Int64(max(times, 1))
        let length: Int64
        switch scale {
        case .real:
            return max(period.advance(start, times: Int(count)), start + 1)
        case .dayLasts(let dayLength):
            let real = period.advance(start, times: Int(count)) - start
            length = real / (Self.day / dayLength)
        case .monthly(let month, let week):
            let value = Int64(period.value) * count
            switch period.unit {
            case .day: length = value * week / 7
            case .week: length = value * week
            case .month: length = value * month
            case .year: length = value * 12 * month
            }
        case .fixed(let every):
            length = every * count
        }
        return start + max(length, 1)
    }

    /// A real-time length (grace period, billing retry, …) as this rate compresses it, measured on
    /// a subscription of `period`.
    func compress(_ realLength: Int64, for period: SubscriptionPeriod) -> Int64 {
        switch scale {
        case .real: return realLength
        case .dayLasts(let dayLength): return max(realLength / (Self.day / dayLength), 1)
        case .monthly(let month, _): return max(realLength * month / (30 * Self.day), 1)
        case .fixed(let every):
            // Apple's fixed rates: the grace period is one renewal interval; billing retry is
            // longer than grace, taken here as four intervals.
            return realLength >= 60 * Self.day ? 4 * every : every
        }
    }

    /// The billing grace period of a subscription of `period` (real time: 6 days for weekly,
    /// 16 days for longer periods).
    public func gracePeriod(for period: SubscriptionPeriod) -> Int64 {
        let weekly = period.unit == .day || (period.unit == .week && period.value == 1)
        return compress((weekly ? 6 : 16) * Self.day, for: period)
    }

    /// How long billing retry lasts (real time: 60 days).
    public func billingRetryPeriod(for period: SubscriptionPeriod) -> Int64 {
        compress(60 * Self.day, for: period)
    }
}
