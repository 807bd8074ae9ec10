import Foundation

extension Product {
    /// An option of a purchase: quantity, the app's account token, Ask to Buy in testing.
    public struct PurchaseOption: Hashable, Sendable {
        enum Value: Hashable, Sendable {
            case quantity(Int)
            case appAccountToken(UUID)
            case simulatesAskToBuyInSandbox(Bool)
        }

        let value: Value

        /// Buys `quantity` units (1…10) of a consumable.
        public static func quantity(_ quantity: Int) -> PurchaseOption { PurchaseOption(value: .quantity(quantity)) }

        /// Ties the purchase to the user's account in the app; the transaction's `appAccountToken`
        /// returns it (StoreKit 1 sees it as the payment's `applicationUsername`, its UUID string).
        public static func appAccountToken(_ token: UUID) -> PurchaseOption { PurchaseOption(value: .appAccountToken(token)) }

        /// Makes the simulated store treat the purchase as an Ask to Buy request.
        public static func simulatesAskToBuyInSandbox(_ simulatesAskToBuy: Bool) -> PurchaseOption {
            PurchaseOption(value: .simulatesAskToBuyInSandbox(simulatesAskToBuy))
        }
    }
}
