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
        guard let index = items.firstIndex(where: { !$0.hasPrefix("-") }) else { throw UsageError("\(what) is required") }
        return items.remove(at: index)
    }

    mutating func number(_ name: String) throws(UsageError) -> String? {
        guard let text = try option(name) else { return nil }
        guard UInt32(text) != nil else { throw UsageError("\(name) needs a number, not '\(text)'") }
        return text
    }
}
