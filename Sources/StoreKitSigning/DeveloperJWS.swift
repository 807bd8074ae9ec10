/// A compact JWS a developer's server signs with its in-app purchase key: Apple's form of signed
/// App Store requests (promotional offers, version 2, and introductory-offer eligibility; Apple's
/// App Store Server Library makes them with `PromotionalOfferV2SignatureCreator` and
/// `IntroductoryOfferEligibilitySignatureCreator`): ES256, the key's identifier in the header's
/// `kid`, the claims in the payload. The claims stay bytes here: reading them is the caller's.
public struct DeveloperJWS: Sendable {
    /// The header's `kid`.
    public let keyID: String
    /// The payload, JSON.
    public let payload: [UInt8]
    /// What the signature covers: the header and payload parts as sent, joined by a dot.
    let signingInput: [UInt8]
    /// r ‖ s.
    let signature: [UInt8]

    /// Splits and decodes a compact JWS whose header says `alg` ES256 and names a `kid`; nil for
    /// anything else (the header's fields are found by a strict reading of its JSON object's
    /// two string members; others are allowed).
    public init?(compact: String, headerFields: (_ header: [UInt8]) -> (alg: String?, kid: String?)?) {
        let parts = compact.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = Base64URL.decode(parts[0]), let payload = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]), signature.count == 64,
              let fields = headerFields(header), fields.alg == "ES256", let kid = fields.kid, !kid.isEmpty else { return nil }
        keyID = kid
        self.payload = payload
        signingInput = Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8)
        self.signature = signature
    }

    /// Whether `key` made the signature.
    public func isSigned(by key: OfferVerificationKey) -> Bool {
        key.verifiesES256(signature, over: signingInput)
    }

    /// Signs `claims` (a JSON object's bytes) with `key`, naming `keyID`: what a developer's server
    /// sends the app (storekitctl makes them for tests).
    public static func sign(claims: [UInt8], keyID: String, with key: SigningKey, header: [UInt8]) throws(SigningError) -> String {
        let input = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        return input + "." + Base64URL.encode(try key.signatureES256(over: Array(input.utf8)))
    }
}

extension OfferVerificationKey {
    /// Whether `signature` (r ‖ s, 64 bytes) is this key's ES256 signature over `data`.
    public func verifiesES256(_ signature: [UInt8], over data: [UInt8]) -> Bool {
        StoreKitSigning.verifiesES256(signature, over: data, publicKey: pointer)
    }
}
