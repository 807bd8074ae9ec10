import Foundation

extension Product.SubscriptionOffer {
    /// A promotional offer's signature, made by the app's server with its in-app purchase key
    /// (an `[OfferKey]` of the app's registration): what `PurchaseOption.promotionalOffer(offerID:signature:)` carries.
    public struct Signature: Hashable, Sendable {
        /// The id of the key that signed (`[OfferKey] ID=`).
        public var keyID: String
        /// The one-time UUID the server signed (its lowercase string is what is signed).
        public var nonce: UUID
        /// When the server signed, in milliseconds since 1970: the offer is good for 24 hours.
        public var timestamp: Int
        /// The ECDSA P-256 signature, DER-encoded.
        public var signature: Data

        public init(keyID: String, nonce: UUID, timestamp: Int, signature: Data) {
            self.keyID = keyID
            self.nonce = nonce
            self.timestamp = timestamp
            self.signature = signature
        }
    }
}

extension Product.PurchaseOption {
    /// Applies the promotional offer `offerID` of an auto-renewable subscription, with the signature
    /// the app's server made for it: the same as `promotionalOffer(offerID:keyID:nonce:signature:timestamp:)`.
    public static func promotionalOffer(offerID: String, signature: Product.SubscriptionOffer.Signature) -> Product.PurchaseOption {
        promotionalOffer(offerID: offerID, keyID: signature.keyID, nonce: signature.nonce, signature: signature.signature,
                         timestamp: signature.timestamp)
    }
}
