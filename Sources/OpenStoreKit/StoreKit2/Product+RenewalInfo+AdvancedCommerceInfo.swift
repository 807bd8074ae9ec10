import Foundation

extension Product.SubscriptionInfo.RenewalInfo {
    /// What an Advanced Commerce subscription's next renewal sells, from the signed renewal info's
    /// `advancedCommerceInfo` (Apple's `advancedCommerceRenewalInfo`). Prices are in the
    /// subscription's currency (the payload gives milliunits).
    public struct AdvancedCommerceInfo: Hashable, Sendable {
        /// The developer's identifier of the request the subscription was bought with.
        public let requestReferenceID: String
        /// The request's tax code.
        public let taxCode: String
        /// The subscription's state the next renewal is of, as a modify request would quote it.
        public let consistencyToken: String
        /// The subscription's name, from the request's `descriptors`.
        public let displayName: String
        /// The subscription's description, from the request's `descriptors`.
        public let description: String
        /// The subscription's period.
        public let period: Product.SubscriptionPeriod
        /// The items the next renewal sells, at the prices it sells them for.
        public let items: [Item]

        /// An item of the subscription, as the next renewal sells it.
        public struct Item: Hashable, Sendable {
            /// The item's details, as a transaction's item has them.
            public typealias Details = Transaction.AdvancedCommerceInfo.Item.Details

            /// The item's details: its SKU, name, description, the price of the next renewal and
            /// the offer still pricing it.
            public let details: Details
            /// A price increase of the item waiting for the next renewal (the simulated store
            /// makes none: nil).
            public let priceIncreaseInfo: PriceIncreaseInfo?

            /// A price increase of an item.
            public struct PriceIncreaseInfo: Hashable, Sendable {
                /// The new price.
                public let price: Decimal
                /// Where the increase stands.
                public let status: Status
                /// The SKUs whose increases this one depends on.
                public let dependentSKUs: [String]

                /// Where a price increase stands (the signed data's spelling).
                public struct Status: RawRepresentable, Hashable, Sendable {
                    public let rawValue: String
                    public init(rawValue: String) { self.rawValue = rawValue }

                    public static let scheduled = Status(rawValue: "SCHEDULED")
                    public static let pending = Status(rawValue: "PENDING")
                    public static let accepted = Status(rawValue: "ACCEPTED")
                }
            }
        }
    }
}

extension Product.SubscriptionInfo.RenewalInfo.AdvancedCommerceInfo {
    /// The payload's `advancedCommerceInfo`; nil when it has none, or one without its request's
    /// reference, period or items.
    init?(payload: SignedPayload?) {
        guard let fields = payload?.fields["advancedCommerceInfo"] as? [String: Any],
              let reference = fields["requestReferenceId"] as? String,
              let period = (fields["period"] as? String).flatMap(Product.SubscriptionPeriod.init(iso8601:)),
              let items = fields["items"] as? [[String: Any]] else { return nil }
        requestReferenceID = reference
        taxCode = fields["taxCode"] as? String ?? ""
        consistencyToken = fields["consistencyToken"] as? String ?? ""
        let descriptors = fields["descriptors"] as? [String: Any]
        displayName = descriptors?["displayName"] as? String ?? ""
        description = descriptors?["description"] as? String ?? ""
        self.period = period
        self.items = items.compactMap { item in
            Transaction.AdvancedCommerceInfo.Item(fields: item).map { Item(details: $0.details, priceIncreaseInfo: Item.PriceIncreaseInfo(item)) }
        }
    }
}

extension Product.SubscriptionInfo.RenewalInfo.AdvancedCommerceInfo.Item.PriceIncreaseInfo {
    /// The item's `priceIncreaseInfo`, when it has one.
    init?(_ item: [String: Any]) {
        guard let fields = item["priceIncreaseInfo"] as? [String: Any],
              let price = Transaction.AdvancedCommerceInfo.amount(fields["price"]) else { return nil }
        self.price = price
        status = Status(rawValue: fields["status"] as? String ?? "")
        dependentSKUs = fields["dependentSKUs"] as? [String] ?? []
    }
}
