import Foundation

/// A JWS payload's JSON object, read leniently: Apple's payloads write identifiers as strings and
/// dates as milliseconds, and a reader here accepts either a string or a number where that varies.
struct SignedPayload {
    let fields: [String: Any]
    /// The payload's bytes, as `jsonRepresentation` returns them.
    let json: Data

    /// Parses payload bytes; nil unless they are a JSON object.
    init?(_ bytes: [UInt8]?) {
        guard let bytes, let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else { return nil }
        fields = object
        json = Data(bytes)
    }

    func string(_ key: String) -> String? {
        if let text = fields[key] as? String { return text }
        if let number = fields[key] as? NSNumber, !Self.isBoolean(number) { return number.stringValue }
        return nil
    }

    func uint64(_ key: String) -> UInt64? {
        if let text = fields[key] as? String { return UInt64(text) }
        if let number = fields[key] as? NSNumber, !Self.isBoolean(number) { return number.uint64Value }
        return nil
    }

    func int(_ key: String) -> Int? {
        if let number = fields[key] as? NSNumber, !Self.isBoolean(number) { return number.intValue }
        if let text = fields[key] as? String { return Int(text) }
        return nil
    }

    func bool(_ key: String) -> Bool? {
        if let number = fields[key] as? NSNumber { return number.boolValue }
        return nil
    }

    /// A date written as milliseconds since 1970.
    func date(_ key: String) -> Date? {
        guard let number = fields[key] as? NSNumber, !Self.isBoolean(number) else { return nil }
        return Date(timeIntervalSince1970: number.doubleValue / 1000)
    }

    func uuid(_ key: String) -> UUID? { string(key).flatMap(UUID.init(uuidString:)) }

    /// A member that is an object (`commitmentInfo`), read as leniently.
    func object(_ key: String) -> SignedPayload? {
        guard let object = fields[key] as? [String: Any] else { return nil }
        return SignedPayload(fields: object)
    }

    private init(fields: [String: Any]) {
        self.fields = fields
        json = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data()
    }

    private static func isBoolean(_ number: NSNumber) -> Bool {
        // JSONSerialization gives `true`/`false` as NSNumber too (type code `c`); they are never
        // identifiers or dates.
        String(cString: number.objCType) == "c"
    }
}
