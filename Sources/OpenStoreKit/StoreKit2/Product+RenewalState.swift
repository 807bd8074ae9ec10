extension Product.SubscriptionInfo {
    /// Where a subscription is in its life.
    public struct RenewalState: RawRepresentable, Hashable, Sendable {
        /// The state's number, as Apple's.
        public let rawValue: Int

        /// Creates a renewal state from its number.
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// Active: the user has the service.
        public static let subscribed = RenewalState(rawValue: 1)
        /// Ended; the user no longer has the service.
        public static let expired = RenewalState(rawValue: 2)
        /// The renewal failed for a billing issue and the store is still trying.
        public static let inBillingRetryPeriod = RenewalState(rawValue: 3)
        /// The renewal failed for a billing issue; the user keeps the service for the grace period.
        public static let inGracePeriod = RenewalState(rawValue: 4)
        /// The store refunded or revoked the subscription.
        public static let revoked = RenewalState(rawValue: 5)
    }
}
