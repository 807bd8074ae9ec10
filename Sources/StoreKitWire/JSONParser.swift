// Reading JSON: a strict RFC 8259 parser over bytes, giving a `JSONValue`.
//
// Ours rather than JSONSerialization (which only the full Foundation has, with ICU): it reports
// syntax errors by byte offset (line and column on request) on every platform, keeps numbers as
// written (`.number`: prices stay exact decimals, booleans never pass for numbers), keeps object
// members in their order and rejects duplicate keys. The `.storekit` reader and storekitctl use it.

extension JSONValue {
    /// Parses one JSON document (a leading UTF-8 byte order mark is allowed).
    public static func parse(_ bytes: [UInt8]) throws(JSONSyntaxError) -> JSONValue {
        try JSONParser.parse(bytes)
    }

    /// "a string", "null", … for error messages.
    public var kindDescription: String {
        switch self {
        case .null: "null"
        case .bool(let flag): "\(flag)"
        case .int(let value): "the number \(value)"
        case .number(let text): "the number \(text)"
        case .string(let text): "the string \"\(text.count > 40 ? String(text.prefix(40)) + "…" : text)\""
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// An object's member named `key` (the first, though parsed objects have no duplicates).
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The string, or nil for any other kind.
    public var string: String? {
        guard case .string(let text) = self else { return nil }
        return text
    }
}

/// Where and why a document is not JSON.
public struct JSONSyntaxError: Error, Sendable, Equatable {
    /// Byte offset into the input.
    public var offset: Int
    public var reason: String

    public init(offset: Int, reason: String) {
        self.offset = offset
        self.reason = reason
    }

    /// 1-based line and column (in characters) of `offset` in `bytes`.
    public func lineAndColumn(in bytes: [UInt8]) -> (line: Int, column: Int) {
        var line = 1
        var column = 1
        for byte in bytes[..<min(offset, bytes.count)] {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return (line, column)
    }
}

/// A strict RFC 8259 parser (plus a leading UTF-8 byte order mark) over bytes.
private struct JSONParser {
    private let bytes: [UInt8]
    private var position = 0
    private var depth = 0
    private static let maximumDepth = 256

    private init(bytes: [UInt8]) { self.bytes = bytes }

    static func parse(_ bytes: [UInt8]) throws(JSONSyntaxError) -> JSONValue {
        var parser = JSONParser(bytes: bytes)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { parser.position = 3 }
        parser.skipWhitespace()
        guard parser.position < bytes.count else { throw JSONSyntaxError(offset: parser.position, reason: "the file is empty, expected a JSON object") }
        let value = try parser.value()
        parser.skipWhitespace()
        guard parser.position == bytes.count else {
            throw JSONSyntaxError(offset: parser.position, reason: "unexpected \(parser.describeCurrent()) after the end of the JSON value")
        }
        return value
    }

    private mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    private func describeCurrent() -> String {
        guard position < bytes.count else { return "end of file" }
        let byte = bytes[position]
        if byte >= 0x21 && byte < 0x7F { return "character '\(Character(Unicode.Scalar(byte)))'" }
        return "byte " + Self.hex(byte)
    }

    /// `0x0A`: a byte as two upper-case hexadecimal digits.
    private static func hex(_ byte: UInt8) -> String {
        "0x" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16, uppercase: true)
    }

    private func error(_ reason: String) -> JSONSyntaxError {
        JSONSyntaxError(offset: position, reason: reason)
    }

    private mutating func value() throws(JSONSyntaxError) -> JSONValue {
        guard position < bytes.count else { throw error("unexpected end of file, expected a value") }
        switch bytes[position] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0") ... UInt8(ascii: "9"): return .number(try number())
        default: throw error("unexpected \(describeCurrent()), expected a value")
        }
    }

    private mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        if depth > Self.maximumDepth { throw error("nesting deeper than \(Self.maximumDepth) levels") }
    }

    private mutating func object() throws(JSONSyntaxError) -> JSONValue {
        try enter()
        position += 1
        var fields: [(String, JSONValue)] = []
        var keys: Set<String> = []
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
            position += 1
            depth -= 1
            return .object(fields)
        }
        while true {
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else {
                throw error("unexpected \(describeCurrent()), expected a string key")
            }
            let keyStart = position
            let key = try string()
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else {
                throw error("unexpected \(describeCurrent()), expected ':' after an object key")
            }
            position += 1
            skipWhitespace()
            let member = try value()
            guard keys.insert(key).inserted else {
                throw JSONSyntaxError(offset: keyStart, reason: "duplicate key \"\(key)\"")
            }
            fields.append((key, member))
            skipWhitespace()
            guard position < bytes.count else { throw error("unexpected end of file, expected ',' or '}'") }
            switch bytes[position] {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "}"):
                position += 1
                depth -= 1
                return .object(fields)
            default: throw error("unexpected \(describeCurrent()), expected ',' or '}'")
            }
        }
    }

    private mutating func array() throws(JSONSyntaxError) -> JSONValue {
        try enter()
        position += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
            position += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try value())
            skipWhitespace()
            guard position < bytes.count else { throw error("unexpected end of file, expected ',' or ']'") }
            switch bytes[position] {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "]"):
                position += 1
                depth -= 1
                return .array(elements)
            default: throw error("unexpected \(describeCurrent()), expected ',' or ']'")
            }
        }
    }

    private mutating func literal(_ word: String) throws(JSONSyntaxError) {
        let expected = Array(word.utf8)
        guard bytes.count - position >= expected.count, bytes[position ..< position + expected.count].elementsEqual(expected) else {
            throw error("unexpected \(describeCurrent()), expected a value")
        }
        position += expected.count
    }

    private mutating func number() throws(JSONSyntaxError) -> String {
        let start = position
        func digits(_ parser: inout JSONParser) -> Int {
            let from = parser.position
            while parser.position < parser.bytes.count, (UInt8(ascii: "0") ... UInt8(ascii: "9")).contains(parser.bytes[parser.position]) {
                parser.position += 1
            }
            return parser.position - from
        }
        if bytes[position] == UInt8(ascii: "-") { position += 1 }
        let integerStart = position
        let integerDigits = digits(&self)
        guard integerDigits > 0 else { throw error("invalid number: expected a digit") }
        if integerDigits > 1 && bytes[integerStart] == UInt8(ascii: "0") {
            throw JSONSyntaxError(offset: integerStart, reason: "invalid number: leading zero")
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            position += 1
            guard digits(&self) > 0 else { throw error("invalid number: expected a digit after '.'") }
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") { position += 1 }
            guard digits(&self) > 0 else { throw error("invalid number: expected a digit in the exponent") }
        }
        return String(decoding: bytes[start ..< position], as: UTF8.self)
    }

    private mutating func string() throws(JSONSyntaxError) -> String {
        let open = position
        position += 1
        var buffer: [UInt8] = []
        while true {
            let runStart = position
            while position < bytes.count, bytes[position] != UInt8(ascii: "\""), bytes[position] != UInt8(ascii: "\\"), bytes[position] >= 0x20 {
                position += 1
            }
            buffer.append(contentsOf: bytes[runStart ..< position])
            guard position < bytes.count else {
                throw JSONSyntaxError(offset: open, reason: "unterminated string")
            }
            switch bytes[position] {
            case UInt8(ascii: "\""):
                position += 1
                guard let text = String(validating: buffer, as: UTF8.self) else {
                    throw JSONSyntaxError(offset: open, reason: "string is not valid UTF-8")
                }
                return text
            case UInt8(ascii: "\\"):
                try escape(into: &buffer)
            default:
                throw error("control character \(Self.hex(bytes[position])) in a string (escape it)")
            }
        }
    }

    private mutating func escape(into buffer: inout [UInt8]) throws(JSONSyntaxError) {
        position += 1
        guard position < bytes.count else { throw error("unterminated string") }
        let letter = bytes[position]
        position += 1
        switch letter {
        case UInt8(ascii: "\""): buffer.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): buffer.append(UInt8(ascii: "\\"))
        case UInt8(ascii: "/"): buffer.append(UInt8(ascii: "/"))
        case UInt8(ascii: "b"): buffer.append(0x08)
        case UInt8(ascii: "f"): buffer.append(0x0C)
        case UInt8(ascii: "n"): buffer.append(0x0A)
        case UInt8(ascii: "r"): buffer.append(0x0D)
        case UInt8(ascii: "t"): buffer.append(0x09)
        case UInt8(ascii: "u"):
            var code = try hex4()
            if (0xD800 ... 0xDBFF).contains(code) {
                guard bytes.count - position >= 6, bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u") else {
                    throw error("unpaired UTF-16 surrogate in \\u escape")
                }
                position += 2
                let low = try hex4()
                guard (0xDC00 ... 0xDFFF).contains(low) else { throw error("unpaired UTF-16 surrogate in \\u escape") }
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00 ... 0xDFFF).contains(code) {
                throw error("unpaired UTF-16 surrogate in \\u escape")
            }
            guard let scalar = Unicode.Scalar(code) else { throw error("invalid \\u escape") }
            buffer.append(contentsOf: Array(String(Character(scalar)).utf8))
        default:
            position -= 1
            throw error("invalid escape sequence in a string")
        }
    }

    private mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        guard bytes.count - position >= 4 else { throw error("incomplete \\u escape") }
        var code: UInt32 = 0
        for _ in 0 ..< 4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0") ... UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a") ... UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A") ... UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("invalid hex digit in \\u escape")
            }
            code = code << 4 | UInt32(digit)
            position += 1
        }
        return code
    }
}
