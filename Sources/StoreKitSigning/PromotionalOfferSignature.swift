import CCrypto

/// A promotional offer's signature as Apple specifies it ("Generating a signature for promotional
/// offers"): ECDSA P-256 with SHA-256, DER, in base64, made by the developer's server with the
/// in-app purchase key it got from App Store Connect, over the offer's fields joined by U+2063
/// (INVISIBLE SEPARATOR).
public enum PromotionalOfferSignature {
    /// The signed text: app bundle id, key id, product id, offer id, the app account token
    /// (`applicationUsername`; empty when none), the nonce and the timestamp (ms), in that order;
    /// the token and the nonce in lower case.
    public static func payload(appBundleID: String, keyID: String, productID: String, offerID: String,
                               appAccountToken: String?, nonce: String, timestamp: Int64) -> [UInt8] {
        let fields = [appBundleID, keyID, productID, offerID, (appAccountToken ?? "").lowercased(), nonce.lowercased(), String(timestamp)]
        return Array(fields.joined(separator: "\u{2063}").utf8)
    }

    /// How long a signature is accepted after its timestamp (Apple: "keeps the offer active for 24 hours").
    public static let lifetimeMilliseconds: Int64 = 24 * 3_600_000
}

/// The public half of a developer's promotional-offer key, from a PEM file holding the public
/// key or the private key itself (App Store Connect's `.p8`, PKCS#8).
public final class OfferVerificationKey: @unchecked Sendable {
    let pointer: OpaquePointer
    /// Whether the file held the private key (then it must be kept from other users).
    public let heldPrivateKey: Bool

    deinit { EVP_PKEY_free(pointer) }

    public init(pem: [UInt8]) throws(SigningError) {
        var isPrivate = false
        let key = try withReadBIO(pem) { (bio) throws(SigningError) -> OpaquePointer in
            if let key = PEM_read_bio_PUBKEY(bio, nil, nil, nil) { return key }
            ERR_clear_error()
            _ = BIO_ctrl(bio, BIO_CTRL_RESET, 0, nil)
            guard let key = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else {
                throw .openSSL("Cannot read a public key or a private key (PEM)")
            }
            isPrivate = true
            return key
        }
        pointer = key
        heldPrivateKey = isPrivate
        var group = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC,
              EVP_PKEY_get_group_name(key, &group, group.count, &length) == 1,
              String(decoding: group.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "prime256v1" else {
            throw SigningError("The key is not a P-256 (prime256v1) key")
        }
    }

    /// Whether `signature` (DER) is this key's ECDSA P-256 / SHA-256 signature over `data`.
    public func verifies(der signature: [UInt8], over data: [UInt8]) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, sha256 ?? EVP_sha256(), nil, pointer) == 1 else { return false }
        let verified = EVP_DigestVerify(context, signature, signature.count, data, data.count) == 1
        ERR_clear_error()
        return verified
    }
}
