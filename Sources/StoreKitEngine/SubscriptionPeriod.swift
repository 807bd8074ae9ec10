/// The length of one subscription period, as `.storekit` files and StoreKit spell it (`P1M`).
///
/// Only single-unit ISO 8601 durations exist in StoreKit (`P3D`, `P1W`, `P1M`, `P2M`, `P3M`, `P6M`,
/// `P1Y`, …), so a period is one count of one unit. Date arithmetic is done here, in UTC, on plain
/// milliseconds since 1970 with the proleptic Gregorian calendar: no `Calendar`, no time zones, the
/// same answer on every machine.
public struct SubscriptionPeriod: Sendable, Hashable, CustomStringConvertible {
    public enum Unit: Sendable, Hashable, CaseIterable {
        case day, week, month, year

        /// The ISO 8601 designator (`D`, `W`, `M`, `Y`).
        public var designator: Character {
            switch self {
            case .day: "D"
            case .week: "W"
            case .month: "M"
            case .year: "Y"
            }
        }
    }

    /// Largest accepted count: keeps every computation far away from overflow.
    public static let maximumValue = 9_999

    public var value: Int
    public var unit: Unit

    public init(value: Int, unit: Unit) {
        precondition(value >= 1 && value <= Self.maximumValue, "subscription period count out of range: \(value)")
        self.value = value
        self.unit = unit
    }

    /// Parses `P<count><D|W|M|Y>`; nil for anything else (lower case, spaces, `P0D`, `P1Y2M`, `PT1H`).
    public init?(iso8601 text: String) {
        let scalars = Array(text.unicodeScalars)
        guard scalars.count >= 3, scalars.first == "P" else { return nil }
        let unit: Unit
        switch scalars.last {
        case "D": unit = .day
        case "W": unit = .week
        case "M": unit = .month
        case "Y": unit = .year
        default: return nil
        }
        let digits = scalars[1 ..< scalars.count - 1]
        guard digits.count <= 4 else { return nil }
        var count = 0
        for scalar in digits {
            guard scalar.isASCII, let digit = Int(String(scalar)) else { return nil }
            count = count * 10 + digit
        }
        guard count >= 1 else { return nil }
        self.init(value: count, unit: unit)
    }

    /// The ISO 8601 spelling, e.g. `P1M`.
    public var description: String { "P\(value)\(unit.designator)" }

    /// The period `times` times over, added to `milliseconds` (since 1970, UTC) in one step.
    ///
    /// Months and years are calendar months: the day of month is kept and clamped to the length of
    /// the target month (`P1M` from Jan 31 is Feb 28, or Feb 29 in a leap year). Because `times` is
    /// applied from the same anchor, Jan 31 advanced by `P1M` twice is Mar 31, as the App Store
    /// renews a subscription bought on the 31st. Days and weeks are exact multiples of 86 400 s.
    /// The time of day is kept. A negative `times` goes back; results saturate at the Int64 range.
    public func advance(_ milliseconds: Int64, times: Int = 1) -> Int64 {
        let (count, countOverflow) = Int64(value).multipliedReportingOverflow(by: Int64(times))
        if countOverflow { return saturated(positive: (times >= 0)) }

        let scale: Int64 = switch unit {
        case .day, .month: 1
        case .week: 7
        case .year: 12
        }
        let (units, unitsOverflow) = count.multipliedReportingOverflow(by: scale)   // days or months
        if unitsOverflow { return saturated(positive: count >= 0) }

        switch unit {
        case .day, .week:
            let (delta, deltaOverflow) = units.multipliedReportingOverflow(by: CivilDate.millisecondsPerDay)
            if deltaOverflow { return saturated(positive: units >= 0) }
            let (result, overflow) = milliseconds.addingReportingOverflow(delta)
            return overflow ? saturated(positive: delta >= 0) : result
        case .month, .year:
            return CivilDate.addMonths(units, to: milliseconds) ?? saturated(positive: units >= 0)
        }
    }

    private func saturated(positive: Bool) -> Int64 { positive ? .max : .min }
}

/// Gregorian civil-date arithmetic on days since 1970-01-01 (Howard Hinnant's algorithms).
private enum CivilDate {
    static let millisecondsPerDay: Int64 = 86_400_000

    /// Year range inside which Int64 milliseconds cannot overflow (about ±292 million years).
    private static let yearLimit: Int64 = 200_000_000

    static func isLeap(_ year: Int64) -> Bool {
        year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    }

    static func daysInMonth(year: Int64, month: Int64) -> Int64 {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// (year, month 1…12, day 1…31) for a count of days since 1970-01-01.
    static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }

    /// Days since 1970-01-01 of a civil date.
    static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// `milliseconds` moved by `months` calendar months, day clamped; nil when out of range.
    static func addMonths(_ months: Int64, to milliseconds: Int64) -> Int64? {
        let (dayNumber, millisecondOfDay) = floorDivide(milliseconds, millisecondsPerDay)
        let date = civil(fromDays: dayNumber)
        guard abs(months / 12) < yearLimit else { return nil }
        let monthIndex = date.month - 1 + months          // months since January of date.year
        let (yearDelta, month0) = floorDivide(monthIndex, 12)
        let year = date.year + yearDelta
        guard abs(year) < yearLimit else { return nil }
        let month = month0 + 1
        let day = min(date.day, daysInMonth(year: year, month: month))
        let (dayMs, overflow1) = days(year: year, month: month, day: day).multipliedReportingOverflow(by: millisecondsPerDay)
        let (result, overflow2) = dayMs.addingReportingOverflow(millisecondOfDay)
        return overflow1 || overflow2 ? nil : result
    }

    /// Division rounding towards minus infinity, with a remainder in 0..<divisor.
    static func floorDivide(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        var quotient = value / divisor
        var remainder = value % divisor
        if remainder < 0 {
            quotient -= 1
            remainder += divisor
        }
        return (quotient, remainder)
    }
}
