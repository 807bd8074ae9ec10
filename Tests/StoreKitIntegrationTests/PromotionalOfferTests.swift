import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Promotional offers with the developer's signature, through the real daemon: signatures made
/// by openssl(1), by `storekitctl sign-offer` and by Apple's App Store Server Library are
/// accepted; each refusal is StoreKit's error for it; only current and lapsed subscribers get one.
@Suite struct PromotionalOfferTests {
    static let monthly = "com.example.game.premium.monthly"
    static let offer = "com.example.game.premium.monthly.comeback"
    static let keyID = "KEY1234567"

    /// A daemon whose app registers the public half of a new P-256 key; returns it with the
    /// private key's path (0600).
    static func daemonWithOfferKey() throws -> (DaemonProcess, privateKey: String) {
        let daemon = try DaemonProcess()
        let config = (daemon.configFile as NSString).deletingLastPathComponent
        let privateKey = daemon.directory.file("offer-key.p8")
        #expect(try ProcessRunner.run("/bin/sh", ["-c", "umask 077; openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out \"$0\"", privateKey]).status == 0)
        try FileManager.default.createDirectory(atPath: config + "/keys", withIntermediateDirectories: true)
        #expect(try ProcessRunner.run("/usr/bin/openssl", ["ec", "-in", privateKey, "-pubout", "-out", config + "/keys/offers.pub"]).status == 0)
        let registration = config + "/apps.d/com.example.game.conf"
        let text = try String(contentsOfFile: registration, encoding: .utf8)
        try (text + "\n[OfferKey]\nID=\(keyID)\nKey=keys/offers.pub\n").write(toFile: registration, atomically: true, encoding: .utf8)
        return (daemon, privateKey)
    }

    /// Apple's signed text, built here on its own: the fields joined by U+2063.
    static func payload(product: String = monthly, offer: String = offer, keyID: String = keyID, username: String? = nil,
                        nonce: String, timestamp: Int64) -> String {
        [Sample.app, keyID, product, offer, (username ?? "").lowercased(), nonce.lowercased(), String(timestamp)].joined(separator: "\u{2063}")
    }

    /// openssl(1)'s signature of `text` with the private key: base64 of DER.
    static func opensslSignature(_ text: String, key: String) throws -> String {
        let input = FileManager.default.temporaryDirectory.appendingPathComponent("offer-\(UUID().uuidString)")
        try Data(text.utf8).write(to: input)
        defer { try? FileManager.default.removeItem(at: input) }
        let result = try ProcessRunner.run("/bin/sh", ["-c", "openssl dgst -sha256 -sign \"$0\" \"$1\" | base64 -w0", key, input.path])
        return result.stdout
    }

    static func discount(key: String, product: String = monthly, offer: String = offer, signedOffer: String? = nil,
                         keyID: String = keyID, age: Int64 = 0) throws -> ClientMessage.Discount {
        let nonce = UUID().uuidString.lowercased()
        let timestamp = Int64(Date().timeIntervalSince1970 * 1000) - age
        let signature = try opensslSignature(payload(product: product, offer: signedOffer ?? offer, keyID: keyID, nonce: nonce,
                                                     timestamp: timestamp), key: key)
        return ClientMessage.Discount(offerID: offer, keyID: keyID, nonce: nonce, signature: signature, timestamp: timestamp)
    }

    static func pay(_ client: Client, product: String = monthly, _ discount: ClientMessage.Discount?) throws -> Reply {
        try client.request { id in
            .addPayment(.init(requestID: id, key: UUID().uuidString, productID: product, quantity: 1, discount: discount))
        }
    }

    /// A lapsed subscriber: bought the monthly plan, which then expired.
    static func lapse(_ client: Client, _ daemon: DaemonProcess) throws {
        let first = try client.buy(monthly)
        #expect(try daemon.ctl(["expire", String(first.id)]).status == 0)
    }

    @Test("a lapsed subscriber's offer signed with openssl is accepted: a purchase of the product's period (pay as you go)")
    func lapsedSubscriberGetsTheOffer() throws {
        let (daemon, key) = try Self.daemonWithOfferKey()
        defer { daemon.remove() }
        try daemon.start()
        let client = try Client(daemon)
        _ = try client.subscribe()
        try Self.lapse(client, daemon)
        let reply = try Self.pay(client, try Self.discount(key: key))
        #expect(reply.code == .ok, "\(reply.code.name) \(reply.message)")
        let purchased = try #require(reply.updated.last)
        #expect(purchased.state == .purchased && purchased.productID == Self.monthly)
        let month = Int64(28) * 86_400_000
        #expect((purchased.expiresDate ?? 0) - purchased.date >= month, "a month, the offer's pay-as-you-go period")
    }

    @Test("each refusal is StoreKit's error: missing parameters, key, signature, age, offer, eligibility")
    func refusals() throws {
        let (daemon, key) = try Self.daemonWithOfferKey()
        defer { daemon.remove() }
        try daemon.start()
        daemon.openDirectoriesToOtherUsers()
        let client = try Client(daemon)
        _ = try client.subscribe()
        try Self.lapse(client, daemon)
        func refused(_ discount: ClientMessage.Discount, product: String = Self.monthly, on other: Client? = nil) throws -> StoreKitErrorCode? {
            let reply = try Self.pay(other ?? client, product: product, discount)
            #expect(reply.code == .storeKit, "\(reply.code.name) \(reply.message)")
            return StoreKitErrorCode(rawValue: reply.detail)
        }
        var missingNonce = try Self.discount(key: key)
        missingNonce.nonce = ""
        #expect(try refused(missingNonce) == .missingOfferParams)
        var notUUID = try Self.discount(key: key)
        notUUID.nonce = "not-a-uuid"
        #expect(try refused(notUUID) == .missingOfferParams)
        #expect(try refused(try Self.discount(key: key, keyID: "UNKNOWNKEY")) == .invalidSignature)
        var forged = try Self.discount(key: key)
        forged.timestamp += 1   // the signature was over another timestamp
        #expect(try refused(forged) == .invalidSignature)
        #expect(try refused(try Self.discount(key: key, product: "com.example.game.premium.yearly"), product: Self.monthly)
                == .invalidSignature, "signed for another product")
        #expect(try refused(try Self.discount(key: key, age: 25 * 3_600_000)) == .invalidSignature, "older than 24 hours")
        #expect(try refused(try Self.discount(key: key, age: -3_600_000)) == .invalidSignature, "from the future")
        #expect(try refused(try Self.discount(key: key, offer: "no.such.offer")) == .invalidOfferIdentifier)
        // A buyer who never subscribed in the group is not eligible (the App Store's rule).
        let newcomer = try Client(daemon, asUID: 4243)
        _ = try newcomer.subscribe()
        #expect(try refused(try Self.discount(key: key), on: newcomer) == .ineligibleForOffer)
        // Nothing refused became a transaction.
        #expect(try daemon.transactions().filter { $0.productIdentifier == Self.monthly }.count == 1)
    }

    @Test("storekitctl sign-offer signs what openssl verifies and the daemon accepts, with an applicationUsername")
    func storekitctlSigns() throws {
        let (daemon, key) = try Self.daemonWithOfferKey()
        defer { daemon.remove() }
        try daemon.start()
        let username = UUID().uuidString
        let signed = try #require(try daemon.ctlJSON(["sign-offer", "--key", key, "--key-id", Self.keyID, "--username", username,
                                                     Sample.app, Self.monthly, Self.offer]) as? [String: Any])
        let nonce = try #require(signed["nonce"] as? String)
        let timestamp = try #require(signed["timestamp"] as? Int)
        let signature = try #require(signed["signature"] as? String)
        // openssl verifies it over the text built here.
        let config = (daemon.configFile as NSString).deletingLastPathComponent
        let text = daemon.directory.file("payload")
        let der = daemon.directory.file("signature.der")
        try Data(Self.payload(username: username, nonce: nonce, timestamp: Int64(timestamp)).utf8).write(to: URL(fileURLWithPath: text))
        try #require(Data(base64Encoded: signature)).write(to: URL(fileURLWithPath: der))
        let verify = try ProcessRunner.run("/usr/bin/openssl", ["dgst", "-sha256", "-verify", config + "/keys/offers.pub", "-signature", der, text])
        #expect(verify.status == 0 && verify.stdout.contains("Verified OK"), "\(verify.stdout)\(verify.stderr)")

        let client = try Client(daemon)
        _ = try client.subscribe()
        try Self.lapse(client, daemon)
        let discount = ClientMessage.Discount(offerID: Self.offer, keyID: Self.keyID, nonce: nonce, signature: signature,
                                              timestamp: Int64(timestamp))
        let reply = try client.request { id in
            .addPayment(.init(requestID: id, key: UUID().uuidString, productID: Self.monthly, quantity: 1,
                              applicationUsername: username, discount: discount))
        }
        #expect(reply.code == .ok, "\(reply.code.name) \(reply.message)")
        // The same signature without the username it was made for does not verify.
        #expect(try Self.pay(client, discount).detail == StoreKitErrorCode.invalidSignature.rawValue)
    }

    @Test("a signature made by Apple's App Store Server Library (PromotionalOfferSignatureCreator) is accepted",
          .enabled(if: FileManager.default.isExecutableFile(atPath: Paths.repository + "/.build/verifiers/bin/python"),
                   "Apple's app-store-server-library is not installed in .build/verifiers (make test-deps installs it from PyPI)"))
    func applesLibrarySigns() throws {
        let (daemon, key) = try Self.daemonWithOfferKey()
        defer { daemon.remove() }
        try daemon.start()
        let nonce = UUID().uuidString.lowercased()
        let timestamp = Int64(Date().timeIntervalSince1970 * 1000)
        let script = """
            import sys, uuid
            from appstoreserverlibrary.promotional_offer import PromotionalOfferSignatureCreator
            key = open(sys.argv[1], 'rb').read()
            creator = PromotionalOfferSignatureCreator(key, sys.argv[2], sys.argv[3])
            print(creator.create_signature(sys.argv[4], sys.argv[5], '', uuid.UUID(sys.argv[6]), int(sys.argv[7])))
            """
        let signed = try ProcessRunner.run(Paths.repository + "/.build/verifiers/bin/python",
                                           ["-c", script, key, Self.keyID, Sample.app, Self.monthly, Self.offer, nonce, String(timestamp)])
        #expect(signed.status == 0, "\(signed.stderr)")
        let client = try Client(daemon)
        _ = try client.subscribe()
        try Self.lapse(client, daemon)
        let discount = ClientMessage.Discount(offerID: Self.offer, keyID: Self.keyID, nonce: nonce,
                                              signature: signed.stdout.trimmingCharacters(in: .whitespacesAndNewlines), timestamp: timestamp)
        let reply = try Self.pay(client, discount)
        #expect(reply.code == .ok, "\(reply.code.name) \(reply.message)")
    }

    @Test("an [OfferKey] holding a private key other users may read is refused at start, with FILE:LINE")
    func readablePrivateKeyIsRefused() throws {
        let (result, directory) = try DaemonConfigExitTests.runDaemon { directory in
            let key = directory.file("config/offer.p8")
            _ = try ProcessRunner.run("/bin/sh", ["-c", "openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out \"$0\"", key])
            chmod(key, 0o644)
            try "[App]\nID=com.example.game\nCatalog=catalog/example.storekit\n\n[OfferKey]\nID=K1\nKey=offer.p8\n"
                .write(toFile: directory.file("config/apps.d/com.example.game.conf"), atomically: true, encoding: .utf8)
        }
        defer { directory.remove() }
        #expect(result.status == 1)
        #expect(result.stderr.contains("com.example.game.conf:7") && result.stderr.contains("holds the private key, and other users may read it"),
                "\(result.stderr)")
    }
}
