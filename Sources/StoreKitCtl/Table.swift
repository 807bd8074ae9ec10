import FoundationEssentials
import StoreKitWire

/// Renders rows as aligned text columns.
struct Table {
    let columns: [(title: String, key: String)]

    func render(_ json: JSONValue) -> String {
        let rows: [JSONValue] = if case .array(let elements) = json { elements } else { [] }
        let cells = rows.map { row in columns.map { Self.text(row[$0.key]) } }
        var widths = columns.map { $0.title.count }
        for row in cells {
            for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
        }
        func line(_ values: [String]) -> String {
            values.enumerated().map { index, value in
                index == values.count - 1 ? value : value.padded(to: widths[index])
            }.joined(separator: "  ") + "\n"
        }
        var output = line(columns.map { $0.title.uppercased() })
        for row in cells { output += line(row) }
        return output
    }

    /// A cell: strings as they are, booleans as yes/no, numbers as written, nothing as "-",
    /// arrays and objects as their JSON.
    static func text(_ value: JSONValue?) -> String {
        switch value {
        case nil, .null?: "-"
        case .string(let string)?: string
        case .bool(let flag)?: flag ? "yes" : "no"
        case .int(let number)?: String(number)
        case .number(let text)?: text
        case let nested?: nested.serialized()
        }
    }
}

/// Renders one JSON object as `key: value` lines, keys sorted. A value too long for a line (a JWS
/// is 3 KB) is cut short, saying how long it is: `-o json` prints it whole.
func renderKeyValues(_ json: JSONValue) -> String {
    guard case .object(let members) = json else { return json.serialized() + "\n" }
    let width = members.map(\.0.count).max() ?? 0
    return members.sorted { $0.0 < $1.0 }.map { key, value in
        key.padded(to: width) + "  " + shortened(Table.text(value))
    }.joined(separator: "\n") + "\n"
}

/// `text`, or its first 40 characters and how long it is when it has more than 100.
func shortened(_ text: String) -> String {
    guard text.count > 100 else { return text }
    return String(text.prefix(40)) + "… (\(text.count) characters; -o json prints it whole)"
}

extension String {
    /// The string followed by spaces up to `width` characters (never cut).
    func padded(to width: Int) -> String {
        self + String(repeating: " ", count: max(0, width - count))
    }
}
