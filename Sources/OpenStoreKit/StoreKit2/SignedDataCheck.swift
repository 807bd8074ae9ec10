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
/// library connects to, and the revocation list published beside it. Both files are read again
/// whenever they change (a new root after `storekitctl rotate-key --chain`, a list after
/// `--revoke`: no restart of the app); while no root is found, it is looked for at every check.
/// A list that is there but cannot be read leaves nothing trusted. A revocation once read is not
/// undone by the file going away or by an older list put in its place: every list read counts.
enum SignedDataTrust {
    /// What was found: the root, where, and the list, as of the files' stamps.
    private struct Found {
        var root: Certificate
        var rootPath: String
        var rootStamp: FileStamp?
        var listStamp: FileStamp?
        var revocations: [RevocationList]
    }

    /// What identifies one version of a file (nil: no file).
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
        let known = found.withLock { $0 }
        var current: Found
        if let known, FileStamp(path: known.rootPath) == known.rootStamp {
            current = known
        } else {
            // First, or the root file changed: found again (where it is may differ too).
            let located = try RootCertificateLocation.locate(socketPath: StoreConnection.shared.resolvedSocketPath,
                                                             environment: ProcessInfo.processInfo.environment)
            current = Found(root: located.certificate, rootPath: located.path, rootStamp: FileStamp(path: located.path),
                            listStamp: nil, revocations: known?.revocations ?? [])
            reported.withLock { $0 = nil }
        }
        let listPath = RootCertificateLocation.revocationsPath(besideRoot: current.rootPath)
        let stamp = FileStamp(path: listPath)
        if stamp != current.listStamp || known == nil {
            current.listStamp = stamp
            if let read = try RootCertificateLocation.revocations(besideRoot: current.rootPath) {
                current.revocations = newest(current.revocations, adding: read)
            }
        }
        let made = current
        found.withLock { $0 = made }
        return (current.root, current.revocations)
    }

    /// `lists` and `read`: every list read stays (a list only counts for the chain whose
    /// intermediate signed it, so a forged one changes nothing, and a revocation once read holds
    /// whatever list comes after); the same list is not kept twice, and the 16 newest are kept.
    private static func newest(_ lists: [RevocationList], adding read: RevocationList) -> [RevocationList] {
        let bytes = read.der
        guard !lists.contains(where: { $0.der == bytes }) else { return lists }
        return Array((lists + [read]).suffix(16))
    }
}
