import Foundation

/// A signed promotional offer the app attaches to a payment (`SKMutablePayment.paymentDiscount`).
open class SKPaymentDiscount: NSObject {
    /// The identifier of the subscription offer.
    open var identifier: String { storedIdentifier }
    /// The identifier of the key that signed the offer.
    open var keyIdentifier: String { storedKeyIdentifier }
    /// A one-time value the server used when signing.
    open var nonce: UUID { storedNonce }
    /// The signature the app's server produced for the offer.
    open var signature: String { storedSignature }
    /// When the signature was made, in milliseconds since 1970.
    open var timestamp: NSNumber { storedTimestamp }

    private let storedIdentifier: String
    private let storedKeyIdentifier: String
    private let storedNonce: UUID
    private let storedSignature: String
    private let storedTimestamp: NSNumber

    /// Creates a payment discount from the values the app's server signed.
    public init(identifier: String, keyIdentifier: String, nonce: UUID, signature: String, timestamp: NSNumber) {
        storedIdentifier = identifier
        storedKeyIdentifier = keyIdentifier
        storedNonce = nonce
        storedSignature = signature
        storedTimestamp = timestamp
        super.init()
    }
}
