import FoundationEssentials
import StoreKitEngine
import StoreKitSigning
import StoreKitWire

extension AppRegistration {
    /// Why the signature of a payment's promotional offer is refused, as StoreKit says it
    /// (`SKError`): a field missing or not in its form (`missingOfferParams`), a key the app did not
    /// register, a signature that does not verify, or one older than 24 hours or from the future
    /// (`invalidSignature`); nil when it verifies. The signed text is Apple's
    /// (`PromotionalOfferSignature.payload`), the app's ID standing for its bundle identifier.
    /// Whether the offer exists and the buyer may have it is the engine's to say.
    func offerSignatureRefusal(_ discount: ClientMessage.Discount, productID: String, applicationUsername: String?,
                               nowMilliseconds: Int64) -> Outcome? {
        guard !discount.offerID.isEmpty, !discount.keyID.isEmpty, !discount.nonce.isEmpty, !discount.signature.isEmpty,
              discount.timestamp > 0 else {
            return .storeKit(.missingOfferParams, "the promotional offer lacks its identifier, key identifier, nonce, signature or timestamp")
        }
        guard UUID(uuidString: discount.nonce) != nil else {
            return .storeKit(.missingOfferParams, "the offer's nonce \(discount.nonce) is not a UUID")
        }
        guard let signature = Data(base64Encoded: discount.signature) else {
            return .storeKit(.missingOfferParams, "the offer's signature is not base64")
        }
        guard let key = offerKeys[discount.keyID] else {
            return .storeKit(.invalidSignature, "key \(discount.keyID) signs no promotional offers of \(id) (no [OfferKey] with that ID)")
        }
        let payload = PromotionalOfferSignature.payload(
            appBundleID: id, keyID: discount.keyID, productID: productID, offerID: discount.offerID,
            appAccountToken: applicationUsername, nonce: discount.nonce, timestamp: discount.timestamp)
        guard key.key.verifies(der: Array(signature), over: payload) else {
            return .storeKit(.invalidSignature, "the signature of offer \(discount.offerID) does not verify with key \(discount.keyID)")
        }
        let age = nowMilliseconds - discount.timestamp
        guard age <= PromotionalOfferSignature.lifetimeMilliseconds else {
            return .storeKit(.invalidSignature, "the signature of offer \(discount.offerID) was made \(age / 3_600_000) hours ago; "
                             + "it is good for 24 hours")
        }
        guard age >= -Self.clockSkewMilliseconds else {
            return .storeKit(.invalidSignature, "the signature of offer \(discount.offerID) is dated \(-age / 1000) s in the future")
        }
        return nil
    }

    /// How far in the future a signature's timestamp may be (the signing server's clock ahead).
    static let clockSkewMilliseconds: Int64 = 5 * 60_000
}
