import Foundation

/// An introductory or promotional offer of an auto-renewable subscription.
open class SKProductDiscount: NSObject {
    private let storedPrice: NSDecimalNumber
    private let storedPriceLocale: Locale
    private let storedIdentifier: String?
    private let storedSubscriptionPeriod: SKProductSubscriptionPeriod
    private let storedNumberOfPeriods: Int
    private let storedPaymentMode: PaymentMode
    private let storedType: `Type`

    /// Creates an empty offer (free, one empty period); useful for test doubles.
    public override init() {
        storedPrice = .zero
        storedPriceLocale = .current
        storedIdentifier = nil
        storedSubscriptionPeriod = SKProductSubscriptionPeriod()
        storedNumberOfPeriods = 0
        storedPaymentMode = .payAsYouGo
        storedType = .introductory
        super.init()
    }

    /// Creates an offer with the given terms.
    init(
        price: NSDecimalNumber, priceLocale: Locale, identifier: String?,
        subscriptionPeriod: SKProductSubscriptionPeriod, numberOfPeriods: Int,
        paymentMode: PaymentMode, type: `Type`
    ) {
        storedPrice = price
        storedPriceLocale = priceLocale
        storedIdentifier = identifier
        storedSubscriptionPeriod = subscriptionPeriod
        storedNumberOfPeriods = numberOfPeriods
        storedPaymentMode = paymentMode
        storedType = type
        super.init()
    }

    /// The offer's price, in the currency of `priceLocale`.
    open var price: NSDecimalNumber { storedPrice }
    /// The locale to format `price` with; it carries the currency.
    open var priceLocale: Locale { storedPriceLocale }
    /// The offer's identifier; `nil` for an introductory offer.
    open var identifier: String? { storedIdentifier }
    /// The length of one period of the offer.
    open var subscriptionPeriod: SKProductSubscriptionPeriod { storedSubscriptionPeriod }
    /// How many periods the offer lasts.
    open var numberOfPeriods: Int { storedNumberOfPeriods }
    /// How the user pays during the offer.
    open var paymentMode: PaymentMode { storedPaymentMode }
    /// Whether the offer is introductory or promotional.
    open var type: `Type` { storedType }
}

extension SKProductDiscount {
    /// How the user pays during an offer, with StoreKit's raw values.
    public enum PaymentMode: UInt, Sendable {
        /// The user pays the offer price each period.
        case payAsYouGo = 0
        /// The user pays the offer price once, up front.
        case payUpFront = 1
        /// The user pays nothing during the offer.
        case freeTrial = 2
    }

    /// The kind of an offer, with StoreKit's raw values.
    public enum `Type`: UInt, Sendable {
        /// An introductory offer.
        case introductory = 0
        /// A promotional offer.
        case subscription = 1
    }
}
