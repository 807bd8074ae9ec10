/// A length of store time as `storekitctl clock advance` takes it: ISO 8601 (`P1M`, `P3D`,
/// `PT30S`, `P1DT12H`) or short units (`30s`, `5m`, `2h`, `3d`, `1w`, `1mo`, `1y`, `1h30m`, `500ms`).
///
/// Months and years are calendar months from the moment the duration is applied (`P1M` from
/// Jan 31 ends on Feb 28), as a subscription period is; everything else is an exact length.
public struct ClockDuration: Sendable, Equatable, CustomStringConvertible {
    public var months: Int
    public var milliseconds: Int64
    public let description: String

    public init?(_ text: String) {
        let trimmed = text.trimmingSpaces
        guard !trimmed.isEmpty else { return nil }
        description = trimmed
        var months = 0
        var milliseconds: Int64 = 0
        let parsed = trimmed.first == "P" || trimmed.first == "p"
            ? Self.parseISO(trimmed.uppercased(), &months, &milliseconds)
            : Self.parseShort(trimmed.lowercased(), &months, &milliseconds)
        guard parsed, months >= 0, milliseconds >= 0, months > 0 || milliseconds > 0 else { return nil }
        self.months = months
        self.milliseconds = milliseconds
    }

    /// `start` moved forward by this duration; `Int64.max` when that is past what an Int64 holds
    /// (up to 15 components of 999,999,999 weeks parse, and must be refused, not trap).
    public func end(from start: Int64) -> Int64 {
        var end = start
        if months > 0 { end = SubscriptionPeriod(value: months, unit: .month).advance(end) }
        let (sum, overflow) = end.addingReportingOverflow(milliseconds)
        return overflow ? .max : sum
    }

    /// Reads numbers followed by unit names; false on anything else or an overflow.
    private static func parseShort(_ text: String, _ months: inout Int, _ milliseconds: inout Int64) -> Bool {
        let units: [(String, Int64, Int)] = [   // name, milliseconds, months
            ("ms", 1, 0), ("s", 1000, 0), ("sec", 1000, 0), ("secs", 1000, 0), ("second", 1000, 0), ("seconds", 1000, 0),
            ("m", 60_000, 0), ("min", 60_000, 0), ("mins", 60_000, 0), ("minute", 60_000, 0), ("minutes", 60_000, 0),
            ("h", 3_600_000, 0), ("hour", 3_600_000, 0), ("hours", 3_600_000, 0),
            ("d", 86_400_000, 0), ("day", 86_400_000, 0), ("days", 86_400_000, 0),
            ("w", 604_800_000, 0), ("week", 604_800_000, 0), ("weeks", 604_800_000, 0),
            ("mo", 0, 1), ("month", 0, 1), ("months", 0, 1), ("y", 0, 12), ("year", 0, 12), ("years", 0, 12),
        ]
        var scalars = Substring(text)
        while !scalars.isEmpty {
            let digits = scalars.prefix { $0.isASCII && $0.isNumber }
            guard !digits.isEmpty, digits.count <= 9, let count = Int64(digits) else { return false }
            scalars = scalars.dropFirst(digits.count)
            let name = scalars.prefix { $0.isLetter }
            scalars = scalars.dropFirst(name.count)
            guard let unit = units.first(where: { $0.0 == name }) else { return false }
            guard add(count, unit.1, unit.2, &months, &milliseconds) else { return false }
        }
        return true
    }

    /// `P[nY][nM][nW][nD][T[nH][nM][nS]]`.
    private static func parseISO(_ text: String, _ months: inout Int, _ milliseconds: inout Int64) -> Bool {
        var rest = Substring(text.dropFirst())
        var inTime = false
        var sawComponent = false
        while !rest.isEmpty {
            if rest.first == "T" {
                guard !inTime else { return false }
                inTime = true
                rest = rest.dropFirst()
                continue
            }
            let digits = rest.prefix { $0.isASCII && $0.isNumber }
            guard !digits.isEmpty, digits.count <= 9, let count = Int64(digits) else { return false }
            rest = rest.dropFirst(digits.count)
            guard let designator = rest.first else { return false }
            rest = rest.dropFirst()
            let unit: (Int64, Int)
            switch (inTime, designator) {
            case (false, "Y"): unit = (0, 12)
            case (false, "M"): unit = (0, 1)
            case (false, "W"): unit = (604_800_000, 0)
            case (false, "D"): unit = (86_400_000, 0)
            case (true, "H"): unit = (3_600_000, 0)
            case (true, "M"): unit = (60_000, 0)
            case (true, "S"): unit = (1000, 0)
            default: return false
            }
            guard add(count, unit.0, unit.1, &months, &milliseconds) else { return false }
            sawComponent = true
        }
        return sawComponent
    }

    private static func add(_ count: Int64, _ unitMilliseconds: Int64, _ unitMonths: Int,
                            _ months: inout Int, _ milliseconds: inout Int64) -> Bool {
        let (delta, overflow) = count.multipliedReportingOverflow(by: unitMilliseconds)
        let (sum, overflow2) = milliseconds.addingReportingOverflow(delta)
        guard !overflow, !overflow2 else { return false }
        milliseconds = sum
        months += Int(count) * unitMonths
        return months <= SubscriptionPeriod.maximumValue
    }
}

extension String {
    var trimmingSpaces: String {
        var scalars = Substring(self)
        while scalars.first == " " { scalars = scalars.dropFirst() }
        while scalars.last == " " { scalars = scalars.dropLast() }
        return String(scalars)
    }
}
