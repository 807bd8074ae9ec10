import StoreKitWire
import StoreKitEngine
import Testing

/// Time rates (`SKTestSession.TimeRate`) and clock durations (`storekitctl clock advance`).
@Suite struct TimeRateTests {
    static let second: Int64 = 1000
    static let minute: Int64 = 60_000
    static let day: Int64 = 86_400_000
    /// 2023-01-31T00:00:00Z.
    static let january31: Int64 = 1_675_123_200_000

    static func period(_ text: String) -> SubscriptionPeriod { SubscriptionPeriod(iso8601: text)! }

    @Test func realTimeUsesCalendarMonths() {
        let end = TimeRate.realTime.end(of: Self.period("P1M"), from: Self.january31)
        #expect(end - Self.january31 == 28 * Self.day, "Jan 31 + P1M = Feb 28")
        #expect(TimeRate.realTime.end(of: Self.period("P1W"), from: 0) == 7 * Self.day)
        #expect(TimeRate.realTime.end(of: Self.period("P1M"), times: 2, from: Self.january31) - Self.january31 == 59 * Self.day)
    }

    @Test func monthlyRatesFollowApplesTables() {
        let rate = TimeRate.monthlyRenewalEveryThirtySeconds
        #expect(rate.end(of: Self.period("P1W"), from: 0) == 10 * Self.second)
        #expect(rate.end(of: Self.period("P1M"), from: 0) == 30 * Self.second)
        #expect(rate.end(of: Self.period("P2M"), from: 0) == Self.minute)
        #expect(rate.end(of: Self.period("P3M"), from: 0) == 90 * Self.second)
        #expect(rate.end(of: Self.period("P6M"), from: 0) == 3 * Self.minute)
        #expect(rate.end(of: Self.period("P1Y"), from: 0) == 6 * Self.minute)
        #expect(TimeRate.monthlyRenewalEveryHour.end(of: Self.period("P1W"), from: 0) == 15 * Self.minute)
        #expect(TimeRate.monthlyRenewalEveryHour.end(of: Self.period("P1Y"), from: 0) == 12 * 60 * Self.minute)
        #expect(TimeRate.monthlyRenewalEveryFiveMinutes.end(of: Self.period("P1W"), from: 0) == 3 * Self.minute)
    }

    @Test func fixedRatesIgnoreThePeriod() {
        for text in ["P3D", "P1W", "P1M", "P1Y"] {
            #expect(TimeRate.oneRenewalEveryTwoSeconds.end(of: Self.period(text), from: 5) == 5 + 2 * Self.second)
            #expect(TimeRate.oneRenewalEveryFifteenMinutes.end(of: Self.period(text), from: 0) == 15 * Self.minute)
        }
        #expect(TimeRate.oneRenewalEveryTenSeconds.gracePeriod(for: Self.period("P1Y")) == 10 * Self.second)
    }

    @Test func gracePeriodAndBillingRetryInRealTime() {
        #expect(TimeRate.realTime.gracePeriod(for: Self.period("P1W")) == 6 * Self.day)
        #expect(TimeRate.realTime.gracePeriod(for: Self.period("P1M")) == 16 * Self.day)
        #expect(TimeRate.realTime.billingRetryPeriod(for: Self.period("P1M")) == 60 * Self.day)
        // Scaled: a 30-day month lasts 30 s, so 16 days last 16 s.
        #expect(TimeRate.monthlyRenewalEveryThirtySeconds.gracePeriod(for: Self.period("P1M")) == 16 * Self.second)
        #expect(TimeRate.oneSecondIsOneDay.billingRetryPeriod(for: Self.period("P1M")) == 60 * Self.second)
    }

    @Test func periodsAlwaysMoveForward() {
        for rate in TimeRate.allCases {
            for text in ["P1D", "P3D", "P1W", "P1M", "P1Y"] {
                #expect(rate.end(of: Self.period(text), from: 1_000) > 1_000, "\(rate) \(text)")
            }
        }
    }

    @Test func namesAndRawValuesAreApples() {
        #expect(TimeRate(name: "monthlyRenewalEveryThirtySeconds") == .monthlyRenewalEveryThirtySeconds)
        #expect(TimeRate(name: "monthly-renewal-every-thirty-seconds") == .monthlyRenewalEveryThirtySeconds)
        #expect(TimeRate(name: "15") == .monthlyRenewalEveryThirtySeconds)
        #expect(TimeRate(name: "1005") == .oneRenewalEveryTwoSeconds)
        #expect(TimeRate(name: "REALTIME") == .realTime)
        #expect(TimeRate(name: "14") == nil)
        #expect(TimeRate(name: "fast") == nil)
        #expect(TimeRate.monthlyRenewalEveryHour.rawValue == 10)
        #expect(TimeRate.oneRenewalEveryFifteenMinutes.rawValue == 1000)
    }
}

@Suite struct ClockDurationTests {
    @Test func shortForms() {
        #expect(ClockDuration("30s")?.milliseconds == 30_000)
        #expect(ClockDuration("5m")?.milliseconds == 300_000)
        #expect(ClockDuration("1h30m")?.milliseconds == 5_400_000)
        #expect(ClockDuration("2d")?.milliseconds == 172_800_000)
        #expect(ClockDuration("1w")?.milliseconds == 604_800_000)
        #expect(ClockDuration("500ms")?.milliseconds == 500)
        #expect(ClockDuration("1mo")?.months == 1)
        #expect(ClockDuration("2y")?.months == 24)
        #expect(ClockDuration("3 days") == nil, "no spaces inside")
        #expect(ClockDuration("3days")?.milliseconds == 259_200_000)
    }

    @Test func iso8601Forms() {
        #expect(ClockDuration("P1M")?.months == 1)
        #expect(ClockDuration("P1Y2M")?.months == 14)
        #expect(ClockDuration("PT30S")?.milliseconds == 30_000)
        #expect(ClockDuration("P1DT12H")?.milliseconds == 129_600_000)
        #expect(ClockDuration("PT1M")?.milliseconds == 60_000, "M after T is minutes")
        #expect(ClockDuration("P1W")?.milliseconds == 604_800_000)
    }

    @Test func rejectsNonsense() {
        for text in ["", "5", "P", "PT", "-5m", "1x", "m", "P1H", "PT1D", "0s", "P0D", "99999999999d"] {
            #expect(ClockDuration(text) == nil, "\(text)")
        }
    }

    @Test func anEndPastInt64IsTheLargestValueNotATrap() throws {
        let nearlyAll = String(repeating: "999999999w", count: 15) + "999999999d751991273d"
        let duration = try #require(ClockDuration(nearlyAll))
        #expect(duration.end(from: 1_800_000_000_000) == Int64.max)
        #expect(duration.end(from: 0) == duration.milliseconds)
    }

    @Test func monthsAreCalendarMonths() {
        let january31: Int64 = 1_675_123_200_000
        #expect(ClockDuration("1mo")!.end(from: january31) - january31 == 28 * 86_400_000)
        #expect(ClockDuration("P1MT1H")!.end(from: january31) - january31 == 28 * 86_400_000 + 3_600_000)
    }
}
