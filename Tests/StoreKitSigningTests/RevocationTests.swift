import Foundation
import StoreKitPosix
@testable import StoreKitSigning
import StoreKitTestSupport
import Testing

@Suite("Revoked signing certificates")
struct RevocationTests {
    static func payload() -> [UInt8] { SignedDataTests.payload() }

    static func receipt() -> AppReceipt {
        AppReceipt(receiptType: "Xcode", bundleIdentifier: "com.example.game", appVersion: "1", opaqueValue: [1], sha1Hash: [2],
                   creationDate: Date(), originalApplicationVersion: "1", inAppPurchases: [])
    }

    static func write(_ bytes: [UInt8], _ path: String) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    @Test("a new chain has an empty list signed by its intermediate, which OpenSSL reads and verifies")
    func newChainHasEmptyList() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let keys = directory.file("signing")
        let (identity, _, _) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(identity.revocations.entries.isEmpty)
        #expect(identity.revocations.isIssued(by: identity.intermediate))
        #expect(!identity.revocations.isIssued(by: identity.root))
        #expect(try FileSystem.status(of: keys + "/revoked.pem").st_mode & 0o777 == 0o600)
        try Self.write(identity.intermediate.pem, directory.file("intermediate.pem"))
        try Self.write(identity.revocations.pem, directory.file("crl.pem"))
        let checked = try ProcessRunner.run("/usr/bin/openssl", [
            "crl", "-in", directory.file("crl.pem"), "-CAfile", directory.file("intermediate.pem"), "-noout", "-text"])
        #expect(checked.status == 0, "\(checked.stderr)")
        #expect(checked.stderr.contains("verify OK") || checked.stdout.contains("verify OK"), "\(checked.stdout) \(checked.stderr)")
        #expect(checked.stdout.contains("No Revoked Certificates"))
    }

    @Test("rotating with revocation: the old leaf's JWS and receipts are refused as revoked, whatever their date; the new leaf's verify; OpenSSL agrees")
    func revokedLeafIsRefused() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let keys = directory.file("signing")
        let (old, _, _) = try SigningIdentity.openOrCreate(directory: keys)
        let before = try old.signJWS(payload: Self.payload())
        let receiptBefore = try old.signReceipt(Self.receipt())
        let new = try old.rotatingLeaf(in: keys, revokingCurrent: true)
        let entry = try #require(new.revocations.entry(revoking: old.leaf))
        #expect(new.revocations.entry(revoking: new.leaf) == nil)
        #expect(abs(entry.date.timeIntervalSinceNow) < 60)
        #expect(new.revocations.isIssued(by: new.intermediate))

        let verifier = SignedDataVerifier(roots: [new.root], revocationLists: [new.revocations])
        let refused = verifier.verify(before)
        #expect(refused.failureKind == .revokedCertificate)
        #expect(refused.failureReason?.contains(entry.serial) == true)
        #expect(verifier.verify(before, at: Date(timeIntervalSinceNow: -600)).failureKind == .revokedCertificate,
                "a date before the revocation does not help: the key may have signed any date")
        #expect(SignedDataVerifier(roots: [new.root]).verify(before).failureKind == nil, "without the list it verifies")
        let fresh = verifier.verify(try new.signJWS(payload: Self.payload()))
        #expect(fresh.failureKind == nil, "\(fresh.failureReason ?? "")")

        let receipts = ReceiptVerifier(roots: [new.root], revocationLists: [new.revocations])
        guard case .failure(let receiptError) = receipts.verify(receiptBefore) else {
            Issue.record("a receipt of the revoked leaf verified")
            return
        }
        #expect(receiptError.kind == .revokedCertificate)
        let receiptAfter = try new.signReceipt(Self.receipt())
        #expect((try? receipts.verify(receiptAfter).get()) != nil)

        // Independent: openssl verify with CRL checking refuses the old leaf and accepts the new one.
        try Self.write(new.root.pem, directory.file("root.pem"))
        try Self.write(new.intermediate.pem, directory.file("intermediate.pem"))
        try Self.write(new.revocations.pem, directory.file("crl.pem"))
        try Self.write(old.leaf.pem, directory.file("old.pem"))
        try Self.write(new.leaf.pem, directory.file("new.pem"))
        func opensslVerify(_ leaf: String) throws -> ProcessResult {
            try ProcessRunner.run("/usr/bin/openssl", [
                "verify", "-x509_strict", "-crl_check", "-CRLfile", directory.file("crl.pem"), "-CAfile", directory.file("root.pem"),
                "-untrusted", directory.file("intermediate.pem"), directory.file(leaf)])
        }
        let oldChecked = try opensslVerify("old.pem")
        #expect(oldChecked.status != 0 && (oldChecked.stdout + oldChecked.stderr).contains("certificate revoked"),
                "\(oldChecked.stdout) \(oldChecked.stderr)")
        let newChecked = try opensslVerify("new.pem")
        #expect(newChecked.status == 0, "\(newChecked.stdout) \(newChecked.stderr)")

        // A second revocation keeps the first.
        let third = try new.rotatingLeaf(in: keys, revokingCurrent: true)
        #expect(third.revocations.entries.count == 2)
        #expect(third.revocations.entry(revoking: old.leaf) == entry)
        #expect(third.revocations.entry(revoking: new.leaf) != nil)
        let (reopened, origin, _) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(origin == .loaded)
        #expect(reopened.revocations.entries == third.revocations.entries, "kept across a restart")
    }

    @Test("a list only counts for the chain whose intermediate signed it")
    func foreignListIsIgnored() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let (identity, _, _) = try SigningIdentity.openOrCreate(directory: directory.file("a"))
        let (stranger, _, _) = try SigningIdentity.openOrCreate(directory: directory.file("b"))
        // The stranger's intermediate "revokes" our leaf by serial: it did not issue it, so nothing changes.
        let forged = try RevocationList.issue(revoking: identity.leaf, issuer: stranger.intermediate, key: stranger.intermediateKey)
        #expect(forged.entries.count == 1)
        let verifier = SignedDataVerifier(roots: [identity.root], revocationLists: [forged])
        let checked = verifier.verify(try identity.signJWS(payload: Self.payload()))
        #expect(checked.failureKind == nil, "\(checked.failureReason ?? "")")
        // A list changed after signing is not the intermediate's any more.
        var bytes = try RevocationList.issue(revoking: identity.leaf, issuer: identity.intermediate, key: identity.intermediateKey).der
        let genuine = try RevocationList(der: bytes)
        #expect(genuine.isIssued(by: identity.intermediate))
        bytes[bytes.count - 10] ^= 0x01
        #expect(!(try RevocationList(der: bytes)).isIssued(by: identity.intermediate))
    }

    @Test("a revocation cut short before the new leaf: the next open replaces the revoked leaf")
    func cutShortRevocationIsFinishedAtOpen() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let keys = directory.file("signing")
        let (identity, _, _) = try SigningIdentity.openOrCreate(directory: keys)
        let list = try RevocationList.issue(revoking: identity.leaf, keeping: identity.revocations,
                                            issuer: identity.intermediate, key: identity.intermediateKey)
        try SigningIdentity.writeRevocations(list, to: keys)   // and then the crash
        let (reopened, origin, _) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(origin == .revokedLeafReplaced)
        #expect(reopened.leaf.der != identity.leaf.der)
        #expect(reopened.revocations.entry(revoking: identity.leaf) != nil)
        #expect(reopened.revocations.entry(revoking: reopened.leaf) == nil)
    }

    @Test("a damaged or foreign list in the key directory is refused with its remedy; a missing one is made")
    func damagedListIsRefused() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let keys = directory.file("signing")
        let (identity, _, _) = try SigningIdentity.openOrCreate(directory: keys)
        try FileSystem.remove(keys + "/revoked.pem")
        let (made, _, _) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(made.revocations.entries.isEmpty && made.revocations.isIssued(by: identity.intermediate))
        #expect(FileSystem.exists(keys + "/revoked.pem"))

        try FileSystem.writeAtomically(Array("not a list".utf8), to: keys + "/revoked.pem", permissions: 0o600)
        #expect(throws: SigningError.self) { _ = try SigningIdentity.openOrCreate(directory: keys) }
        do {
            _ = try SigningIdentity.openOrCreate(directory: keys)
        } catch {
            #expect(error.description.contains("rotate-key --chain"), "\(error)")
        }
        let (stranger, _, _) = try SigningIdentity.openOrCreate(directory: directory.file("other"))
        try FileSystem.writeAtomically(stranger.revocations.pem, to: keys + "/revoked.pem", permissions: 0o600)
        do {
            _ = try SigningIdentity.openOrCreate(directory: keys)
            Issue.record("a list of another intermediate was accepted")
        } catch {
            #expect(error.description.contains("not signed by the intermediate"), "\(error)")
        }
    }

    @Test("the list beside a root: none is nil, a damaged one is an error, a good one is read")
    func listBesideRoot() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let (identity, _, _) = try SigningIdentity.openOrCreate(directory: directory.file("signing"))
        let root = directory.file("root-certificate.pem")
        try identity.publishRoot(to: root)
        #expect(try RootCertificateLocation.revocations(besideRoot: root) == nil)
        let path = RootCertificateLocation.revocationsPath(besideRoot: root)
        #expect(path == directory.file("revoked-certificates.pem"))
        try identity.publishRevocations(to: path)
        #expect(try FileSystem.status(of: path).st_mode & 0o777 == 0o644)
        #expect(try RootCertificateLocation.revocations(besideRoot: root)?.isIssued(by: identity.intermediate) == true)
        try FileSystem.writeAtomically(Array("-----BEGIN X509 CRL-----\nAAAA\n".utf8), to: path, permissions: 0o644)
        #expect(throws: SigningError.self) { _ = try RootCertificateLocation.revocations(besideRoot: root) }
    }
}
