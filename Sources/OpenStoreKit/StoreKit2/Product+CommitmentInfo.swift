import Foundation

extension Product.SubscriptionInfo {
    /// What a subscriber commits to with a billing plan: the whole price and how long.
    public struct CommitmentInfo: Hashable, Sendable {
        /// The price of the whole commitment (12 months' payments of a monthly plan).
        public let price: Decimal
        /// `price` formatted for display, as the product's `displayPrice` is.
        public let displayPrice: String
        /// How long the commitment lasts: the subscription's period.
        public let period: Product.SubscriptionPeriod

        init(price: Decimal, displayPrice: String, period: Product.SubscriptionPeriod) {
            self.price = price
            self.displayPrice = displayPrice
            self.period = period
        }
    }
}
