import Foundation

// iOS 27.3's shape of the same terms: a pricing model (`pricingModel`) whose single price
// (`SinglePrice`) groups the billing (`BillingInfo`: price, display price, period) and the
// commitment. Read from the same values as iOS 26.4's `billingPrice`, `billingDisplayPrice`,
// `billingPeriod` and `commitmentInfo`, which stay.

extension Product.SubscriptionInfo {
    /// The price charged at each billing event, and the period between renewals.
    public struct BillingInfo: Hashable, Sendable {
        /// The price charged at each billing event, in the storefront's currency.
        public let price: Decimal
        /// `price` formatted for display.
        public let displayPrice: String
        /// The period between renewals.
        public let period: BillingPeriod
    }
}

extension Product.SubscriptionInfo.PricingTerms {
    /// The pricing models of a subscription, with the details of each. The simulated store sells
    /// subscriptions individually: every terms' model is `.singlePrice`.
    public enum PricingModel: Hashable, Sendable {
        /// A single price for the subscription, bought individually.
        case singlePrice(SinglePrice)
    }

    /// The price and commitment of a subscription bought individually.
    public struct SinglePrice: Hashable, Sendable {
        /// The price charged at each billing event, and the period between renewals.
        public let billingInfo: Product.SubscriptionInfo.BillingInfo
        /// What the subscriber commits to: the whole price over the commitment's period.
        public let commitmentInfo: Product.SubscriptionInfo.CommitmentInfo
    }

    /// The pricing model of these terms (always a single price here).
    public var pricingModel: PricingModel {
        .singlePrice(SinglePrice(billingInfo: .init(price: billingPrice, displayPrice: billingDisplayPrice, period: billingPeriod),
                                 commitmentInfo: commitmentInfo))
    }
}
