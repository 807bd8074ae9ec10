import Foundation

extension Transaction {
    /// What a purchase made with the Advanced Commerce API bought: the developer's own products
    /// (`items`) sold under a generic SKU of the catalogue, from the payload's
    /// `advancedCommerceInfo`. Prices are in the transaction's currency (the payload
    /// gives milliunits).
    public struct AdvancedCommerceInfo: Hashable, Sendable {
        /// The developer's identifier of the request that made the purchase.
        public let requestReferenceID: String
        /// The request's tax code.
        public let taxCode: String
        /// What the items cost before tax.
        public let taxExclusivePrice: Decimal
        /// The tax rate applied (the simulated store levies no tax: 0).
        public let taxRate: Decimal
        /// The tax charged on top of `taxExclusivePrice` (0 here).
        public let estimatedTax: Decimal
        /// A subscription's name, from the request's `descriptors`.
        public let displayName: String?
        /// A subscription's description, from the request's `descriptors`.
        public let description: String?
        /// A subscription's period.
        public let period: Product.SubscriptionPeriod?
        /// The items purchased as part of this transaction.
        public let items: [Item]

        /// The developer-defined product that was purchased.
        public struct Item: Hashable, Sendable {
            /// The item's details.
            public let details: Details
            /// The refunds of this item (the simulated store refunds whole transactions: none).
            public let refunds: [Refund]?
            /// When access to the item was revoked.
            public let revocationDate: Date?

            /// The item details.
            public struct Details: Hashable, Sendable {
                /// The developer's identifier of the item.
                public let sku: String
                /// The item's name, as the buyer sees it.
                public let displayName: String
                /// The item's description.
                public let description: String
                /// The offer the item was bought or renewed with.
                public let offer: Offer?
                /// What the item cost in this transaction (its offer's price while the offer lasts).
                public let price: Decimal
            }
        }

        /// A discounted price the request gave an item for its first periods.
        public struct Offer: Hashable, Sendable {
            /// The duration of one period of the offer.
            public let period: Product.SubscriptionPeriod
            /// The number of periods the offer applies.
            public let periodCount: Int
            /// The discounted price.
            public let price: Decimal
            /// Why the offer was given.
            public let reason: Reason

            /// Why the offer was given.
            public struct Reason: RawRepresentable, Hashable, Sendable {
                /// The payload's spelling (`ACQUISITION`, `WIN_BACK`, `RETENTION`).
                public let rawValue: String
                public init(rawValue: String) { self.rawValue = rawValue }

                public static let acquisition = Reason(rawValue: "ACQUISITION")
                public static let winBack = Reason(rawValue: "WIN_BACK")
                public static let retention = Reason(rawValue: "RETENTION")
            }
        }

        /// A refund of an item.
        public struct Refund: Hashable, Sendable {
            /// The amount refunded.
            public let amount: Decimal
            /// When the refund was granted.
            public let date: Date
            /// Why the item was refunded.
            public let reason: Reason
            /// How much of the item was refunded.
            public let refundType: RefundType

            /// Why the item was refunded.
            public struct Reason: RawRepresentable, Hashable, Sendable {
                /// The payload's spelling (`UNINTENDED_PURCHASE`, …).
                public let rawValue: String
                public init(rawValue: String) { self.rawValue = rawValue }

                public static let unintendedPurchase = Reason(rawValue: "UNINTENDED_PURCHASE")
                public static let fulfillmentIssue = Reason(rawValue: "FULFILLMENT_ISSUE")
                public static let unsatisfiedWithPurchase = Reason(rawValue: "UNSATISFIED_WITH_PURCHASE")
                public static let legal = Reason(rawValue: "LEGAL")
                public static let other = Reason(rawValue: "OTHER")
                public static let modifyItemsRefund = Reason(rawValue: "MODIFY_ITEMS_REFUND")
            }

            /// How much was refunded.
            public struct RefundType: RawRepresentable, Hashable, Sendable {
                /// The payload's spelling (`FULL`, `PRORATED`, `CUSTOM`).
                public let rawValue: String
                public init(rawValue: String) { self.rawValue = rawValue }

                public static let full = RefundType(rawValue: "FULL")
                public static let prorated = RefundType(rawValue: "PRORATED")
                public static let custom = RefundType(rawValue: "CUSTOM")
            }
        }
    }
}

extension Transaction.AdvancedCommerceInfo {
    /// The payload's `advancedCommerceInfo`; nil when it has none, or one without its
    /// request's reference or items.
    init?(payload: SignedPayload?) {
        guard let fields = payload?.fields["advancedCommerceInfo"] as? [String: Any],
              let reference = fields["requestReferenceId"] as? String,
              let items = fields["items"] as? [[String: Any]] else { return nil }
        requestReferenceID = reference
        taxCode = fields["taxCode"] as? String ?? ""
        taxExclusivePrice = Self.amount(fields["taxExclusivePrice"]) ?? 0
        taxRate = (fields["taxRate"] as? String).flatMap { Decimal(string: $0, locale: Locale(identifier: "en_US_POSIX")) } ?? 0
        estimatedTax = Self.amount(fields["estimatedTax"]) ?? 0
        let descriptors = fields["descriptors"] as? [String: Any]
        displayName = descriptors?["displayName"] as? String
        description = descriptors?["description"] as? String
        period = (fields["period"] as? String).flatMap(Product.SubscriptionPeriod.init(iso8601:))
        self.items = items.compactMap(Item.init(fields:))
    }

    /// Milliunits as an amount of the currency.
    static func amount(_ value: Any?) -> Decimal? {
        guard let number = value as? NSNumber else { return nil }
        return Decimal(number.int64Value) / 1000
    }
}

extension Transaction.AdvancedCommerceInfo.Item {
    init?(fields: [String: Any]) {
        guard let sku = fields["SKU"] as? String else { return nil }
        let offer = (fields["offer"] as? [String: Any]).flatMap { offer -> Transaction.AdvancedCommerceInfo.Offer? in
            guard let period = (offer["period"] as? String).flatMap(Product.SubscriptionPeriod.init(iso8601:)) else { return nil }
            return .init(period: period, periodCount: (offer["periodCount"] as? NSNumber)?.intValue ?? 1,
                         price: Transaction.AdvancedCommerceInfo.amount(offer["price"]) ?? 0,
                         reason: .init(rawValue: offer["reason"] as? String ?? ""))
        }
        details = Details(sku: sku, displayName: fields["displayName"] as? String ?? "", description: fields["description"] as? String ?? "",
                          offer: offer, price: Transaction.AdvancedCommerceInfo.amount(fields["price"]) ?? 0)
        refunds = (fields["refunds"] as? [[String: Any]]).map { list in
            list.map { refund in
                Transaction.AdvancedCommerceInfo.Refund(
                    amount: Transaction.AdvancedCommerceInfo.amount(refund["refundAmount"]) ?? 0,
                    date: Date(timeIntervalSince1970: ((refund["refundDate"] as? NSNumber)?.doubleValue ?? 0) / 1000),
                    reason: .init(rawValue: refund["refundReason"] as? String ?? ""),
                    refundType: .init(rawValue: refund["refundType"] as? String ?? ""))
            }
        }
        revocationDate = (fields["revocationDate"] as? NSNumber).map { Date(timeIntervalSince1970: $0.doubleValue / 1000) }
    }
}
