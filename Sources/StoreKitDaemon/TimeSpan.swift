// A non-negative time span with millisecond precision, written as in systemd.time(7).
//
// Named `TimeSpan` because Swift's standard library owns `Duration`; `duration` converts.
/// A non-negative time span in milliseconds, parsed from systemd.time(7) notation:
/// "30" (seconds), "10s", "500ms", "5min", "1h", "1d", "1.5s", "1h 30min", "2 min".
public struct TimeSpan: Sendable, Equatable, Hashable, Comparable, CustomStringConvertible {
    public var milliseconds: Int64

    public init(milliseconds: Int64) {
        precondition(milliseconds >= 0, "a time span is never negative")
        self.milliseconds = milliseconds
    }

    public init(seconds: Int64) {
        self.init(milliseconds: seconds * 1000)
    }

    /// Parses systemd.time(7) notation. A number without unit means seconds; several
    /// components are added up ("1h 30min" or "1h30min"). Units: ms/msec, s/sec/second(s),
    /// m/min/minute(s), h/hr/hour(s), d/day(s), w/week(s). Returns nil for anything else,
    /// for negative numbers and on overflow.
    public init?(parsing text: String) {
        let scalars = Array(text.unicodeScalars)
        var index = 0
        var total: Int64 = 0
        var components = 0

        func skipSpaces() {
            while index < scalars.count, scalars[index] == " " || scalars[index] == "\t" { index += 1 }
        }
        func isDigit(_ scalar: Unicode.Scalar) -> Bool { scalar >= "0" && scalar <= "9" }

        skipSpaces()
        while index < scalars.count {
            var whole: Int64 = 0
            var digits = 0
            while index < scalars.count, isDigit(scalars[index]) {
                let digit = Int64(scalars[index].value - 48)
                let (times10, overflow1) = whole.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times10.addingReportingOverflow(digit)
                if overflow1 || overflow2 { return nil }
                whole = sum
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            var fraction: Int64 = 0
            var fractionScale: Int64 = 1
            if index < scalars.count, scalars[index] == "." {
                index += 1
                guard index < scalars.count, isDigit(scalars[index]) else { return nil }
                while index < scalars.count, isDigit(scalars[index]) {
                    if fractionScale < 1_000_000_000 {
                        fraction = fraction * 10 + Int64(scalars[index].value - 48)
                        fractionScale *= 10
                    }
                    index += 1
                }
            }
            skipSpaces()
            var unit = ""
            while index < scalars.count, scalars[index].properties.isAlphabetic {
                unit.unicodeScalars.append(scalars[index])
                index += 1
            }
            guard let scale = Self.unitScale(unit) else { return nil }
            let (wholePart, overflow1) = whole.multipliedReportingOverflow(by: scale)
            if overflow1 { return nil }
            // fraction < 10^9 and scale < 10^9, so the product fits in Int64.
            let fractionPart = (fraction * scale + fractionScale / 2) / fractionScale
            let (component, overflow2) = wholePart.addingReportingOverflow(fractionPart)
            let (sum, overflow3) = total.addingReportingOverflow(component)
            if overflow2 || overflow3 { return nil }
            total = sum
            components += 1
            skipSpaces()
        }
        guard components > 0 else { return nil }
        self.milliseconds = total
    }

    private static func unitScale(_ unit: String) -> Int64? {
        switch unit {
        case "ms", "msec": return 1
        case "", "s", "sec", "second", "seconds": return 1000
        case "m", "min", "minute", "minutes": return 60 * 1000
        case "h", "hr", "hour", "hours": return 3600 * 1000
        case "d", "day", "days": return 86_400 * 1000
        case "w", "week", "weeks": return 7 * 86_400 * 1000
        default: return nil
        }
    }

    public var seconds: Double { Double(milliseconds) / 1000 }

    public var duration: Duration { .milliseconds(milliseconds) }

    /// systemd-style rendering that `init(parsing:)` reads back: "0", "500ms", "1min 30s", "1d 2h".
    public var description: String {
        if milliseconds == 0 { return "0" }
        var rest = milliseconds
        var parts: [String] = []
        for (scale, unit) in [(Int64(86_400_000), "d"), (3_600_000, "h"), (60_000, "min"), (1000, "s"), (1, "ms")] {
            let count = rest / scale
            if count > 0 { parts.append("\(count)\(unit)") }
            rest %= scale
        }
        return parts.joined(separator: " ")
    }

    public static func < (lhs: TimeSpan, rhs: TimeSpan) -> Bool { lhs.milliseconds < rhs.milliseconds }
}
