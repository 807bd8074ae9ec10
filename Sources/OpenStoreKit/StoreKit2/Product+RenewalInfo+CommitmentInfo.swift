import Foundation

extension Product.SubscriptionInfo.RenewalInfo {
    /// What happens when a subscription's commitment ends (the payload's `commitmentInfo`).
    public struct CommitmentInfo: Hashable, Sendable {
        /// When the commitment ends, and the next one would begin.
        public let renewalDate: Date
        /// What the next commitment costs.
        public let renewalPrice: Decimal
        /// Whether a new commitment begins when this one ends (turning auto-renew off stops that,
        /// not the billing periods left).
        public let willAutoRenew: Bool
        /// The product the subscription renews to at the commitment's end.
        public let autoRenewPreference: String
        /// How the next commitment is billed.
        public let renewalBillingPlanType: Product.SubscriptionInfo.BillingPlanType

        /// The commitment of a signed payload; nil when it has none or it is incomplete.
        init?(payload: SignedPayload?) {
            guard let info = payload?.object("commitmentInfo"), let date = info.date("commitmentRenewalDate"),
                  let millis = info.int("commitmentRenewalPrice"), let status = info.int("commitmentAutoRenewStatus"),
                  let product = info.string("commitmentAutoRenewProductId"),
                  let plan = info.string("commitmentRenewalBillingPlanType") else { return nil }
            renewalDate = date
            renewalPrice = Decimal(millis) / 1000
            willAutoRenew = status == 1
            autoRenewPreference = product
            renewalBillingPlanType = Product.SubscriptionInfo.BillingPlanType(rawValue: plan)
        }
    }
}
