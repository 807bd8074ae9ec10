import Foundation

extension Transaction {
    /// Where a transaction billed monthly stands in its commitment (the payload's `commitmentInfo`).
    public struct CommitmentInfo: Hashable, Sendable {
        /// The billing period this transaction is, from 1 to `totalBillingPeriods`.
        public let billingPeriodNumber: UInt64
        /// How many billing periods the commitment has (12 for a year billed monthly).
        public let totalBillingPeriods: UInt64
        /// When the commitment ends: the end of its last billing period.
        public let expirationDate: Date
        /// The price of the whole commitment.
        public let price: Decimal

        /// The commitment of a signed payload; nil when it has none or it is incomplete.
        init?(payload: SignedPayload?) {
            guard let info = payload?.object("commitmentInfo"), let number = info.uint64("billingPeriodNumber"),
                  let total = info.uint64("totalBillingPeriods"), let expires = info.date("commitmentExpiresDate"),
                  let millis = info.int("commitmentPrice") else { return nil }
            billingPeriodNumber = number
            totalBillingPeriods = total
            expirationDate = expires
            price = Decimal(millis) / 1000
        }
    }
}
