import Foundation
import StoreKitEngine
import Testing

/// Milliseconds since 1970 of a UTC date and time, computed with Foundation (independently of the
/// arithmetic under test).
private func utc(_ year: Int, _ month: Int, _ day: Int, _ hour: Int = 0, _ minute: Int = 0, _ second: Int = 0) -> Int64 {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    let date = calendar.date(from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second))!
    return Int64((date.timeIntervalSince1970 * 1000).rounded())
}

private let day: Int64 = 86_400_000

@Suite("SubscriptionPeriod")
struct SubscriptionPeriodTests {
    @Test("parses the periods StoreKit uses and prints them back", arguments: [
        ("P3D", 3, SubscriptionPeriod.Unit.day),
        ("P1W", 1, .week),
        ("P2W", 2, .week),
        ("P1M", 1, .month),
        ("P2M", 2, .month),
        ("P3M", 3, .month),
        ("P6M", 6, .month),
        ("P1Y", 1, .year),
        ("P14D", 14, .day),
    ])
    func parses(text: String, value: Int, unit: SubscriptionPeriod.Unit) throws {
        let period = try #require(SubscriptionPeriod(iso8601: text))
        #expect(period.value == value)
        #expect(period.unit == unit)
        #expect(period.description == text)
        #expect(period == SubscriptionPeriod(value: value, unit: unit))
    }

    @Test("rejects anything else", arguments: [
        "", "P", "PM", "1M", "M", "P0M", "P00D", "p1m", "P1m", "P1X", "P1Y2M", "PT1H", "P1DT1H", " P1M", "P1M ",
        "P-1M", "P+1M", "P1.5M", "P\u{0661}M", "P12345D", "P1", "XP1M", "P1MM",
    ])
    func rejects(text: String) {
        #expect(SubscriptionPeriod(iso8601: text) == nil)
    }

    @Test("days and weeks are exact multiples of 24 hours")
    func daysAndWeeks() throws {
        let start = utc(2024, 3, 30, 13, 45, 7) + 123
        #expect(try #require(SubscriptionPeriod(iso8601: "P3D")).advance(start) == start + 3 * day)
        #expect(try #require(SubscriptionPeriod(iso8601: "P1W")).advance(start) == start + 7 * day)
        #expect(try #require(SubscriptionPeriod(iso8601: "P2W")).advance(start, times: 3) == start + 42 * day)
        #expect(SubscriptionPeriod(value: 1, unit: .week).advance(start, times: 0) == start)
        #expect(SubscriptionPeriod(value: 1, unit: .day).advance(start, times: -2) == start - 2 * day)
    }

    @Test("a month from Jan 31 is the end of February (28th, or 29th in a leap year)")
    func endOfMonth() {
        let monthly = SubscriptionPeriod(value: 1, unit: .month)
        #expect(monthly.advance(utc(2023, 1, 31)) == utc(2023, 2, 28))
        #expect(monthly.advance(utc(2024, 1, 31)) == utc(2024, 2, 29))
        #expect(monthly.advance(utc(2100, 1, 31)) == utc(2100, 2, 28))   // not a leap year
        #expect(monthly.advance(utc(2000, 1, 31)) == utc(2000, 2, 29))   // a leap year
        #expect(monthly.advance(utc(2023, 3, 31, 9, 30)) == utc(2023, 4, 30, 9, 30))   // time of day kept
        #expect(monthly.advance(utc(2023, 12, 15, 23, 59, 59) + 999) == utc(2024, 1, 15, 23, 59, 59) + 999)
        #expect(SubscriptionPeriod(value: 1, unit: .year).advance(utc(2024, 2, 29)) == utc(2025, 2, 28))
        #expect(SubscriptionPeriod(value: 6, unit: .month).advance(utc(2023, 8, 31)) == utc(2024, 2, 29))
    }

    @Test("`times:` advances from the same anchor, so the day of month comes back")
    func repeatedAdvance() {
        let monthly = SubscriptionPeriod(value: 1, unit: .month)
        let start = utc(2023, 1, 31, 12)
        #expect(monthly.advance(start, times: 2) == utc(2023, 3, 31, 12))
        #expect(monthly.advance(start, times: 3) == utc(2023, 4, 30, 12))
        #expect(monthly.advance(start, times: 12) == utc(2024, 1, 31, 12))
        #expect(monthly.advance(start, times: 13) == utc(2024, 2, 29, 12))
        #expect(monthly.advance(start, times: 0) == start)
        #expect(monthly.advance(utc(2023, 3, 31), times: -1) == utc(2023, 2, 28))
        // Stepping one period at a time clamps for good instead: Jan 31 → Feb 28 → Mar 28.
        #expect(monthly.advance(monthly.advance(start)) == utc(2023, 3, 28, 12))

        let quarterly = SubscriptionPeriod(value: 3, unit: .month)
        #expect(quarterly.advance(utc(2023, 11, 30), times: 4) == utc(2024, 11, 30))
        let yearly = SubscriptionPeriod(value: 1, unit: .year)
        #expect(yearly.advance(utc(2024, 2, 29), times: 4) == utc(2028, 2, 29))
        #expect(yearly.advance(utc(2024, 2, 29), times: 3) == utc(2027, 2, 28))
    }

    @Test("dates before 1970 work too")
    func beforeEpoch() {
        #expect(SubscriptionPeriod(value: 2, unit: .month).advance(utc(1969, 12, 31, 6)) == utc(1970, 2, 28, 6))
        #expect(SubscriptionPeriod(value: 1, unit: .month).advance(utc(1900, 1, 31)) == utc(1900, 2, 28))
        #expect(SubscriptionPeriod(value: 1, unit: .day).advance(-1) == day - 1)
    }

    @Test("month arithmetic agrees with Foundation's Gregorian calendar over four years")
    func agreesWithFoundation() {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var start = utc(2023, 1, 1, 7, 8, 9)
        let end = utc(2027, 1, 1)
        while start < end {
            for (value, unit) in [(1, SubscriptionPeriod.Unit.month), (2, .month), (3, .month), (6, .month), (1, .year)] {
                for times in [1, 5] {
                    let months = value * times * (unit == .year ? 12 : 1)
                    let expected = calendar.date(byAdding: .month, value: months, to: Date(timeIntervalSince1970: Double(start) / 1000))!
                    let got = SubscriptionPeriod(value: value, unit: unit).advance(start, times: times)
                    #expect(got == Int64((expected.timeIntervalSince1970 * 1000).rounded()), "from \(start) by \(months) months")
                }
            }
            start += day
        }
    }

    @Test("absurd inputs saturate instead of trapping")
    func saturation() {
        let yearly = SubscriptionPeriod(value: 9_999, unit: .year)
        #expect(yearly.advance(.max - 1) == .max)
        #expect(yearly.advance(0, times: .max) == .max)
        #expect(yearly.advance(0, times: .min) == .min)
        #expect(SubscriptionPeriod(value: 9_999, unit: .day).advance(.max - day) == .max)
        #expect(SubscriptionPeriod(value: 9_999, unit: .week).advance(.min + 1, times: -1_000_000) == .min)
    }
}
