import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing

/// Offers and introductory-offer eligibility signed as JWS (protocol version 4's `offer_jws` and
/// `eligibility_jws`), through the real daemon: JWS made by PyJWT (Debian's python3-jwt), by
/// Apple's App Store Server Library and by `storekitctl` are accepted; each refusal is StoreKit's
/// error for it; the eligibility decides whether the introductory offer applies.
@Suite struct SignedRequestTests {
    static let monthly = PromotionalOfferTests.monthly
    static let offer = PromotionalOfferTests.offer
    static let keyID = PromotionalOfferTests.keyID

    /// A compact JWS of `claims` (JSON), ES256 with the key in `keyFile`, `kid` `keyID`, made by PyJWT.
    static func pyjwt(_ claims: [String: Any], keyFile: String, keyID: String = keyID) throws -> String {
        let json = String(decoding: try JSONSerialization.data(withJSONObject: claims), as: UTF8.self)
        let script = "import jwt, json, sys; print(jwt.encode(json.loads(sys.argv[1]), open(sys.argv[2]).read(), algorithm='ES256', headers={'kid': sys.argv[3]}))"
        let result = try ProcessRunner.run("/usr/bin/python3", ["-c", script, json, keyFile, keyID])
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Apple's claims of a promotional offer (version 2), as `PromotionalOfferV2SignatureCreator` makes them.
    static func offerClaims(product: String = monthly, offer: String = offer, app: String = Sample.app,
                            audience: String = "promotional-offer", issuedAgo: TimeInterval = 0,
                            transaction: String? = nil) -> [String: Any] {
        var claims: [String: Any] = ["productId": product, "offerIdentifier": offer, "bid": app, "iss": "issuer",
                                     "aud": audience, "iat": Int(Date().timeIntervalSince1970 - issuedAgo),
                                     "nonce": UUID().uuidString.lowercased()]
        if let transaction { claims["transactionId"] = transaction }
        return claims
    }

    static func eligibilityClaims(product: String = monthly, allowed: Bool, transaction: String?) -> [String: Any] {
        var claims: [String: Any] = ["productId": product, "allowIntroductoryOffer": allowed, "bid": Sample.app, "iss": "issuer",
                                     "aud": "introductory-offer-eligibility", "iat": Int(Date().timeIntervalSince1970),
                                     "nonce": UUID().uuidString.lowercased()]
        if let transaction { claims["transactionId"] = transaction }
        return claims
    }

    static func pay(_ client: Client, product: String = monthly, offerJWS: String? = nil, eligibilityJWS: String? = nil) throws -> Reply {
        try client.request { id in
            .addPayment(.init(requestID: id, key: UUID().uuidString, productID: product, quantity: 1,
                              offerJWS: offerJWS, eligibilityJWS: eligibilityJWS))
        }
    }

    /// A started daemon with an offer key, its private key's path, a subscribed client, and the
    /// id of a consumable that client bought (a transaction of the buyer's to name).
    static func buyerWithCoins() throws -> (DaemonProcess, String, Client, String) {
        let (daemon, key) = try PromotionalOfferTests.daemonWithOfferKey()
        try daemon.start()
        let client = try Client(daemon)
        _ = try client.subscribe()
        return (daemon, key, client, String(try client.buy(Sample.coins).id))
    }

    /// The signed payload of `record`, read without a check (the signature suites check them).
    static func payload(_ record: TransactionRecord) throws -> [String: Any] {
        try PriceIncreaseTests.payload(try #require(record.jwsRepresentation))
    }

    @Test("a lapsed subscriber's offer signed as a JWS (PyJWT) is bought, and its transaction says so; each refusal is StoreKit's error")
    func offerJWS() throws {
        let (daemon, key) = try PromotionalOfferTests.daemonWithOfferKey()
        defer { daemon.remove() }
        try daemon.start()
        let client = try Client(daemon)
        _ = try client.subscribe()
        try PromotionalOfferTests.lapse(client, daemon)
        let mine = String(try #require(try daemon.transactions(["--uid", String(client.uid)]).first).id)

        let other = daemon.directory.file("other-key.p8")
        #expect(try ProcessRunner.run("/bin/sh", ["-c", "umask 077; openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out \"$0\"", other]).status == 0)
        let refusals: [(String, String, Int32)] = [
            ("not a JWS", "abc.def", StoreKitErrorCode.missingOfferParams.rawValue),
            ("unknown kid", try Self.pyjwt(Self.offerClaims(), keyFile: key, keyID: "NOSUCHKEY"), StoreKitErrorCode.invalidSignature.rawValue),
            ("another key", try Self.pyjwt(Self.offerClaims(), keyFile: other), StoreKitErrorCode.invalidSignature.rawValue),
            ("another audience", try Self.pyjwt(Self.offerClaims(audience: "introductory-offer-eligibility"), keyFile: key),
             StoreKitErrorCode.invalidSignature.rawValue),
            ("another app", try Self.pyjwt(Self.offerClaims(app: "com.example.other"), keyFile: key), StoreKitErrorCode.invalidSignature.rawValue),
            ("another product", try Self.pyjwt(Self.offerClaims(product: "com.example.game.premium.yearly"), keyFile: key),
             StoreKitErrorCode.invalidSignature.rawValue),
            ("25 hours old", try Self.pyjwt(Self.offerClaims(issuedAgo: 25 * 3600), keyFile: key), StoreKitErrorCode.invalidSignature.rawValue),
            ("an hour ahead", try Self.pyjwt(Self.offerClaims(issuedAgo: -3600), keyFile: key), StoreKitErrorCode.invalidSignature.rawValue),
            ("another buyer's transaction", try Self.pyjwt(Self.offerClaims(transaction: "12345"), keyFile: key),
             StoreKitErrorCode.invalidSignature.rawValue),
            ("an unknown offer", try Self.pyjwt(Self.offerClaims(offer: "no.such.offer"), keyFile: key),
             StoreKitErrorCode.invalidOfferIdentifier.rawValue),
        ]
        for (what, jws, detail) in refusals {
            let reply = try Self.pay(client, offerJWS: jws)
            #expect(reply.code == .storeKit && reply.detail == detail, "\(what): \(reply.code.name) \(reply.detail) \(reply.message)")
        }

        // One offer a payment: a discount beside a signed offer is refused, and an iat no date can be.
        let discount = try PromotionalOfferTests.discount(key: key)
        let signed = try Self.pyjwt(Self.offerClaims(), keyFile: key)
        let both = try client.request { id in
            .addPayment(.init(requestID: id, key: UUID().uuidString, productID: Self.monthly, quantity: 1,
                              discount: discount, offerJWS: signed))
        }
        #expect(both.code == .storeKit && both.detail == StoreKitErrorCode.missingOfferParams.rawValue, "\(both.message)")
        for value: Any in [1e300, Int64.min, -1, Int64.max] {
            var odd = Self.offerClaims()
            odd["iat"] = value
            let reply = try Self.pay(client, offerJWS: try Self.pyjwt(odd, keyFile: key))
            #expect(reply.code == .storeKit && reply.detail == StoreKitErrorCode.missingOfferParams.rawValue, "iat \(value): \(reply.message)")
        }

        let reply = try Self.pay(client, offerJWS: try Self.pyjwt(Self.offerClaims(transaction: mine), keyFile: key))
        #expect(reply.code == .ok, "\(reply.code.name) \(reply.message)")
        let bought = try Self.payload(try #require(reply.updated.last))
        #expect(bought["offerType"] as? Int == 2 && bought["offerIdentifier"] as? String == Self.offer, "\(bought)")
        #expect(bought["offerDiscountType"] as? String == "PAY_AS_YOU_GO" && bought["price"] as? Int == 2990)
    }

    @Test("the server's eligibility decides the introductory offer: refused to a new buyer, granted to a lapsed one")
    func eligibilityJWS() throws {
        let (daemon, key) = try PromotionalOfferTests.daemonWithOfferKey()
        defer { daemon.remove() }
        try daemon.start()
        let client = try Client(daemon)
        _ = try client.subscribe()
        let coins = try client.buy(Sample.coins)

        // A buyer who never subscribed would get the week's free trial; the server says no.
        let missing = try Self.pay(client, eligibilityJWS: try Self.pyjwt(Self.eligibilityClaims(allowed: false, transaction: nil), keyFile: key))
        #expect(missing.code == .storeKit && missing.detail == StoreKitErrorCode.missingOfferParams.rawValue, "\(missing.message)")
        let refused = try Self.pay(client, eligibilityJWS: try Self.pyjwt(Self.eligibilityClaims(allowed: false, transaction: String(coins.id)),
                                                                          keyFile: key))
        #expect(refused.code == .ok, "\(refused.code.name) \(refused.message)")
        let full = try Self.payload(try #require(refused.updated.last))
        #expect(full["offerType"] == nil && full["price"] as? Int == 4990, "no trial: \(full)")

        // Lapsed, the store's rule refuses the trial; the server grants it.
        let subscription = try #require(refused.updated.last)
        #expect(try daemon.ctl(["expire", String(subscription.id)]).status == 0)
        let granted = try Self.pay(client, eligibilityJWS: try Self.pyjwt(Self.eligibilityClaims(allowed: true, transaction: String(coins.id)),
                                                                          keyFile: key))
        #expect(granted.code == .ok, "\(granted.code.name) \(granted.message)")
        let trial = try Self.payload(try #require(granted.updated.last))
        #expect(trial["offerType"] as? Int == 1 && trial["offerDiscountType"] as? String == "FREE_TRIAL" && trial["price"] as? Int == 0,
                "\(trial)")
    }

    @Test("storekitctl signs what the daemon accepts")
    func storekitctlSigns() throws {
        let (daemon, key, client, coins) = try Self.buyerWithCoins()
        defer { daemon.remove() }
        let eligibility = try daemon.ctl(["sign-eligibility", "--key", key, "--key-id", Self.keyID, "--transaction", coins,
                                          Sample.app, Self.monthly, "no"])
        #expect(eligibility.status == 0, "\(eligibility.stderr)")
        let first = try Self.pay(client, eligibilityJWS: eligibility.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(first.code == .ok, "\(first.code.name) \(first.message)")
        let subscription = try #require(first.updated.last)
        #expect(try daemon.ctl(["expire", String(subscription.id)]).status == 0)
        let offer = try daemon.ctl(["sign-offer", "--jws", "--key", key, "--key-id", Self.keyID, "--transaction", coins,
                                    Sample.app, Self.monthly, Self.offer])
        #expect(offer.status == 0, "\(offer.stderr)")
        let second = try Self.pay(client, offerJWS: offer.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(second.code == .ok, "\(second.code.name) \(second.message)")
        #expect(try daemon.ctl(["sign-offer", "--jws", "--username", "x", "--key", key, "--key-id", Self.keyID,
                                Sample.app, Self.monthly, Self.offer]).status != 0, "--jws takes no --username")
    }

    @Test("Apple's App Store Server Library signs what the daemon accepts",
          .enabled(if: IndependentVerifier.appleLibraryPython != nil, "Apple's app-store-server-library is not installed (make test-deps)"))
    func appleLibrarySigns() throws {
        let python = try #require(IndependentVerifier.appleLibraryPython)
        let (daemon, key, client, coins) = try Self.buyerWithCoins()
        defer { daemon.remove() }
        try PromotionalOfferTests.lapse(client, daemon)
        let script = """
            import sys
            from appstoreserverlibrary.jws_signature_creator import PromotionalOfferV2SignatureCreator, IntroductoryOfferEligibilitySignatureCreator
            key = open(sys.argv[1], 'rb').read()
            if sys.argv[2] == 'offer':
                print(PromotionalOfferV2SignatureCreator(key, sys.argv[3], 'issuer', sys.argv[4]).create_signature(sys.argv[5], sys.argv[6], sys.argv[7]))
            else:
                print(IntroductoryOfferEligibilitySignatureCreator(key, sys.argv[3], 'issuer', sys.argv[4]).create_signature(sys.argv[5], sys.argv[6] == 'yes', sys.argv[7]))
            """
        let appleOffer = try ProcessRunner.run(python, ["-c", script, key, "offer", Self.keyID, Sample.app, Self.monthly, Self.offer, coins])
        #expect(appleOffer.status == 0, "\(appleOffer.stderr)")
        let appleEligibility = try ProcessRunner.run(python, ["-c", script, key, "eligibility", Self.keyID, Sample.app, Self.monthly, "yes", coins])
        #expect(appleEligibility.status == 0, "\(appleEligibility.stderr)")
        let third = try Self.pay(client, offerJWS: appleOffer.stdout.trimmingCharacters(in: .whitespacesAndNewlines),
                                 eligibilityJWS: appleEligibility.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(third.code == .ok, "\(third.code.name) \(third.message)")
        #expect(try Self.payload(try #require(third.updated.last))["offerIdentifier"] as? String == Self.offer)
    }
}
