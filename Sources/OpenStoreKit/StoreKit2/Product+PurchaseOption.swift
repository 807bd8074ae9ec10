import Foundation

/// A purchase's storefront-change decision: compared by identity (closures are not `Hashable`).
final class StorefrontDecider: Hashable, Sendable {
    let decide: @Sendable (Storefront) -> Bool
    init(_ decide: @escaping @Sendable (Storefront) -> Bool) { self.decide = decide }
    static func == (lhs: StorefrontDecider, rhs: StorefrontDecider) -> Bool { lhs === rhs }
    func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

extension Product {
    /// An option of a purchase: quantity, the app's account token, Ask to Buy in testing.
    public struct PurchaseOption: Hashable, Sendable {
        enum Value: Hashable, Sendable {
            case quantity(Int)
            case appAccountToken(UUID)
            case simulatesAskToBuyInSandbox(Bool)
            case promotionalOffer(offerID: String, keyID: String, nonce: UUID, signature: Data, timestamp: Int)
            case promotionalOfferJWS(offerID: String?, compactJWS: String)
            case introductoryOfferEligibility(compactJWS: String)
            case winBackOffer(offerID: String?)
            case billingPlanType(Product.SubscriptionInfo.BillingPlanType)
            case onStorefrontChange(StorefrontDecider)
            case custom(key: String, value: CustomValue)
        }

        /// The value of a custom option.
        enum CustomValue: Hashable, Sendable {
            case string(String)
            case number(Double)
            case bool(Bool)
            case data(Data)
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

        /// Applies promotional offer `offer` with the JWS the app's server signed for it (Apple's
        /// promotional offer signature, version 2: `PromotionalOfferV2SignatureCreator` of the App
        /// Store Server Library), with a key of an `[OfferKey]` of the app's registration.
        public static func promotionalOffer(_ offer: Product.SubscriptionOffer, compactJWS: String) -> PurchaseOption {
            PurchaseOption(value: .promotionalOfferJWS(offerID: offer.id, compactJWS: compactJWS))
        }

        /// The app's server's decision on the introductory offer, signed as a JWS
        /// (`IntroductoryOfferEligibilitySignatureCreator`): `allowIntroductoryOffer` true applies the
        /// product's introductory offer even to a buyer the store's rule would refuse it; false
        /// buys without it.
        public static func introductoryOfferEligibility(compactJWS: String) -> PurchaseOption {
            PurchaseOption(value: .introductoryOfferEligibility(compactJWS: compactJWS))
        }

        /// Applies win-back offer `offer` (one of `SubscriptionInfo.winBackOffers`) for a subscriber
        /// whose subscription lapsed; the store refuses it (`ineligibleForOffer`) to a buyer it is not for.
        public static func winBackOffer(_ offer: Product.SubscriptionOffer) -> PurchaseOption {
            PurchaseOption(value: .winBackOffer(offerID: offer.id))
        }

        /// Buys the subscription with billing plan `type` (one of `SubscriptionInfo.pricingTerms`):
        /// `.monthly` bills a month at a time, committing to the subscription's period; `.upFront`
        /// is what a purchase without this option is. The store refuses a plan the product does
        /// not have (`Product.PurchaseError.productUnavailable`).
        public static func billingPlanType(_ type: Product.SubscriptionInfo.BillingPlanType) -> PurchaseOption {
            PurchaseOption(value: .billingPlanType(type))
        }

        /// Decides whether a purchase still waiting (an Ask to Buy request) goes on when the
        /// storefront changes before it completes: `shouldContinuePurchase` is called with the new
        /// storefront; false withdraws the purchase (its transaction fails, as StoreKit 1's
        /// `paymentQueue(_:shouldContinue:in:)` answering false does).
        public static func onStorefrontChange(shouldContinuePurchase: @escaping @Sendable (Storefront) -> Bool) -> PurchaseOption {
            PurchaseOption(value: .onStorefrontChange(StorefrontDecider(shouldContinuePurchase)))
        }

        /// A custom option: it has no effect, as Apple documents for string, number and Boolean
        /// values (a data value is for the Advanced Commerce API, which the simulated store does
        /// not offer: it has none either).
        public static func custom(key: String, value: String) -> PurchaseOption {
            PurchaseOption(value: .custom(key: key, value: .string(value)))
        }

        /// A custom option with a number: it has no effect.
        public static func custom(key: String, value: Double) -> PurchaseOption {
            PurchaseOption(value: .custom(key: key, value: .number(value)))
        }

        /// A custom option with a Boolean: it has no effect.
        public static func custom(key: String, value: Bool) -> PurchaseOption {
            PurchaseOption(value: .custom(key: key, value: .bool(value)))
        }

        /// A custom option with data (the Advanced Commerce API's): it has no effect here.
        public static func custom(key: String, value: Data) -> PurchaseOption {
            PurchaseOption(value: .custom(key: key, value: .data(value)))
        }

        /// Makes the simulated store treat the purchase as an Ask to Buy request.
        public static func simulatesAskToBuyInSandbox(_ simulatesAskToBuy: Bool) -> PurchaseOption {
            PurchaseOption(value: .simulatesAskToBuyInSandbox(simulatesAskToBuy))
        }
    }
}
