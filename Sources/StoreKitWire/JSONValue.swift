/// The project's one JSON type: the control plane's documents (built by the daemon, read by
/// storekitctl), the claims a JWS signs, and parsed `.storekit` files (JSONParser.swift). Kept
/// here, without Foundation, so the daemon and the CLI agree on one spelling. Members keep their
/// order; numbers built in code are `.int`, numbers parsed keep the text they were written as.
public indirect enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    /// A number as written in a parsed document (`0.99`, `1e3`, `42`); written back verbatim.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        lhs.serialized() == rhs.serialized()
    }

    public static func optional(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }
    public static func optional(_ value: Int64?) -> JSONValue { value.map { .int($0) } ?? .null }

    public func serialized() -> String {
        String(decoding: serializedBytes(), as: UTF8.self)
    }

    /// The UTF-8 of `serialized()`, written straight into bytes: what a JWS signs, and what goes
    /// on the wire, without building a `String` scalar by scalar first.
    public func serializedBytes() -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(256)
        write(to: &output)
        return output
    }

    public func write(to output: inout [UInt8]) {
        switch self {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let value): output.append(contentsOf: (value ? "true" : "false").utf8)
        case .int(let value): output.append(contentsOf: String(value).utf8)
        case .number(let text): output.append(contentsOf: text.utf8)
        case .string(let value): Self.writeString(value, to: &output)
        case .array(let values):
            output.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                value.write(to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                Self.writeString(key, to: &output)
                output.append(UInt8(ascii: ":"))
                value.write(to: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    /// A JSON string: `"`, `\` and the C0 controls escaped (the short forms where JSON has
    /// them), everything else as its UTF-8. Bytes of a multi-byte UTF-8 sequence are all ≥ 0x80,
    /// so escaping byte by byte is escaping scalar by scalar; runs that need no escape are copied
    /// whole.
    static func writeString(_ value: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { bytes in
            var runStart = 0
            for index in bytes.indices {
                let byte = bytes[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                runStart = index + 1
                output.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): output.append(byte)
                case UInt8(ascii: "\n"): output.append(UInt8(ascii: "n"))
                case UInt8(ascii: "\r"): output.append(UInt8(ascii: "r"))
                case UInt8(ascii: "\t"): output.append(UInt8(ascii: "t"))
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    output.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                               hex[Int(byte >> 4)], hex[Int(byte & 15)]])
                }
            }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
        }
        output.append(UInt8(ascii: "\""))
    }
}

/// RFC 3339 UTC timestamps from milliseconds since 1970 (no Foundation needed).
public enum RFC3339 {
    public static func string(milliseconds: Int64) -> String {
        // Clamp to years 0001…9999 so that absurd stored values render instead of overflowing.
        let milliseconds = min(max(milliseconds, -62_135_596_800_000), 253_402_300_799_999)
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let millis = milliseconds - seconds * 1000
        var days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        // Howard Hinnant's civil_from_days.
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let dayOfEra = days - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        var year = yearOfEra + era * 400
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthPrime = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthPrime + 2) / 5 + 1
        let month = monthPrime < 10 ? monthPrime + 3 : monthPrime - 9
        if month <= 2 { year += 1 }
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):"
            + "\(pad(secondOfDay % 3600 / 60, 2)):\(pad(secondOfDay % 60, 2)).\(pad(millis, 3))Z"
    }
}

extension TransactionRecord {
    /// The stable `-o json` shape, with StoreKit's names.
    public var json: JSONValue {
        var members: [(String, JSONValue)] = [
            ("transactionIdentifier", .string(String(id))),
            ("state", .string(state.name)),
            ("productIdentifier", .string(productID)),
            ("quantity", .int(Int64(quantity))),
            ("originalTransactionIdentifier", .optional(originalID.map { String($0) })),
            ("uid", .int(Int64(uid))),
            ("app", .string(app)),
            ("sequence", .int(Int64(clamping: sequence))),
            ("transactionDate", .string(RFC3339.string(milliseconds: date))),
            ("finished", .bool(finished)),
        ]
        if let errorCode {
            members.append(("error", .object([("code", .int(Int64(errorCode))), ("message", .optional(errorMessage))])))
        }
        if let revocationDate {
            members.append(("revocationDate", .string(RFC3339.string(milliseconds: revocationDate))))
            members.append(("revocationReason", .optional(revocationReason.map { Int64($0) })))
        }
        if let expiresDate { members.append(("expiresDate", .string(RFC3339.string(milliseconds: expiresDate)))) }
        if let applicationUsername { members.append(("applicationUsername", .string(applicationUsername))) }
        if let jwsRepresentation { members.append(("jwsRepresentation", .string(jwsRepresentation))) }
        return .object(members)
    }
}

extension ProductRecord {
    /// The stable `-o json` shape, with StoreKit's names; `billingPlans` only for a subscription
    /// whose catalogue lists them.
    public var json: JSONValue {
        var members: [(String, JSONValue)] = [
            ("productIdentifier", .string(productID)),
            ("type", .string(kind.name)),
            ("displayPrice", .string(displayPrice)),
            ("localizedTitle", .string(localizedTitle)),
            ("localizedDescription", .string(localizedDescription)),
            ("currencyCode", .string(currencyCode)),
            ("subscriptionGroupIdentifier", .optional(subscriptionGroupID)),
            ("subscriptionPeriod", .optional(subscriptionPeriod)),
            ("familyShareable", .bool(familyShareable)),
        ]
        if !billingPlans.isEmpty {
            members.append(("billingPlans", .array(billingPlans.map { plan in
                .object([
                    ("billingPlanType", .string(plan.type.name)),
                    ("billingPeriod", .string(plan.billingPeriod)),
                    ("displayPrice", .string(plan.displayPrice)),
                    ("commitmentPeriod", .string(plan.commitmentPeriod)),
                    ("commitmentDisplayPrice", .string(plan.commitmentDisplayPrice)),
                ])
            })))
        }
        return .object(members)
    }
}
