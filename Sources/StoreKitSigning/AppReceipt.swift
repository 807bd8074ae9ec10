import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The payload of an app receipt, in Apple's documented ASN.1 form: a SET OF
/// `ReceiptAttribute ::= SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`, each
/// value itself DER (UTF8String, IA5String dates in RFC 3339, INTEGER), one type-17 attribute
/// per in-app purchase holding that purchase's own SET OF attributes.
public struct AppReceipt: Sendable, Equatable {
    /// Attribute types of the receipt (Apple's numbering).
    enum Field: Int64 {
        case receiptType = 0, bundleIdentifier = 2, appVersion = 3, opaqueValue = 4, sha1Hash = 5,
             creationDate = 12, inAppPurchase = 17, originalPurchaseDate = 18, originalApplicationVersion = 19,
             expirationDate = 21
    }

    /// Attribute types of an in-app purchase record.
    enum PurchaseField: Int64 {
        case quantity = 1701, productIdentifier = 1702, transactionIdentifier = 1703, purchaseDate = 1704,
             originalTransactionIdentifier = 1705, originalPurchaseDate = 1706, subscriptionExpirationDate = 1708,
             webOrderLineItemID = 1711, cancellationDate = 1712, isTrialPeriod = 1713, isInIntroOfferPeriod = 1719,
             promotionalOfferIdentifier = 1721
    }

    public struct InAppPurchase: Sendable, Equatable {
        public var quantity: Int64
        public var productIdentifier: String
        public var transactionIdentifier: String
        public var originalTransactionIdentifier: String
        public var purchaseDate: Date
        public var originalPurchaseDate: Date
        public var subscriptionExpirationDate: Date?
        public var cancellationDate: Date?
        public var webOrderLineItemID: Int64?
        public var isTrialPeriod: Bool
        public var isInIntroOfferPeriod: Bool
        public var promotionalOfferIdentifier: String?

        public init(
            quantity: Int64, productIdentifier: String, transactionIdentifier: String, originalTransactionIdentifier: String,
            purchaseDate: Date, originalPurchaseDate: Date, subscriptionExpirationDate: Date? = nil,
            cancellationDate: Date? = nil, webOrderLineItemID: Int64? = nil, isTrialPeriod: Bool = false,
            isInIntroOfferPeriod: Bool = false, promotionalOfferIdentifier: String? = nil
        ) {
            self.quantity = quantity
            self.productIdentifier = productIdentifier
            self.transactionIdentifier = transactionIdentifier
            self.originalTransactionIdentifier = originalTransactionIdentifier
            self.purchaseDate = purchaseDate
            self.originalPurchaseDate = originalPurchaseDate
            self.subscriptionExpirationDate = subscriptionExpirationDate
            self.cancellationDate = cancellationDate
            self.webOrderLineItemID = webOrderLineItemID
            self.isTrialPeriod = isTrialPeriod
            self.isInIntroOfferPeriod = isInIntroOfferPeriod
            self.promotionalOfferIdentifier = promotionalOfferIdentifier
        }
    }

    /// `Xcode` or `ProductionSandbox` (Apple's receipt type for its sandbox).
    public var receiptType: String
    public var bundleIdentifier: String
    public var appVersion: String
    public var opaqueValue: [UInt8]
    /// SHA-1 of the device identifier, the opaque value and the bundle identifier's DER value.
    public var sha1Hash: [UInt8]
    public var creationDate: Date
    public var originalApplicationVersion: String
    public var originalPurchaseDate: Date?
    public var expirationDate: Date?
    /// The in-app purchases, each with its attribute encoded once (`Entry`).
    public var entries: [Entry]
    public var inAppPurchases: [InAppPurchase] {
        get { entries.map(\.purchase) }
        set { entries = newValue.map(Entry.init) }
    }

    /// An in-app purchase and its type-17 attribute, encoded on first need by whichever thread
    /// encodes a receipt listing it, and kept: a queue's receipt made again after one purchase
    /// shares the entries of the one before and encodes the new one only (a receipt of 5,000
    /// purchases spent three quarters of its signing time encoding them all again).
    public final class Entry: Sendable, Equatable {
        public let purchase: InAppPurchase
        private let encoding = Mutex<[UInt8]?>(nil)

        public init(_ purchase: InAppPurchase) { self.purchase = purchase }

        /// The purchase's attribute: `SEQUENCE { 17, 1, OCTET STRING { its SET OF attributes } }`.
        public var attribute: [UInt8] {
            encoding.withLock { encoded in
                if let encoded { return encoded }
                let made = AppReceipt.attribute(Field.inAppPurchase.rawValue, purchase.encoded())
                encoded = made
                return made
            }
        }

        public static func == (lhs: Entry, rhs: Entry) -> Bool { lhs.purchase == rhs.purchase }
    }

    public init(
        receiptType: String, bundleIdentifier: String, appVersion: String, opaqueValue: [UInt8], sha1Hash: [UInt8],
        creationDate: Date, originalApplicationVersion: String, originalPurchaseDate: Date? = nil,
        expirationDate: Date? = nil, inAppPurchases: [InAppPurchase]
    ) {
        self.init(receiptType: receiptType, bundleIdentifier: bundleIdentifier, appVersion: appVersion, opaqueValue: opaqueValue,
                  sha1Hash: sha1Hash, creationDate: creationDate, originalApplicationVersion: originalApplicationVersion,
                  originalPurchaseDate: originalPurchaseDate, expirationDate: expirationDate, entries: inAppPurchases.map(Entry.init))
    }

    /// A receipt listing `entries`, whose attributes may be encoded already.
    public init(
        receiptType: String, bundleIdentifier: String, appVersion: String, opaqueValue: [UInt8], sha1Hash: [UInt8],
        creationDate: Date, originalApplicationVersion: String, originalPurchaseDate: Date? = nil,
        expirationDate: Date? = nil, entries: [Entry]
    ) {
        self.receiptType = receiptType
        self.bundleIdentifier = bundleIdentifier
        self.appVersion = appVersion
        self.opaqueValue = opaqueValue
        self.sha1Hash = sha1Hash
        self.creationDate = creationDate
        self.originalApplicationVersion = originalApplicationVersion
        self.originalPurchaseDate = originalPurchaseDate
        self.expirationDate = expirationDate
        self.entries = entries
    }

    /// The bytes the SHA-1 hash covers for the bundle identifier: its attribute's value (DER UTF8String).
    public static func bundleIdentifierValue(_ bundleIdentifier: String) -> [UInt8] { DER.utf8String(bundleIdentifier) }

    /// The hash an app recomputes to tie the receipt to its device (Apple's algorithm).
    public static func hash(deviceIdentifier: [UInt8], opaqueValue: [UInt8], bundleIdentifier: String) -> [UInt8] {
        Digest.sha1(deviceIdentifier + opaqueValue + bundleIdentifierValue(bundleIdentifier))
    }

    /// The payload, DER.
    public func encoded() -> [UInt8] {
        var attributes: [[UInt8]] = [
            Self.attribute(Field.receiptType.rawValue, DER.utf8String(receiptType)),
            Self.attribute(Field.bundleIdentifier.rawValue, Self.bundleIdentifierValue(bundleIdentifier)),
            Self.attribute(Field.appVersion.rawValue, DER.utf8String(appVersion)),
            Self.attribute(Field.opaqueValue.rawValue, opaqueValue),
            Self.attribute(Field.sha1Hash.rawValue, sha1Hash),
            Self.attribute(Field.creationDate.rawValue, DER.ia5String(RFC3339.string(creationDate))),
            Self.attribute(Field.originalApplicationVersion.rawValue, DER.utf8String(originalApplicationVersion)),
        ]
        if let originalPurchaseDate {
            attributes.append(Self.attribute(Field.originalPurchaseDate.rawValue, DER.ia5String(RFC3339.string(originalPurchaseDate))))
        }
        if let expirationDate {
            attributes.append(Self.attribute(Field.expirationDate.rawValue, DER.ia5String(RFC3339.string(expirationDate))))
        }
        for entry in entries { attributes.append(entry.attribute) }
        return DER.set(attributes)
    }

    static func attribute(_ type: Int64, _ value: [UInt8]) -> [UInt8] {
        DER.sequence([DER.integer(type), DER.integer(1), DER.octetString(value)])
    }

    /// Reads a payload; unknown attribute types are skipped, as Apple reserves them.
    public init(payload: [UInt8]) throws(SigningError) {
        var fields: [Int64: [UInt8]] = [:]
        var purchases: [InAppPurchase] = []
        for (type, value) in try Self.attributes(payload) {
            if type == Field.inAppPurchase.rawValue {
                purchases.append(try InAppPurchase(payload: value))
            } else {
                fields[type] = value
            }
        }
        func required(_ field: Field) throws(SigningError) -> [UInt8] {
            guard let value = fields[field.rawValue] else { throw SigningError("receipt: no attribute \(field.rawValue)") }
            return value
        }
        receiptType = try Self.string(required(.receiptType), .utf8String)
        bundleIdentifier = try Self.string(required(.bundleIdentifier), .utf8String)
        appVersion = try Self.string(required(.appVersion), .utf8String)
        opaqueValue = try required(.opaqueValue)
        sha1Hash = try required(.sha1Hash)
        creationDate = try Self.date(required(.creationDate))
        originalApplicationVersion = try Self.string(required(.originalApplicationVersion), .utf8String)
        originalPurchaseDate = try fields[Field.originalPurchaseDate.rawValue].map { (value) throws(SigningError) in try Self.date(value) }
        expirationDate = try fields[Field.expirationDate.rawValue].map { (value) throws(SigningError) in try Self.date(value) }
        entries = purchases.map(Entry.init)
    }

    static func attributes(_ payload: [UInt8]) throws(SigningError) -> [(Int64, [UInt8])] {
        var outer = DER.Reader(payload)
        let set = try outer.expect(.set)
        guard outer.isAtEnd else { throw SigningError("receipt: bytes after the payload") }
        var reader = DER.Reader(payload, range: set)
        var result: [(Int64, [UInt8])] = []
        while !reader.isAtEnd {
            var sequence = DER.Reader(payload, range: try reader.expect(.sequence))
            let type = try sequence.integer(try sequence.expect(.integer))
            _ = try sequence.expect(.integer)
            let value = try sequence.expect(.octetString)
            result.append((type, Array(payload[value])))
        }
        return result
    }

    static func string(_ value: [UInt8], _ tag: DER.Tag) throws(SigningError) -> String {
        var reader = DER.Reader(value)
        let content = try reader.expect(tag)
        guard let string = String(validating: value[content], as: UTF8.self) else { throw SigningError("receipt: bad string") }
        return string
    }

    static func integer(_ value: [UInt8]) throws(SigningError) -> Int64 {
        var reader = DER.Reader(value)
        return try reader.integer(try reader.expect(.integer))
    }

    static func date(_ value: [UInt8]) throws(SigningError) -> Date {
        let text = try string(value, .ia5String)
        guard let date = RFC3339.date(text) else { throw SigningError("receipt: bad date \(text)") }
        return date
    }
}

extension AppReceipt.InAppPurchase {
    typealias Field = AppReceipt.PurchaseField

    func encoded() -> [UInt8] {
        func attribute(_ field: Field, _ value: [UInt8]) -> [UInt8] { AppReceipt.attribute(field.rawValue, value) }
        var attributes = [
            attribute(.quantity, DER.integer(quantity)),
            attribute(.productIdentifier, DER.utf8String(productIdentifier)),
            attribute(.transactionIdentifier, DER.utf8String(transactionIdentifier)),
            attribute(.purchaseDate, DER.ia5String(RFC3339.string(purchaseDate))),
            attribute(.originalTransactionIdentifier, DER.utf8String(originalTransactionIdentifier)),
            attribute(.originalPurchaseDate, DER.ia5String(RFC3339.string(originalPurchaseDate))),
            attribute(.isTrialPeriod, DER.integer(isTrialPeriod ? 1 : 0)),
            attribute(.isInIntroOfferPeriod, DER.integer(isInIntroOfferPeriod ? 1 : 0)),
        ]
        // Apple writes an empty IA5String where a date does not apply, and 0 for no web order.
        attributes.append(attribute(.subscriptionExpirationDate, DER.ia5String(subscriptionExpirationDate.map(RFC3339.string) ?? "")))
        attributes.append(attribute(.cancellationDate, DER.ia5String(cancellationDate.map(RFC3339.string) ?? "")))
        attributes.append(attribute(.webOrderLineItemID, DER.integer(webOrderLineItemID ?? 0)))
        if let promotionalOfferIdentifier {
            attributes.append(attribute(.promotionalOfferIdentifier, DER.utf8String(promotionalOfferIdentifier)))
        }
        return DER.set(attributes)
    }

    init(payload: [UInt8]) throws(SigningError) {
        var fields: [Int64: [UInt8]] = [:]
        for (type, value) in try AppReceipt.attributes(payload) { fields[type] = value }
        func required(_ field: Field) throws(SigningError) -> [UInt8] {
            guard let value = fields[field.rawValue] else { throw SigningError("in-app purchase: no attribute \(field.rawValue)") }
            return value
        }
        func optionalDate(_ field: Field) throws(SigningError) -> Date? {
            guard let value = fields[field.rawValue] else { return nil }
            let text = try AppReceipt.string(value, .ia5String)
            if text.isEmpty { return nil }
            guard let date = RFC3339.date(text) else { throw SigningError("in-app purchase: bad date \(text)") }
            return date
        }
        quantity = try AppReceipt.integer(required(.quantity))
        productIdentifier = try AppReceipt.string(required(.productIdentifier), .utf8String)
        transactionIdentifier = try AppReceipt.string(required(.transactionIdentifier), .utf8String)
        originalTransactionIdentifier = try AppReceipt.string(required(.originalTransactionIdentifier), .utf8String)
        purchaseDate = try AppReceipt.date(required(.purchaseDate))
        originalPurchaseDate = try AppReceipt.date(required(.originalPurchaseDate))
        subscriptionExpirationDate = try optionalDate(.subscriptionExpirationDate)
        cancellationDate = try optionalDate(.cancellationDate)
        let webOrder = try fields[Field.webOrderLineItemID.rawValue].map { (value) throws(SigningError) in try AppReceipt.integer(value) }
        webOrderLineItemID = webOrder == 0 ? nil : webOrder
        isTrialPeriod = try fields[Field.isTrialPeriod.rawValue].map { (value) throws(SigningError) in try AppReceipt.integer(value) } == 1
        isInIntroOfferPeriod = try fields[Field.isInIntroOfferPeriod.rawValue].map { (value) throws(SigningError) in try AppReceipt.integer(value) } == 1
        promotionalOfferIdentifier = try fields[Field.promotionalOfferIdentifier.rawValue].map { (value) throws(SigningError) in
            try AppReceipt.string(value, .utf8String)
        }
    }
}

/// RFC 3339 timestamps as the receipt writes them: UTC, whole seconds, `Z`. Written out rather
/// than through `ISO8601DateFormatter`, which costs about 100 µs a date here.
enum RFC3339 {
    static func string(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return "" }
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return pad(parts.tm_year + 1900, 4) + "-" + pad(parts.tm_mon + 1, 2) + "-" + pad(parts.tm_mday, 2) + "T"
            + pad(parts.tm_hour, 2) + ":" + pad(parts.tm_min, 2) + ":" + pad(parts.tm_sec, 2) + "Z"
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` (as written above); nil for anything else.
    static func date(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count == 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
              bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"), bytes[19] == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            var value: Int32 = 0
            for index in range {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else { return nil }
                value = value * 10 + Int32(bytes[index] - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
              let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        return Date(timeIntervalSince1970: TimeInterval(timegm(&parts)))
    }
}
