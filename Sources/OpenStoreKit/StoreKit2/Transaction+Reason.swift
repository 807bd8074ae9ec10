extension Transaction {
    /// Why a transaction was made: a purchase by the user, or a renewal of a subscription.
    public struct Reason: RawRepresentable, Hashable, Sendable {
        /// The payload's spelling (`transactionReason`): `PURCHASE` or `RENEWAL`.
        public let rawValue: String

        /// Creates a reason from the payload's spelling.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The user bought the product (a first purchase, a restore, an approved Ask to Buy).
        public static let purchase = Reason(rawValue: "PURCHASE")
        /// The store renewed an auto-renewable subscription.
        public static let renewal = Reason(rawValue: "RENEWAL")
    }
}
