import Foundation

// The one place where OpenStoreKit decides whether signed data from the store is trusted. Every
// `VerificationResult` the library makes comes from `checkSignedData(_:)`.

/// Why signed data is not trusted.
enum SignatureFailure: Sendable, Equatable {
    case invalidEncoding
    case invalidCertificateChain
    case invalidSignature
    case missingRequiredProperties
}

/// What checking a compact JWS found: the payload (JSON bytes; trusted only when `failure` is nil)
/// and, when it is not trusted, why.
struct SignedDataCheck: Sendable {
    var payload: [UInt8]?
    var failure: SignatureFailure?
}

/// Checks a compact JWS from the store.
///
/// No signature verifier is available to this build, so nothing is trusted: the payload is
/// decoded for `unsafePayloadValue` and the result is `.invalidSignature`. A missing or malformed
/// JWS is `.invalidEncoding`.
func checkSignedData(_ jws: String?) -> SignedDataCheck {
    guard let jws, !jws.isEmpty, let payload = JWS.segment(1, of: jws) else {
        return SignedDataCheck(payload: nil, failure: .invalidEncoding)
    }
    return SignedDataCheck(payload: payload, failure: .invalidSignature)
}
