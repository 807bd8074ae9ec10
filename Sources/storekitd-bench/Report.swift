import Foundation

/// One row of the result: our number, the peer's (if any), their ratio and the target.
struct Figure {
    enum Better {
        case higher
        case lower
    }

    let name: String
    let unit: String
    let value: Double
    let peer: Double?
    /// Ratio storekitd/peer that must be reached (higher is better) or not exceeded (lower is better).
    let targetRatio: Double?
    /// Absolute bound when there is no peer.
    let targetAbsolute: Double?
    let better: Better

    var ratio: Double? { peer.map { $0 > 0 ? value / $0 : 0 } }

    var target: String {
        let sign = better == .higher ? "≥" : "≤"
        if let targetRatio { return "\(sign) \(format(targetRatio))× peer" }
        if let targetAbsolute { return "\(sign) \(format(targetAbsolute)) \(unit)" }
        return "report"
    }

    var met: Bool? {
        if let targetRatio, let ratio {
            return better == .higher ? ratio >= targetRatio : ratio <= targetRatio
        }
        if let targetAbsolute {
            return better == .higher ? value >= targetAbsolute : value <= targetAbsolute
        }
        return nil
    }
}

func format(_ value: Double) -> String {
    if value >= 100 { return String(format: "%.0f", value) }
    if value >= 10 { return String(format: "%.1f", value) }
    return String(format: "%.2f", value)
}

enum Report {
    static func printTable(_ figures: [Figure]) {
        let header = ["figure", "unit", "storekitd", "peer", "ratio", "target", "met"]
        let rows = figures.map { figure in
            [figure.name, figure.unit, format(figure.value), figure.peer.map(format) ?? "-",
             figure.ratio.map { format($0) + "×" } ?? "-", figure.target,
             figure.met.map { $0 ? "yes" : "NO" } ?? "-"]
        }
        say("")
        printColumns(header, rows)
    }

    /// Prints a header, a rule and the rows, each column as wide as its widest cell.
    static func printColumns(_ header: [String], _ rows: [[String]]) {
        var widths = header.map(\.count)
        for row in rows { for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) } }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  ")
        }
        say(line(header))
        say(line(widths.map { String(repeating: "-", count: $0) }))
        for row in rows { say(line(row)) }
    }

    /// Writes the figures as a JSON list, `extra` objects after them.
    static func writeJSON(_ figures: [Figure], extra: [[String: Any]] = [], to path: String) throws {
        let list: [[String: Any]] = figures.map { figure in
            [
                "figure": figure.name, "unit": figure.unit, "storekitd": figure.value,
                "peer": figure.peer.map { $0 as Any } ?? NSNull(),
                "ratio": figure.ratio.map { $0 as Any } ?? NSNull(),
                "target": figure.target, "met": figure.met.map { $0 as Any } ?? NSNull(),
            ]
        }
        let data = try JSONSerialization.data(withJSONObject: list + extra, options: [.prettyPrinted, .sortedKeys])
        try data.write(to: URL(fileURLWithPath: path))
    }
}

/// Writes a line to stdout at once (print is block-buffered into pipes).
func say(_ text: String = "") {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}
