// A revoked signing certificate, as an app meets it: storekitd's signing key was copied, the
// operator ran `storekitctl rotate-key --revoke`, and whatever the copied key signs — a
// transaction, an app receipt — is `.unverified(_, .revokedCertificate)` in the app's process,
// which reads the daemon's published list again as soon as it changes, without a restart.
import Foundation
@_spi(StoreKitTest) @testable import OpenStoreKit
@testable import OpenStoreKitTest
import StoreKitSigning
import StoreKitTestSupport
import Testing

extension OpenStoreKitTestSuites {
@Suite("Revoked signing certificates, in the app's process")
struct RevokedCertificateClientTests {
    @Test("a JWS and a receipt signed with a revoked key are refused as revoked once the daemon revokes it; the daemon's own signatures stay verified")
    func revokedKeyIsRefused() async throws {
        let daemon = try DaemonProcess()
        let config = (daemon.configFile as NSString).deletingLastPathComponent
        try "[App]\nID=\(TestStoreBinding.appIdentifier)\nCatalog=catalog/example.storekit\n"
            .write(toFile: config + "/apps.d/com.example.game.conf", atomically: true, encoding: .utf8)
        try daemon.start()
        TestStoreBinding.bind(socketPath: daemon.clientSocket, dataHome: daemon.dataHome)
        defer {
            TestStoreBinding.unbind()
            daemon.remove()
        }
        let products = try await Product.products(for: ["com.example.game.level_pack", "com.example.game.season_pass"])
        let levelPack = try #require(products.first { $0.id == "com.example.game.level_pack" })
        let seasonPass = try #require(products.first { $0.id == "com.example.game.season_pass" })
        guard case .success(let first) = try await levelPack.purchase() else { throw CancellationError() }
        guard case .verified(let bought) = first else {
            Issue.record("the daemon's purchase did not verify: \(first)")
            return
        }
        await bought.finish()

        // Someone copies the signing key (all the key directory holds, as a backup would).
        let copy = daemon.directory.file("copied-keys")
        let copied = try ProcessRunner.run("/bin/cp", ["-a", daemon.stateDirectory + "/signing", copy])
        #expect(copied.status == 0, "\(copied.stderr)")
        let thief = try SigningIdentity.openOrCreate(directory: copy).identity
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let payload = Array(#"{"transactionId":"999","bundleId":"\#(TestStoreBinding.appIdentifier)","productId":"com.example.game.coins100","purchaseDate":\#(now),"signedDate":\#(now)}"#.utf8)
        let forged = try thief.signJWS(payload: payload)
        #expect(checkSignedData(forged).failure == nil, "before the revocation the copied key's signatures verify")

        let rotated = try daemon.ctl(["rotate-key", "--revoke"])
        #expect(rotated.status == 0, "\(rotated.stderr)")
        #expect(rotated.stdout.contains("Revoked the previous signing certificate"), "\(rotated.stdout)")
        #expect(FileManager.default.fileExists(atPath: daemon.runtimeDirectory + "/revoked-certificates.pem"))

        let check = checkSignedData(forged)
        #expect(check.failure == SignatureFailure.revokedCertificate)
        #expect(VerificationResult(1, failure: check.failure) == .unverified(1, .revokedCertificate))
        let receipt = try thief.signReceipt(AppReceipt(
            receiptType: "Xcode", bundleIdentifier: TestStoreBinding.appIdentifier, appVersion: "1", opaqueValue: [1], sha1Hash: [2],
            creationDate: Date(), originalApplicationVersion: "1", inAppPurchases: []))
        guard case .failure(let receiptError) = try SignedDataTrust.receiptVerifier().verify(receipt) else {
            Issue.record("a receipt signed with the revoked key verified")
            return
        }
        #expect(receiptError.kind == .revokedCertificate)
        // The list gone (or an older one put back) does not undo a revocation this process read.
        try FileManager.default.removeItem(atPath: daemon.runtimeDirectory + "/revoked-certificates.pem")
        #expect(checkSignedData(forged).failure == SignatureFailure.revokedCertificate)

        // The daemon signs with its new key: a new purchase, and the history it signs again, verify.
        guard case .success(.verified(let again)) = try await seasonPass.purchase() else {
            Issue.record("a purchase after the revocation did not verify")
            return
        }
        await again.finish()
        var seen: Set<String> = []
        for await result in Transaction.all {
            guard case .verified(let transaction) = result else {
                Issue.record("history after the revocation: \(result)")
                continue
            }
            seen.insert(transaction.productID)
        }
        #expect(seen == [levelPack.id, seasonPass.id])

        // A whole new chain: the new root is picked up without a restart, for JWS and receipts.
        #expect(try daemon.ctl(["rotate-key", "--chain"]).status == 0)
        var after = 0
        for await result in Transaction.all {
            guard case .verified = result else {
                Issue.record("history after the new chain: \(result)")
                continue
            }
            after += 1
        }
        #expect(after == 2)
        let answer = try daemon.ctlJSON(["receipt", TestStoreBinding.appIdentifier]) as? [String: Any]
        let text = try #require(answer?["receipt"] as? String)
        let newReceipt = try #require(Data(base64Encoded: text))
        guard case .success = try SignedDataTrust.receiptVerifier().verify([UInt8](newReceipt)) else {
            Issue.record("the new chain's receipt did not verify")
            return
        }
    }
}
}
