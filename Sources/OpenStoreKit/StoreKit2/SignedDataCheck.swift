import Foundation
import StoreKitSigning
import Synchronization

// The one place where OpenStoreKit decides whether signed data from the store is trusted. Every
// `VerificationResult` the library makes comes from `checkSignedData(_:using:)`: `.verified` only
// when StoreKitSigning's `SignedDataVerifier` accepts the compact JWS against storekitd's root
// certificate (docs/storekit2.md says where that is looked for).

/// Why signed data is not trusted.
enum SignatureFailure: Sendable, Equatable {
    case invalidEncoding
    case invalidCertificateChain
    case invalidSignature
    case missingRequiredProperties
    case invalidDeviceVerification

    init(_ kind: SignedDataVerificationError.Kind) {
        self = switch kind {
        case .invalidEncoding: .invalidEncoding
        case .invalidCertificateChain: .invalidCertificateChain
        case .invalidSignature: .invalidSignature
        case .missingRequiredProperties: .missingRequiredProperties
        }
    }
}

/// What checking a compact JWS found: the payload (JSON bytes; trusted only when `failure` is nil)
/// and, when it is not trusted, why.
struct SignedDataCheck: Sendable {
    var payload: [UInt8]?
    var failure: SignatureFailure?
}

/// Checks a compact JWS from the store with `verifier` (default: the process's, trusting
/// storekitd's root certificate). Without a verifier — no root certificate found — nothing is
/// trusted (`.invalidCertificateChain`); a missing or malformed JWS is `.invalidEncoding`. The
/// payload of an untrusted JWS is still decoded, for `unsafePayloadValue`.
func checkSignedData(_ jws: String?, using verifier: SignedDataVerifier? = SignedDataTrust.verifier()) -> SignedDataCheck {
    guard let jws, !jws.isEmpty, let payload = JWS.segment(1, of: jws) else {
        return SignedDataCheck(payload: nil, failure: .invalidEncoding)
    }
    guard let verifier else { return SignedDataCheck(payload: payload, failure: .invalidCertificateChain) }
    switch verifier.verify(jws) {
    case .success(let verified): return SignedDataCheck(payload: verified, failure: nil)
    case .failure(let error): return SignedDataCheck(payload: payload, failure: SignatureFailure(error.kind))
    }
}

/// Whether an app transaction's `deviceVerification` was made for this app on this machine:
/// SHA-384 of its nonce and the app's device identifier (StoreKitSigning's `DeviceIdentifier`).
func checkDeviceVerification(_ payload: SignedPayload?, app: String) -> Bool {
    guard let payload, let nonce = payload.string("deviceVerificationNonce"),
          let claimed = payload.string("deviceVerification").flatMap({ Data(base64Encoded: $0) }),
          let device = try? DeviceIdentifier.forApp(app)
    else { return false }
    return Digest.deviceVerification(nonce: nonce, deviceIdentifier: device) == [UInt8](claimed)
}

/// The process's verifier: it trusts the root certificate `RootCertificateLocation` finds for the
/// socket the library connects to. Found once; while none is found, asked again at every check.
enum SignedDataTrust {
    private static let found = Mutex<SignedDataVerifier?>(nil)
    private static let reported = Mutex<String?>(nil)

    /// Finds the root again at the next check (the library now talks to another daemon).
    static func forget() {
        found.withLock { $0 = nil }
        reported.withLock { $0 = nil }
    }

    static func verifier() -> SignedDataVerifier? {
        if let verifier = found.withLock({ $0 }) { return verifier }
        do {
            let root = try SignedDataVerifier.rootCertificateFromEnvironment(socketPath: StoreConnection.shared.resolvedSocketPath)
            let verifier = SignedDataVerifier(rootCertificatesDER: [root])
            found.withLock { $0 = verifier }
            return verifier
        } catch {
            let problem = "\(error)"
            let isNew = reported.withLock { reported in
                defer { reported = problem }
                return reported != problem
            }
            if isNew {
                FileHandle.standardError.write(Data("OpenStoreKit: signed data cannot be verified: \(problem)\n".utf8))
            }
            return nil
        }
    }
}
