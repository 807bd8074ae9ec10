// A systemd-style INI file (systemd.syntax(7)), parsed without interpreting any key.
//
// What is accepted, as in systemd's own parser: `[Section]` headers; `Key=Value` with whitespace
// around key and value trimmed; whole-line comments starting with `#` or `;` (leading whitespace
// allowed); blank lines; a line ending in an unescaped backslash continues on the next line (the
// backslash becomes a space, comment lines inside a continuation are skipped). There are no inline
// comments: `Key=1 # one` has the value `1 # one`. Anything else is an error with file:line.
#if canImport(Glibc)
import Glibc
#endif
import StoreKitPosix

struct ConfigFile: Sendable, Equatable {
    struct Entry: Sendable, Equatable {
        var key: String
        var value: String
        /// Line of the first physical line of the (possibly continued) assignment.
        var line: Int
    }

    struct Section: Sendable, Equatable {
        var name: String
        /// Line of the `[name]` header.
        var line: Int
        var entries: [Entry]
    }

    /// The path as given, used in error messages.
    var path: String
    /// Sections in file order; a name repeated in the file appears once per header.
    var sections: [Section]

    /// Reads and parses the file at `path`.
    static func read(path: String) throws(ConfigError) -> ConfigFile {
        let bytes: [UInt8]
        do throws(Errno) {
            bytes = try FileSystem.readContents(of: path, followingSymlinks: true)
        } catch {
            throw ConfigError(file: path, line: nil, message: "cannot read file: \(error == .invalidArgument ? "not a regular file" : "\(error)")")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ConfigError(file: path, line: nil, message: "file is not valid UTF-8")
        }
        if let nul = bytes.firstIndex(of: 0) {
            // An app id or path cut at a NUL by the C libraries below would name something else.
            throw ConfigError(file: path, line: bytes[..<nul].count { $0 == UInt8(ascii: "\n") } + 1,
                              message: "the line holds a NUL byte")
        }
        return try parse(text, path: path)
    }

    static func parse(_ text: String, path: String) throws(ConfigError) -> ConfigFile {
        var file = ConfigFile(path: path, sections: [])
        var pending: (text: String, line: Int)?
        // Split on scalars: in Swift "\r\n" is one Character and would not match "\n".
        var lines = text.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false)
            .map { String(String.UnicodeScalarView($0)) }
        if let first = lines.first, first.hasPrefix("\u{FEFF}") { lines[0] = String(first.dropFirst()) }
        // A file ending in "\n" yields a final empty element, which is just a blank line.

        for (index, raw) in lines.enumerated() {
            let number = index + 1
            var physical = raw
            if physical.hasSuffix("\r") { physical.removeLast() }
            let trimmed = physical.trimmingWhitespace()
            if trimmed.hasPrefix("#") || trimmed.hasPrefix(";") { continue }

            let continues = Self.endsWithContinuation(physical)
            if continues { physical.removeLast() }
            if var open = pending {
                open.text += " " + physical
                pending = open
            } else {
                if trimmed.isEmpty { continue }
                pending = (physical, number)
            }
            if continues { continue }
            if let logical = pending {
                pending = nil
                try file.consume(logical.text, line: logical.line)
            }
        }
        if let logical = pending { try file.consume(logical.text, line: logical.line) }
        return file
    }

    private mutating func consume(_ text: String, line: Int) throws(ConfigError) {
        let content = text.trimmingWhitespace()
        if content.isEmpty { return }
        if content.hasPrefix("[") {
            guard content.hasSuffix("]"), content.count >= 2 else {
                throw ConfigError(file: path, line: line, message: "invalid section header '\(content)'")
            }
            let name = String(content.dropFirst().dropLast())
            guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == ".") }) else {
                throw ConfigError(file: path, line: line, message: "invalid section header '\(content)'")
            }
            sections.append(Section(name: name, line: line, entries: []))
            return
        }
        guard let equals = content.firstIndex(of: "=") else {
            throw ConfigError(file: path, line: line, message: "missing '=' in line '\(content)'")
        }
        let key = content[..<equals].trimmingWhitespace()
        let value = content[content.index(after: equals)...].trimmingWhitespace()
        guard !key.isEmpty else {
            throw ConfigError(file: path, line: line, message: "missing key name before '='")
        }
        guard !sections.isEmpty else {
            throw ConfigError(file: path, line: line, message: "assignment '\(key)=' outside of any section")
        }
        sections[sections.count - 1].entries.append(Entry(key: key, value: value, line: line))
    }

    /// True when the line ends in an odd number of backslashes (an even number is escaped text).
    private static func endsWithContinuation(_ line: String) -> Bool {
        var count = 0
        for character in line.reversed() {
            guard character == "\\" else { break }
            count += 1
        }
        return count % 2 == 1
    }
}
