extension Transaction {
    /// The subscription offer a transaction was bought or renewed with.
    public struct Offer: Hashable, Sendable {
        /// The promotional offer's identifier; nil for an introductory offer.
        public let id: String?
        /// Introductory or promotional.
        public let type: OfferType
        /// How the offer is paid (the payload's `offerDiscountType`).
        public let paymentMode: PaymentMode?
        /// The offer's whole length (the payload's `offerPeriod`).
        public let period: Product.SubscriptionPeriod?

        /// How an offer is paid.
        public struct PaymentMode: RawRepresentable, Hashable, Sendable {
            /// The payload's spelling (`FREE_TRIAL`, `PAY_AS_YOU_GO`, `PAY_UP_FRONT`).
            public let rawValue: String
            public init(rawValue: String) { self.rawValue = rawValue }

            public static let freeTrial = PaymentMode(rawValue: "FREE_TRIAL")
            public static let payAsYouGo = PaymentMode(rawValue: "PAY_AS_YOU_GO")
            public static let payUpFront = PaymentMode(rawValue: "PAY_UP_FRONT")
        }
    }
}

extension Transaction.Offer {
    /// The offer a payload names; nil when it names none.
    init?(payload: SignedPayload?) {
        guard let payload, let type = payload.int("offerType") else { return nil }
        self.type = Transaction.OfferType(rawValue: type)
        id = payload.string("offerIdentifier")
        paymentMode = payload.string("offerDiscountType").map(PaymentMode.init(rawValue:))
        period = payload.string("offerPeriod").flatMap(Product.SubscriptionPeriod.init(iso8601:))
    }
}
