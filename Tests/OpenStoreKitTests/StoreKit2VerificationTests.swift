import Foundation
@testable import OpenStoreKit
import StoreKitSigning
import StoreKitTestSupport
import Testing

/// `checkSignedData(_:using:)`, the one place where the library trusts signed data: `.verified`
/// only for a JWS that StoreKitSigning's verifier accepts against the trusted root.
@Suite("StoreKit 2 verification")
struct StoreKit2VerificationTests {
    /// A signing identity (root, intermediate, leaf) made in a temporary directory, as storekitd makes its own.
    private static func identity() throws -> (SigningIdentity, TemporaryDirectory) {
        let directory = TemporaryDirectory("sk2-keys")
        let (identity, _, _) = try SigningIdentity.openOrCreate(directory: directory.file("keys"))
        return (identity, directory)
    }

    private static func base64URL(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// Signed now: the verifier checks the chain at the payload's `signedDate`, and the test chain is new.
    private static let now = Int64(Date().timeIntervalSince1970 * 1000)
    private static let payload = Array(#"{"transactionId":"7","productId":"coins","purchaseDate":\#(now),"signedDate":\#(now)}"#.utf8)

    @Test func aJWSSignedUnderTheTrustedRootIsVerified() throws {
        let (identity, directory) = try Self.identity()
        defer { directory.remove() }
        let jws = try identity.signJWS(payload: Self.payload)
        let check = checkSignedData(jws, using: SignedDataVerifier(roots: [identity.root]))
        #expect(check.failure == nil)
        #expect(check.payload == Self.payload)
        guard case .verified = VerificationResult(1, failure: check.failure) else {
            Issue.record("not verified")
            return
        }
    }

    @Test func nothingElseIsVerified() throws {
        let (identity, directory) = try Self.identity()
        defer { directory.remove() }
        let (stranger, strangerDirectory) = try Self.identity()
        defer { strangerDirectory.remove() }
        let trusted = SignedDataVerifier(roots: [identity.root])
        let jws = try identity.signJWS(payload: Self.payload)
        let parts = jws.split(separator: ".").map(String.init)

        // Another payload under the same signature.
        let forged = parts[0] + "." + Self.base64URL(#"{"transactionId":"8","productId":"coins","signedDate":\#(Self.now)}"#) + "." + parts[2]
        let forgedCheck = checkSignedData(forged, using: trusted)
        #expect(forgedCheck.failure == SignatureFailure.invalidSignature)
        #expect(SignedPayload(forgedCheck.payload)?.string("transactionId") == "8", "the unsafe payload is still readable")

        // Signed by another chain.
        #expect(checkSignedData(try stranger.signJWS(payload: Self.payload), using: trusted).failure == SignatureFailure.invalidCertificateChain)
        // No root to trust: nothing verifies, even a genuine JWS.
        #expect(checkSignedData(jws, using: nil).failure == SignatureFailure.invalidCertificateChain)
        #expect(checkSignedData(jws, using: nil).payload == Self.payload)
        // Not a JWS at all.
        #expect(checkSignedData(nil, using: trusted).failure == SignatureFailure.invalidEncoding)
        #expect(checkSignedData("", using: trusted).failure == SignatureFailure.invalidEncoding)
        #expect(checkSignedData("a.b", using: trusted).failure == SignatureFailure.invalidEncoding)
        #expect(checkSignedData(parts[0] + ".!!!." + parts[2], using: trusted).failure == SignatureFailure.invalidEncoding)
    }

    @Test func everyFailureIsUnverifiedWithApplesError() {
        let expected: [(SignatureFailure, VerificationResult<Int>.VerificationError)] = [
            (.invalidEncoding, .invalidEncoding), (.invalidCertificateChain, .invalidCertificateChain),
            (.invalidSignature, .invalidSignature), (.missingRequiredProperties, .missingRequiredProperties),
            (.invalidDeviceVerification, .invalidDeviceVerification),
        ]
        for (failure, error) in expected {
            #expect(VerificationResult(1, failure: failure) == .unverified(1, error))
        }
        #expect(VerificationResult(1, failure: nil) == .verified(1))
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/etc/machine-id"), "needs the machine id"))
    func anAppTransactionMustBeForThisAppOnThisMachine() throws {
        let nonce = UUID().uuidString.lowercased()
        let device = try DeviceIdentifier.forApp("com.example.game")
        let verification = Data(Digest.deviceVerification(nonce: nonce, deviceIdentifier: device)).base64EncodedString()
        let payload = SignedPayload(Array(try JSONSerialization.data(withJSONObject: [
            "deviceVerificationNonce": nonce, "deviceVerification": verification,
        ])))
        #expect(checkDeviceVerification(payload, app: "com.example.game"))
        #expect(!checkDeviceVerification(payload, app: "com.example.other"))
        #expect(!checkDeviceVerification(nil, app: "com.example.game"))
    }
}
