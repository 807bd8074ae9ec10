import Foundation
import StoreKitWire

extension Product {
    /// An introductory or promotional offer of an auto-renewable subscription.
    public struct SubscriptionOffer: Hashable, Sendable {
        /// The offer's identifier; nil for an introductory offer.
        public let id: String?
        /// Whether the offer is introductory or promotional.
        public let type: OfferType
        /// The price of one period (pay as you go) or of the whole offer (pay up front); 0 for a free trial.
        public let price: Decimal
        /// `price` formatted for display.
        public let displayPrice: String
        /// The length of one offer period.
        public let period: SubscriptionPeriod
        /// How many periods the offer lasts.
        public let periodCount: Int
        /// How the user pays during the offer.
        public let paymentMode: PaymentMode

        /// An offer from the daemon's record, priced in `currency` for `locale`.
        init(record: ProductRecord.Offer, type: OfferType, currency: String, locale: String, fallbackPeriod: SubscriptionPeriod) {
            id = record.id
            self.type = type
            price = Product.decimal(record.displayPrice, cents: record.priceCents)
            displayPrice = price.formatted(.currency(code: currency.isEmpty ? "USD" : currency).locale(Locale(identifier: locale)))
            period = SubscriptionPeriod(iso8601: record.period) ?? fallbackPeriod
            periodCount = Int(record.periodCount)
            paymentMode = switch record.paymentMode {
            case .payAsYouGo: .payAsYouGo
            case .payUpFront: .payUpFront
            case .freeTrial: .freeTrial
            }
        }
    }
}

extension Product.SubscriptionOffer {
    /// The kind of an offer.
    public struct OfferType: RawRepresentable, Hashable, Sendable {
        /// The kind's name.
        public let rawValue: String

        /// Creates an offer type from its name.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// For buyers who never subscribed in the group.
        public static let introductory = OfferType(rawValue: "introductory")
        /// For current or past subscribers, applied by the app.
        public static let promotional = OfferType(rawValue: "promotional")
        /// For subscribers whose subscription lapsed (`SubscriptionInfo.winBackOffers`).
        public static let winBack = OfferType(rawValue: "winBack")
    }

    /// How the user pays during an offer.
    public struct PaymentMode: RawRepresentable, Hashable, Sendable {
        /// The mode's name.
        public let rawValue: String

        /// Creates a payment mode from its name.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Nothing during the offer.
        public static let freeTrial = PaymentMode(rawValue: "freeTrial")
        /// The offer price each period.
        public static let payAsYouGo = PaymentMode(rawValue: "payAsYouGo")
        /// The offer price once, up front.
        public static let payUpFront = PaymentMode(rawValue: "payUpFront")
    }
}
