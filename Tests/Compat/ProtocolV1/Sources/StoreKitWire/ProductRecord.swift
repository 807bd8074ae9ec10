/// A product of the catalogue as clients see it (`SKProduct`).
public struct ProductRecord: Sendable, Equatable {
    public enum Kind: UInt8, Sendable, CaseIterable {
        case consumable = 0
        case nonConsumable = 1
        case autoRenewable = 2
        case nonRenewing = 3

        /// The name used in JSON output (StoreKit 2's `Product.ProductType` spelling).
        public var name: String {
            switch self {
            case .consumable: "consumable"
            case .nonConsumable: "nonConsumable"
            case .autoRenewable: "autoRenewable"
            case .nonRenewing: "nonRenewing"
            }
        }
    }

    public var productID: String
    public var kind: Kind
    public var localizedTitle: String
    public var localizedDescription: String
    /// Price in the smallest unit of the currency scaled by 1/100 (e.g. "0.99" → 99).
    public var priceCents: Int64
    public var displayPrice: String
    public var currencyCode: String
    public var locale: String
    public var subscriptionGroupID: String?
    /// ISO 8601 duration such as `P1M`.
    public var subscriptionPeriod: String?
    public var familyShareable: Bool

    public init(
        productID: String, kind: Kind, localizedTitle: String, localizedDescription: String,
        priceCents: Int64, displayPrice: String, currencyCode: String, locale: String,
        subscriptionGroupID: String? = nil, subscriptionPeriod: String? = nil, familyShareable: Bool = false
    ) {
        self.productID = productID
        self.kind = kind
        self.localizedTitle = localizedTitle
        self.localizedDescription = localizedDescription
        self.priceCents = priceCents
        self.displayPrice = displayPrice
        self.currencyCode = currencyCode
        self.locale = locale
        self.subscriptionGroupID = subscriptionGroupID
        self.subscriptionPeriod = subscriptionPeriod
        self.familyShareable = familyShareable
    }
}

extension ProductRecord {
    public func encode(into writer: inout WireWriter) {
        writer.string(productID)
        writer.u8(kind.rawValue)
        writer.string(localizedTitle)
        writer.string(localizedDescription)
        writer.i64(priceCents)
        writer.string(displayPrice)
        writer.string(currencyCode)
        writer.string(locale)
        writer.optionalString(subscriptionGroupID)
        writer.optionalString(subscriptionPeriod)
        writer.bool(familyShareable)
    }

    public static func decode(from reader: inout WireReader) throws(WireError) -> ProductRecord {
        let productID = try reader.string()
        let rawKind = try reader.u8()
        guard let kind = Kind(rawValue: rawKind) else { throw WireError(.invalidValue("product type \(rawKind)")) }
        return ProductRecord(
            productID: productID, kind: kind, localizedTitle: try reader.string(),
            localizedDescription: try reader.string(), priceCents: try reader.i64(),
            displayPrice: try reader.string(), currencyCode: try reader.string(), locale: try reader.string(),
            subscriptionGroupID: try reader.optionalString(), subscriptionPeriod: try reader.optionalString(),
            familyShareable: try reader.bool())
    }
}
