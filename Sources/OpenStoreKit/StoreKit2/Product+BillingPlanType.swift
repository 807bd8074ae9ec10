import Foundation

extension Product.SubscriptionInfo {
    /// How a subscription is billed: up front, one payment a period, or monthly with a commitment
    /// to the subscription's whole period (iOS 26.4's "monthly subscriptions with a 12-month
    /// commitment"). The raw values are the signed data's (`billingPlanType`).
    public struct BillingPlanType: RawRepresentable, Hashable, Sendable {
        /// The plan's name in signed data: `BILLED_UPFRONT` or `MONTHLY`.
        public let rawValue: String

        /// Creates a plan type from its name.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// One payment a period, at the product's price.
        public static let upFront = BillingPlanType(rawValue: "BILLED_UPFRONT")
        /// A payment a month, for the months of the subscription's period (12 for a year).
        public static let monthly = BillingPlanType(rawValue: "MONTHLY")
    }

    /// The length of a billing period.
    public typealias BillingPeriod = Product.SubscriptionPeriod
}
