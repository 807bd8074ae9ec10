import Foundation
import StoreKitPosix
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
    case revokedCertificate

    init(_ kind: SignedDataVerificationError.Kind) {
        self = switch kind {
        case .invalidEncoding: .invalidEncoding
        case .invalidCertificateChain: .invalidCertificateChain
        case .invalidSignature: .invalidSignature
        case .missingRequiredProperties: .missingRequiredProperties
        case .revokedCertificate: .revokedCertificate
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

/// The process's trust: the root certificate `RootCertificateLocation` finds for the socket the
/// library connects to, and the revocation list published beside it. The root is found once
/// (while none is found, looked for again at every check); the list is read again whenever its
/// file changes (`storekitctl rotate-key --revoke` takes effect at the next check, not at the
/// app's next start). A list that is there but cannot be read leaves nothing trusted.
enum SignedDataTrust {
    /// What was found: the root, where, and the list as of the file's `stamp`.
    private struct Found {
        var root: Certificate
        var rootPath: String
        var stamp: FileStamp?
        var revocations: [RevocationList]
    }

    /// What identifies one version of the list's file (nil: no file).
    private struct FileStamp: Equatable {
        var device: UInt64, inode: UInt64, size: Int64, seconds: Int, nanoseconds: Int

        init?(path: String) {
            guard let info = try? FileSystem.status(of: path, followingSymlinks: true) else { return nil }
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
            size = Int64(info.st_size)
            seconds = info.st_mtim.tv_sec
            nanoseconds = info.st_mtim.tv_nsec
        }
    }

    private static let found = Mutex<Found?>(nil)
    private static let reported = Mutex<String?>(nil)

    /// Finds the root again at the next check (the library now talks to another daemon).
    static func forget() {
        found.withLock { $0 = nil }
        reported.withLock { $0 = nil }
    }

    /// The verifier of signed data; nil (nothing trusted) when no root is found or the list
    /// beside it cannot be read.
    static func verifier() -> SignedDataVerifier? {
        trust().map { SignedDataVerifier(roots: [$0.root], revocationLists: $0.revocations) }
    }

    /// The verifier of app receipts, with the same trust.
    static func receiptVerifier() throws(SigningError) -> ReceiptVerifier {
        let current = try currentTrust()
        return ReceiptVerifier(roots: [current.root], revocationLists: current.revocations)
    }

    private static func trust() -> (root: Certificate, revocations: [RevocationList])? {
        do {
            return try currentTrust()
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

    private static func currentTrust() throws(SigningError) -> (root: Certificate, revocations: [RevocationList]) {
        var current: Found
        if let known = found.withLock({ $0 }) {
            current = known
        } else {
            let located = try RootCertificateLocation.locate(socketPath: StoreConnection.shared.resolvedSocketPath,
                                                             environment: ProcessInfo.processInfo.environment)
            current = Found(root: located.certificate, rootPath: located.path, stamp: nil, revocations: [])
            current.stamp = FileStamp(path: RootCertificateLocation.revocationsPath(besideRoot: located.path))
            current.revocations = try RootCertificateLocation.revocations(besideRoot: located.path).map { [$0] } ?? []
            let made = current
            found.withLock { $0 = made }
            reported.withLock { $0 = nil }
            return (current.root, current.revocations)
        }
        let stamp = FileStamp(path: RootCertificateLocation.revocationsPath(besideRoot: current.rootPath))
        if stamp != current.stamp {
            current.stamp = stamp
            current.revocations = try RootCertificateLocation.revocations(besideRoot: current.rootPath).map { [$0] } ?? []
            let made = current
            found.withLock { $0 = made }
        }
        return (current.root, current.revocations)
    }
}
