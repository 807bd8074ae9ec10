import Foundation
import StoreKitWire
import Testing

@Suite("JSONValue")
struct JSONValueTests {
    @Test("quotes, backslashes and control characters are escaped")
    func escaping() {
        #expect(JSONValue.string(#"say "hi""#).serialized() == #""say \"hi\"""#)
        #expect(JSONValue.string(#"C:\dir\"#).serialized() == #""C:\\dir\\""#)
        #expect(JSONValue.string("a\nb\rc\td").serialized() == #""a\nb\rc\td""#)
        #expect(JSONValue.string("\u{0}\u{1}\u{8}\u{B}\u{C}\u{1B}\u{1F}").serialized()
            == #""\u0000\u0001\u0008\u000b\u000c\u001b\u001f""#)
        #expect(JSONValue.string(" ~\u{7F}é☕️𝄞/").serialized() == "\" ~\u{7F}é☕️𝄞/\"")
        #expect(JSONValue.object([("k\"\n", .null)]).serialized() == #"{"k\"\n":null}"#)
    }

    @Test("every string, however odd, parses back with Foundation to the same string",
          arguments: ["", "plain", WireSamples.unicode, "\u{0}\u{1}\u{1F}\u{20}\"\\/\u{7F}\u{2028}\u{2029}", "\r\n\t\u{8}\u{C}"])
    func foundationAgrees(text: String) throws {
        let json = JSONValue.array([.string(text)]).serialized()
        let parsed = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String]
        #expect(parsed == [text])
    }

    @Test("the byte writer spells every string as escaping scalar by scalar does (10,000 random strings, bridged ones too)")
    func bytesMatchScalarEscaping() {
        func reference(_ value: String) -> String {
            var output = "\""
            for scalar in value.unicodeScalars {
                switch scalar {
                case "\"": output += "\\\""
                case "\\": output += "\\\\"
                case "\n": output += "\\n"
                case "\r": output += "\\r"
                case "\t": output += "\\t"
                case _ where scalar.value < 0x20:
                    let hex = String(scalar.value, radix: 16)
                    output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                default: output.unicodeScalars.append(scalar)
                }
            }
            return output + "\""
        }
        let pool: [Unicode.Scalar] = (0..<0x80).compactMap(Unicode.Scalar.init) + ["é", "☕", "𝄞", "\u{2028}", "\u{FEFF}", "\u{10FFFF}"]
        var generator = SplitMix64(seed: 14)
        for round in 0..<10_000 {
            var text = ""
            for _ in 0..<Int.random(in: 0...40, using: &generator) {
                text.unicodeScalars.append(pool.randomElement(using: &generator)!)
            }
            let value = round % 2 == 0 ? text : (NSString(string: text) as String)
            let expected = Array(("{" + reference(value) + ":" + reference(value) + "}").utf8)
            let bytes = JSONValue.object([(value, .string(value))]).serializedBytes()
            #expect(bytes == expected, "\(Array(value.utf8))")
            if bytes != expected { break }
        }
        for integer: Int64 in [0, 7, -1, 10, -10, 99, 100, .max, .min, .max - 1, .min + 1] {
            #expect(JSONValue.int(integer).serializedBytes() == Array(String(integer).utf8))
        }
    }

    @Test("documents serialize compactly with members in order")
    func documents() {
        let value = JSONValue.object([
            ("z", .int(-42)), ("a", .bool(true)), ("n", .null), ("f", .bool(false)),
            ("list", .array([.int(.max), .int(.min), .array([]), .object([])])),
        ])
        #expect(value.serialized()
            == #"{"z":-42,"a":true,"n":null,"f":false,"list":[9223372036854775807,-9223372036854775808,[],{}]}"#)
        #expect(JSONValue.optional(nil as String?) == .null)
        #expect(JSONValue.optional("x" as String?) == .string("x"))
        #expect(JSONValue.optional(nil as Int64?) == .null)
        #expect(JSONValue.optional(7 as Int64?) == .int(7))
    }

    @Test("a transaction's JSON uses StoreKit's names and RFC 3339 dates")
    func transactionJSON() {
        let record = TransactionRecord(
            id: 2_000_000_000_000_002, originalID: 2_000_000_000_000_001, uid: 1000, app: "com.example.game",
            productID: "com.example.game.level_pack", quantity: 1, state: .failed, sequence: 3, date: 0,
            errorCode: 2, errorMessage: "cancelled")
        #expect(record.json.serialized() == """
            {"transactionIdentifier":"2000000000000002","state":"failed","productIdentifier":"com.example.game.level_pack",\
            "quantity":1,"originalTransactionIdentifier":"2000000000000001","uid":1000,"app":"com.example.game",\
            "sequence":3,"transactionDate":"1970-01-01T00:00:00.000Z","finished":false,\
            "error":{"code":2,"message":"cancelled"}}
            """)
    }
}

@Suite("RFC3339")
struct RFC3339Tests {
    @Test("known instants", arguments: [
        (0, "1970-01-01T00:00:00.000Z"),
        (1, "1970-01-01T00:00:00.001Z"),
        (999, "1970-01-01T00:00:00.999Z"),
        (86_399_999, "1970-01-01T23:59:59.999Z"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z"),      // leap day of a century leap year
        (1_709_210_096_789, "2024-02-29T12:34:56.789Z"),    // leap day
        (1_709_251_199_999, "2024-02-29T23:59:59.999Z"),
        (1_709_251_200_000, "2024-03-01T00:00:00.000Z"),
        (4_107_542_400_000, "2100-03-01T00:00:00.000Z"),    // 2100 is not a leap year
        (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (-999, "1969-12-31T23:59:59.001Z"),
        (-1000, "1969-12-31T23:59:59.000Z"),
        (-1001, "1969-12-31T23:59:58.999Z"),
        (-86_400_000, "1969-12-31T00:00:00.000Z"),
        (-86_400_001, "1969-12-30T23:59:59.999Z"),
        (-2_203_891_200_000, "1900-03-01T00:00:00.000Z"),   // 1900 is not a leap year
        (-62_135_596_800_000, "0001-01-01T00:00:00.000Z"),
    ] as [(Int64, String)])
    func knownInstants(milliseconds: Int64, expected: String) {
        #expect(RFC3339.string(milliseconds: milliseconds) == expected)
    }

    @Test("agrees with Foundation's ISO 8601 formatter over a wide random range")
    func agreesWithFoundation() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        var random = SplitMix64(seed: 3339)
        for _ in 0..<2000 {
            // 1583 (first full Gregorian year) … 9999.
            let milliseconds = Int64.random(in: -12_212_553_600_000...253_402_300_799_999, using: &random)
            let date = Date(timeIntervalSince1970: TimeInterval(milliseconds) / 1000)
            let ours = RFC3339.string(milliseconds: milliseconds)
            // Foundation rounds the fraction of a Double; compare to the second and check the millis apart.
            #expect(ours.prefix(19) == formatter.string(from: date).prefix(19), "\(milliseconds)")
            let millis = ((milliseconds % 1000) + 1000) % 1000
            #expect(ours.dropFirst(20).prefix(3) == String(format: "%03lld", millis), "\(milliseconds)")
        }
    }
}

/// Values a damaged database or a fuzzer can put in a record render instead of trapping
/// (found by the `record-json` fuzz target; inputs kept in Fuzz/crashes/record-json/).
@Suite("JSON rendering of extreme values")
struct JSONExtremeValueTests {
    @Test("dates at the ends of Int64 clamp to years 0001 and 9999")
    func extremeDates() {
        #expect(RFC3339.string(milliseconds: .min) == "0001-01-01T00:00:00.000Z")
        #expect(RFC3339.string(milliseconds: .max) == "9999-12-31T23:59:59.999Z")
    }

    @Test("a sequence above Int64.max renders clamped")
    func hugeSequence() {
        let record = TransactionRecord(id: .max, uid: .max, app: "a", productID: "p", quantity: .min, state: .purchased,
                                       sequence: .max, date: .min, revocationDate: .min + 1, expiresDate: .max)
        let text = record.json.serialized()
        #expect(text.contains("\"sequence\":9223372036854775807"))
        #expect(text.contains("\"transactionDate\":\"0001-01-01T00:00:00.000Z\""))
    }

    // MARK: - Parsing

    @Test("a parsed document keeps member order and numbers as written, and writes back as it was")
    func parseKeepsOrderAndNumbers() throws {
        let text = #"{"z":1,"a":[true,false,null],"price":0.99,"big":1e400,"s":"é\n\u00e9\ud834\udd1e"}"#
        let value = try JSONValue.parse(Array(text.utf8))
        guard case .object(let members) = value else { Issue.record("not an object: \(value)"); return }
        #expect(members.map(\.0) == ["z", "a", "price", "big", "s"])
        #expect(value["price"] == .number("0.99"))
        #expect(value["big"]?.serialized() == "1e400")
        #expect(value["s"]?.string == "é\né𝄞")
        #expect(value["a"] == .array([.bool(true), .bool(false), .null]))
        #expect(value["missing"] == nil)
        // Written back: the same document but for the escapes, which come back as their characters.
        #expect(value.serialized() == #"{"z":1,"a":[true,false,null],"price":0.99,"big":1e400,"s":"é\né𝄞"}"#)
    }

    @Test("every string JSONValue writes parses back to the same string",
          arguments: ["", "plain", WireSamples.unicode, "\u{0}\u{1}\u{1F}\u{20}\"\\/\u{7F}\u{2028}\u{2029}", "\r\n\t\u{8}\u{C}"])
    func roundTrip(text: String) throws {
        let document = JSONValue.object([("k", .array([.string(text), .int(-9_223_372_036_854_775_808)]))])
        let parsed = try JSONValue.parse(document.serializedBytes())
        #expect(parsed["k"] == .array([.string(text), .number("-9223372036854775808")]))
    }

    @Test("what Foundation writes, the parser reads to the same values")
    func foundationWritesWeRead() throws {
        let object: [String: Any] = ["name": "Gems ☕️", "n": 42, "list": [1, "two", NSNull()], "nested": ["flag": true]]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])
        let value = try JSONValue.parse([UInt8](data))
        #expect(value["name"]?.string == "Gems ☕️")
        #expect(value["n"] == .number("42"))
        #expect(value["list"] == .array([.number("1"), .string("two"), .null]))
        #expect(value["nested"]?["flag"] == .bool(true))
    }

    @Test("malformed documents are refused with the offset and reason", arguments: [
        ("", 0, "the file is empty"),
        (#"{"a":1,"a":2}"#, 7, "duplicate key \"a\""),
        (#"{"a":01}"#, 5, "leading zero"),
        (#"[1,]"#, 3, "expected a value"),
        (#"{"a" 1}"#, 5, "expected ':'"),
        (#""abc"#, 0, "unterminated string"),
        (#""\ud800""#, 7, "unpaired UTF-16 surrogate"),
        ("[\"a\u{1}\"]", 3, "control character 0x01"),
        ("[1] x", 4, "after the end of the JSON value"),
        (String(repeating: "[", count: 300), 256, "nesting deeper than 256"),
    ])
    func malformed(text: String, offset: Int, reason: String) {
        #expect {
            _ = try JSONValue.parse(Array(text.utf8))
        } throws: { error in
            guard let error = error as? JSONSyntaxError else { return false }
            return error.offset == offset && error.reason.contains(reason)
        }
    }

    @Test("invalid UTF-8 in a string is refused, and line and column count characters")
    func invalidUTF8AndPosition() throws {
        let bytes: [UInt8] = Array("{\n  \"é\": \"".utf8) + [0xFF] + Array("\"}".utf8)
        #expect(throws: JSONSyntaxError.self) { _ = try JSONValue.parse(bytes) }
        let error = JSONSyntaxError(offset: 7, reason: "")
        #expect(error.lineAndColumn(in: Array("{\n  \"é\": 1}".utf8)) == (2, 5))
    }
}
