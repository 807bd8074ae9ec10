import Foundation
import StoreKitWire

/// A product of the store's catalogue, as a products request returns it.
///
/// Apps may subclass it and override the properties to build test doubles.
open class SKProduct: NSObject {
    /// The catalogue record this product was made from.
    var record: ProductRecord?

    private let storedLocalizedDescription: String
    private let storedLocalizedTitle: String
    private let storedPrice: NSDecimalNumber
    private let storedPriceLocale: Locale
    private let storedProductIdentifier: String
    private let storedIsFamilyShareable: Bool
    private let storedSubscriptionPeriod: SKProductSubscriptionPeriod?
    private let storedSubscriptionGroupIdentifier: String?

    /// Creates an empty product (no identifier, price 0); useful for test doubles.
    public override init() {
        storedLocalizedDescription = ""
        storedLocalizedTitle = ""
        storedPrice = .zero
        storedPriceLocale = .current
        storedProductIdentifier = ""
        storedIsFamilyShareable = false
        storedSubscriptionPeriod = nil
        storedSubscriptionGroupIdentifier = nil
        super.init()
    }

    /// Creates a product from the daemon's catalogue record.
    init(record: ProductRecord) {
        self.record = record
        storedLocalizedDescription = record.localizedDescription
        storedLocalizedTitle = record.localizedTitle
        storedPrice = NSDecimalNumber(
            mantissa: record.priceCents.magnitude, exponent: -2, isNegative: record.priceCents < 0)
        storedPriceLocale = SKProduct.locale(identifier: record.locale, currencyCode: record.currencyCode)
        storedProductIdentifier = record.productID
        storedIsFamilyShareable = record.familyShareable
        storedSubscriptionPeriod = record.subscriptionPeriod.flatMap(SKProductSubscriptionPeriod.init(iso8601:))
        storedSubscriptionGroupIdentifier = record.subscriptionGroupID
        super.init()
    }

    /// The storefront's locale with the product's currency, e.g. `en_US@currency=EUR`.
    private static func locale(identifier: String, currencyCode: String) -> Locale {
        guard !currencyCode.isEmpty else { return Locale(identifier: identifier) }
        return Locale(identifier: "\(identifier)@currency=\(currencyCode)")
    }

    /// The product's description in the storefront's language.
    open var localizedDescription: String { storedLocalizedDescription }
    /// The product's name in the storefront's language.
    open var localizedTitle: String { storedLocalizedTitle }
    /// The price, in the currency of `priceLocale`.
    open var price: NSDecimalNumber { storedPrice }
    /// The locale to format `price` with; it carries the currency.
    open var priceLocale: Locale { storedPriceLocale }
    /// The identifier of the product in the catalogue.
    open var productIdentifier: String { storedProductIdentifier }
    /// Whether the store hosts downloadable content for the product; always `false` here.
    open var isDownloadable: Bool { false }
    /// Whether the product can be shared with the family.
    open var isFamilyShareable: Bool { storedIsFamilyShareable }
    /// The sizes of the product's hosted content files; always empty here.
    open var downloadContentLengths: [NSNumber] { [] }
    /// The version of the product's hosted content; always empty here.
    open var downloadContentVersion: String { "" }
    /// The version of the product's hosted content (deprecated name); always empty here.
    open var contentVersion: String { "" }
    /// The period of an auto-renewable subscription; `nil` for other products.
    open var subscriptionPeriod: SKProductSubscriptionPeriod? { storedSubscriptionPeriod }
    /// The introductory offer of a subscription, if any.
    open var introductoryPrice: SKProductDiscount? { nil }
    /// The subscription group of an auto-renewable subscription.
    open var subscriptionGroupIdentifier: String? { storedSubscriptionGroupIdentifier }
    /// The promotional offers of a subscription.
    open var discounts: [SKProductDiscount] { [] }
}

extension SKProduct {
    /// The unit of a subscription period, with StoreKit's raw values.
    public enum PeriodUnit: UInt, Sendable {
        /// A period measured in days.
        case day = 0
        /// A period measured in weeks.
        case week = 1
        /// A period measured in months.
        case month = 2
        /// A period measured in years.
        case year = 3
    }
}
