import Foundation
import StoreKitPosix
import StoreKitSigning
import StoreKitTestSupport
import Testing

@Suite("App receipts")
struct AppReceiptTests {
    static let opaque: [UInt8] = Array(0..<16)

    static func sample(device: [UInt8] = Array(repeating: 7, count: 16)) -> AppReceipt {
        let date = Date(timeIntervalSince1970: 1_767_225_600)
        return AppReceipt(
            receiptType: "Xcode", bundleIdentifier: "com.example.game", appVersion: "1.0", opaqueValue: opaque,
            sha1Hash: AppReceipt.hash(deviceIdentifier: device, opaqueValue: opaque, bundleIdentifier: "com.example.game"),
            creationDate: date, originalApplicationVersion: "1.0", originalPurchaseDate: date,
            inAppPurchases: [
                .init(quantity: 2, productIdentifier: "com.example.game.coins100", transactionIdentifier: "2000000000000001",
                      originalTransactionIdentifier: "2000000000000001", purchaseDate: date, originalPurchaseDate: date),
                .init(quantity: 1, productIdentifier: "com.example.game.pro.monthly", transactionIdentifier: "2000000000000003",
                      originalTransactionIdentifier: "2000000000000002", purchaseDate: date.addingTimeInterval(86_400),
                      originalPurchaseDate: date, subscriptionExpirationDate: date.addingTimeInterval(2 * 86_400),
                      cancellationDate: date.addingTimeInterval(3_600), webOrderLineItemID: 2000000000000002,
                      isInIntroOfferPeriod: true),
            ])
    }

    @Test("a signed receipt verifies and reads back field for field; one changed byte does not verify")
    func roundTripAndTamper() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let (identity, _, _) = try SigningIdentity.openOrCreate(directory: directory.file("signing"))
        let receipt = Self.sample()
        let signed = try identity.signReceipt(receipt)
        let verifier = ReceiptVerifier(roots: [identity.root])
        #expect(try verifier.verify(signed).get() == receipt)
        // What the signature covers: the payload, the signer's certificate (and the intermediate
        // it chains through), and the signature itself. (PKCS#7 leaves its version fields and
        // algorithm identifiers outside the signature, and the receipt's copy of the root is not
        // what a verifier anchors on: changing those does not forge anything.)
        func range(of part: [UInt8]) throws -> Range<Int> {
            let start: Int? = (0...(signed.count - part.count)).first { Array(signed[$0..<($0 + part.count)]) == part }
            let found = try #require(start)
            return found..<(found + part.count)
        }
        let covered = [try range(of: receipt.encoded()), try range(of: identity.leaf.der),
                       try range(of: identity.intermediate.der), (signed.count - 64)..<signed.count]
        var refused = 0
        for part in covered {
            for index in part {
                var tampered = signed
                tampered[index] ^= 0x01
                if case .success = verifier.verify(tampered) { Issue.record("a change at byte \(index) verified") } else { refused += 1 }
            }
        }
        #expect(refused > 1000)
        let other = TemporaryDirectory()
        defer { other.remove() }
        let (stranger, _, _) = try SigningIdentity.openOrCreate(directory: other.file("signing"))
        #expect(throws: SignedDataVerificationError.self) { try ReceiptVerifier(roots: [stranger.root]).verify(signed).get() }
        #expect(throws: SignedDataVerificationError.self) { try verifier.verify(Array("not a receipt".utf8)).get() }
    }

    @Test("the hash ties the receipt to the device identifier, the opaque value and the bundle id")
    func hashBindsDevice() throws {
        let receipt = Self.sample(device: Array(repeating: 7, count: 16))
        #expect(receipt.sha1Hash == AppReceipt.hash(deviceIdentifier: Array(repeating: 7, count: 16), opaqueValue: Self.opaque,
                                                    bundleIdentifier: "com.example.game"))
        #expect(receipt.sha1Hash != AppReceipt.hash(deviceIdentifier: Array(repeating: 8, count: 16), opaqueValue: Self.opaque,
                                                    bundleIdentifier: "com.example.game"))
        let machineID = TemporaryDirectory()
        defer { machineID.remove() }
        try machineID.write("machine-id", "0123456789abcdef0123456789abcdef\n")
        let game = try DeviceIdentifier.forApp("com.example.game", machineIDPath: machineID.file("machine-id"))
        let other = try DeviceIdentifier.forApp("com.example.other", machineIDPath: machineID.file("machine-id"))
        #expect(game.count == 16)
        #expect(game != other)
        #expect(try DeviceIdentifier.forApp("com.example.game", machineIDPath: machineID.file("machine-id")) == game)
    }

    @Test("openssl cms verifies it against the root alone, and its asn1parse shows Apple's attribute layout")
    func opensslAgrees() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let (identity, _, _) = try SigningIdentity.openOrCreate(directory: directory.file("signing"))
        try identity.publishRoot(to: directory.file("root.pem"))
        let signed = try identity.signReceipt(Self.sample())
        try Data(signed).write(to: URL(fileURLWithPath: directory.file("receipt")))
        let verify = try ProcessRunner.run("/usr/bin/openssl", [
            "cms", "-verify", "-inform", "DER", "-in", directory.file("receipt"), "-CAfile", directory.file("root.pem"),
            "-x509_strict", "-out", directory.file("payload")])
        #expect(verify.status == 0, "\(verify.stderr)")
        let payload = try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory.file("payload"))))
        #expect(payload == Self.sample().encoded())
        let parsed = try ProcessRunner.run("/usr/bin/openssl", ["asn1parse", "-inform", "DER", "-in", directory.file("payload")])
        #expect(parsed.status == 0)
        // SET OF SEQUENCE { INTEGER type, INTEGER version, OCTET STRING value }
        let lines = parsed.lines
        #expect(lines.first?.contains("cons: SET") == true)
        #expect(lines.dropFirst().first?.contains("cons: SEQUENCE") == true)
        #expect(lines.contains { $0.contains("prim: INTEGER") && $0.hasSuffix(":11") }) // 17, in hex: in-app purchase
        #expect(lines.contains { $0.contains("prim: OCTET STRING") })

        var tampered = signed
        tampered[signed.count / 2] ^= 0x40
        try Data(tampered).write(to: URL(fileURLWithPath: directory.file("tampered")))
        let refused = try ProcessRunner.run("/usr/bin/openssl", [
            "cms", "-verify", "-inform", "DER", "-in", directory.file("tampered"), "-CAfile", directory.file("root.pem"),
            "-out", "/dev/null"])
        #expect(refused.status != 0)
    }
}
