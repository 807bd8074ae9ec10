/// Renders rows as aligned text columns.
struct Table {
    let columns: [(title: String, key: String)]

    func render(_ json: Any) -> String {
        let rows = (json as? [[String: Any]]) ?? []
        let cells = rows.map { row in columns.map { Self.text(row[$0.key]) } }
        var widths = columns.map { $0.title.count }
        for row in cells {
            for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
        }
        func line(_ values: [String]) -> String {
            values.enumerated().map { index, value in
                index == values.count - 1 ? value : value.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }.joined(separator: "  ") + "\n"
        }
        var output = line(columns.map(\.title.localizedUppercase))
        for row in cells { output += line(row) }
        return output
    }

    static func text(_ value: Any?) -> String {
        switch value {
        case nil: return "-"
        case let string as String: return string
        case let flag as Bool where type(of: value!) == Bool.self: return flag ? "yes" : "no"
        case let number as NSNumber:
            // JSONSerialization gives booleans as NSNumber with objCType "c".
            if String(cString: number.objCType) == "c" { return number.boolValue ? "yes" : "no" }
            return number.stringValue
        case is NSNull: return "-"
        case let nested? where nested is [Any] || nested is [String: Any]:
            guard let data = try? JSONSerialization.data(withJSONObject: nested, options: [.sortedKeys]) else { return "\(nested)" }
            return String(decoding: data, as: UTF8.self)
        default: return "\(value!)"
        }
    }
}

/// Renders one JSON object as `key: value` lines. A value too long for a line (a JWS is 3 KB) is
/// cut short, saying how long it is: `-o json` prints it whole.
func renderKeyValues(_ json: Any) -> String {
    guard let object = json as? [String: Any] else { return "\(json)\n" }
    let width = object.keys.map(\.count).max() ?? 0
    return object.keys.sorted().map { key in
        key.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + shortened(Table.text(object[key]))
    }.joined(separator: "\n") + "\n"
}

/// `text`, or its first 40 characters and how long it is when it has more than 100.
func shortened(_ text: String) -> String {
    guard text.count > 100 else { return text }
    return String(text.prefix(40)) + "… (\(text.count) characters; -o json prints it whole)"
}

import Foundation
