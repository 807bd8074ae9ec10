import Foundation

extension Product {
    /// An option of a purchase: quantity, the app's account token, Ask to Buy in testing.
    public struct PurchaseOption: Hashable, Sendable {
        enum Value: Hashable, Sendable {
            case quantity(Int)
            case appAccountToken(UUID)
            case simulatesAskToBuyInSandbox(Bool)
            case promotionalOffer(offerID: String, keyID: String, nonce: UUID, signature: Data, timestamp: Int)
        }

        let value: Value

        /// Buys `quantity` units (1…10) of a consumable.
        public static func quantity(_ quantity: Int) -> PurchaseOption { PurchaseOption(value: .quantity(quantity)) }

        /// Ties the purchase to the user's account in the app; the transaction's `appAccountToken`
        /// returns it (StoreKit 1 sees it as the payment's `applicationUsername`, its UUID string).
        public static func appAccountToken(_ token: UUID) -> PurchaseOption { PurchaseOption(value: .appAccountToken(token)) }

        /// Applies a promotional offer of an auto-renewable subscription, signed by the app's server
        /// with its in-app purchase key (an `[OfferKey]` of the app's registration): the offer's
        /// `id`, the key's id, the nonce and the timestamp (ms) it signed, and the DER signature.
        public static func promotionalOffer(offerID: String, keyID: String, nonce: UUID, signature: Data, timestamp: Int)
            -> PurchaseOption
        {
            PurchaseOption(value: .promotionalOffer(offerID: offerID, keyID: keyID, nonce: nonce, signature: signature,
                                                    timestamp: timestamp))
        }

        /// Makes the simulated store treat the purchase as an Ask to Buy request.
        public static func simulatesAskToBuyInSandbox(_ simulatesAskToBuy: Bool) -> PurchaseOption {
            PurchaseOption(value: .simulatesAskToBuyInSandbox(simulatesAskToBuy))
        }
    }
}
