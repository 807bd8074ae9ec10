import FoundationEssentials
/// The command line, consumed as options and positionals are recognised.
struct ArgumentList {
    private var items: [String]

    init(_ items: [String]) { self.items = items }

    var first: String? { items.first }

    mutating func popFirst() -> String? { items.isEmpty ? nil : items.removeFirst() }

    /// Removes `--name VALUE` or `--name=VALUE` and returns VALUE.
    mutating func option(_ name: String) throws(UsageError) -> String? {
        for (index, item) in items.enumerated() {
            if item == name {
                guard index + 1 < items.count else { throw UsageError("\(name) needs a value") }
                let value = items[index + 1]
                items.removeSubrange(index...(index + 1))
                return value
            }
            if item.hasPrefix(name + "=") {
                items.remove(at: index)
                return String(item.dropFirst(name.count + 1))
            }
        }
        return nil
    }

    mutating func flag(_ name: String) -> Bool {
        guard let index = items.firstIndex(of: name) else { return false }
        items.remove(at: index)
        return true
    }

    mutating func positional(_ what: String) throws(UsageError) -> String {
        // A lone "-" is an operand (standard input), not an option, as for most Unix tools.
        guard let index = items.firstIndex(where: { !$0.hasPrefix("-") || $0 == "-" }) else { throw UsageError("\(what) is required") }
        return items.remove(at: index)
    }

    mutating func number(_ name: String) throws(UsageError) -> String? {
        guard let text = try option(name) else { return nil }
        guard UInt32(text) != nil else { throw UsageError("\(name) needs a number, not '\(text)'") }
        return text
    }
}

extension ArgumentList {
    /// Removes and returns the first positional argument, if there is one.
    mutating func optionalPositional() -> String? {
        guard first(where: { !$0.hasPrefix("-") }) != nil else { return nil }
        return try? positional("")
    }

    /// `on` or `off` (as the first positional).
    mutating func onOff(_ what: String) throws(UsageError) -> Bool {
        let text = try positional("on|off")
        switch text.lowercased() {
        case "on": return true
        case "off": return false
        default: throw UsageError("\(what) takes on or off, not '\(text)'")
        }
    }

    /// A transaction identifier (the first positional), checked to be a number.
    mutating func transactionID() throws(UsageError) -> String {
        let text = try positional("TRANSACTION")
        guard UInt64(text) != nil else { throw UsageError("TRANSACTION must be a transaction id (a number), not '\(text)'") }
        return text
    }

    private func first(where predicate: (String) -> Bool) -> String? { items.first(where: predicate) }
}
