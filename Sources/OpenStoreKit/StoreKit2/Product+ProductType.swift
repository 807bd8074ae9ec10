import StoreKitWire

extension Product {
    /// The kind of an in-app purchase.
    public struct ProductType: RawRepresentable, Hashable, Sendable {
        /// The spelling of Apple's signed transactions (`type`), e.g. `Auto-Renewable Subscription`.
        public let rawValue: String

        /// Creates a product type from its raw spelling.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Used up once bought, and can be bought again.
        public static let consumable = ProductType(rawValue: "Consumable")
        /// Bought once, kept for good.
        public static let nonConsumable = ProductType(rawValue: "Non-Consumable")
        /// A subscription that renews until cancelled.
        public static let autoRenewable = ProductType(rawValue: "Auto-Renewable Subscription")
        /// A subscription for a fixed time that does not renew.
        public static let nonRenewable = ProductType(rawValue: "Non-Renewing Subscription")

        /// The type of a catalogue product.
        init(_ kind: ProductRecord.Kind) {
            self = switch kind {
            case .consumable: .consumable
            case .nonConsumable: .nonConsumable
            case .autoRenewable: .autoRenewable
            case .nonRenewing: .nonRenewable
            }
        }
    }
}
