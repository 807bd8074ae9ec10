extension Transaction {
    /// The kind of subscription offer a transaction used.
    public struct OfferType: RawRepresentable, Hashable, Sendable {
        /// The payload's number (`offerType`).
        public let rawValue: Int

        /// Creates an offer type from the payload's number.
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// An introductory offer.
        public static let introductory = OfferType(rawValue: 1)
        /// A promotional offer.
        public static let promotional = OfferType(rawValue: 2)
        /// An offer code.
        public static let code = OfferType(rawValue: 3)
        /// A win-back offer.
        public static let winBack = OfferType(rawValue: 4)
    }
}
