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
    private let storedIntroductoryPrice: SKProductDiscount?
    private let storedDiscounts: [SKProductDiscount]
    private let storedContent: HostedContentRecord?

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
        storedIntroductoryPrice = nil
        storedDiscounts = []
        storedContent = nil
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
        let locale = storedPriceLocale
        storedIntroductoryPrice = record.introductoryOffer.map { SKProductDiscount(offer: $0, priceLocale: locale, type: .introductory) }
        storedDiscounts = record.promotionalOffers.map { SKProductDiscount(offer: $0, priceLocale: locale, type: .subscription) }
        storedContent = StoreConnection.shared.hostedContent(for: record.productID)
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
    /// Whether the store hosts downloadable content for the product (a `[HostedContent]` of the
    /// app's registration).
    open var isDownloadable: Bool { storedContent != nil }
    /// Whether the product can be shared with the family.
    open var isFamilyShareable: Bool { storedIsFamilyShareable }
    /// The size in bytes of the product's hosted content, one number per content (a product has
    /// one here); empty when it has none.
    open var downloadContentLengths: [NSNumber] { storedContent.map { [NSNumber(value: $0.length)] } ?? [] }
    /// The version of the product's hosted content; empty when it has none.
    open var downloadContentVersion: String { storedContent?.version ?? "" }
    /// The version of the product's hosted content (deprecated name of `downloadContentVersion`).
    open var contentVersion: String { downloadContentVersion }
    /// The period of an auto-renewable subscription; `nil` for other products.
    open var subscriptionPeriod: SKProductSubscriptionPeriod? { storedSubscriptionPeriod }
    /// The introductory offer of a subscription, if any.
    open var introductoryPrice: SKProductDiscount? { storedIntroductoryPrice }
    /// The subscription group of an auto-renewable subscription.
    open var subscriptionGroupIdentifier: String? { storedSubscriptionGroupIdentifier }
    /// The promotional offers of a subscription.
    open var discounts: [SKProductDiscount] { storedDiscounts }
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
