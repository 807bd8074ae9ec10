extension Transaction {
    /// Why the store refunded or revoked a transaction.
    public struct RevocationReason: RawRepresentable, Hashable, Sendable {
        /// The payload's number (`revocationReason`): 0 other, 1 a problem in the app.
        public let rawValue: Int

        /// Creates a reason from the payload's number.
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// Refunded because of a real or perceived issue in the app.
        public static let developerIssue = RevocationReason(rawValue: 1)
        /// Refunded for another reason.
        public static let other = RevocationReason(rawValue: 0)
    }
}
