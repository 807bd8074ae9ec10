import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing

/// Advanced Commerce API purchases (protocol version 5's `advanced_commerce_jws`), through the
/// real daemon: a request signed by PyJWT in Apple's form (`request`: base64 of the request's
/// JSON), by `storekitctl sign-commerce` and by Apple's App Store Server Library buys the items it
/// names under a generic SKU of the catalogue; the signed transaction (checked by PyJWT and
/// python3-cryptography against the root) carries Apple's `advancedCommerceInfo`; a
/// subscription renews with it; the request is kept across restarts, in SQLite and PostgreSQL;
/// each refusal is StoreKit's error and records nothing.
@Suite struct AdvancedCommerceTests {
    static let keyID = PromotionalOfferTests.keyID

    /// A one-time charge of one item (Apple's `OneTimeChargeCreateRequest`).
    static func oneTimeCharge(sku: String = "BOOK-1234", price: Any = 4990, currency: String = "USD",
                              reference: String = "7f0c5d8e-0d9a-4d3b-9d49-2c3f1b6a9e01", edit: (inout [String: Any]) -> Void = { _ in }) -> [String: Any] {
        var request: [String: Any] = [
            "operation": "CREATE_ONE_TIME_CHARGE", "version": "1", "requestInfo": ["requestReferenceId": reference],
            "currency": currency, "taxCode": "C003-00-2", "storefront": "USA",
            "item": ["SKU": sku, "displayName": "A book", "description": "The first volume", "price": price],
        ]
        edit(&request)
        return request
    }

    /// A subscription of two items, a week long, the first with an offer for its first period
    /// (Apple's `SubscriptionCreateRequest`).
    static func subscription(reference: String = "1b4e28ba-2fa1-11d2-883f-0016d3cca427") -> [String: Any] {
        [
            "operation": "CREATE_SUBSCRIPTION", "version": "1", "requestInfo": ["requestReferenceId": reference],
            "currency": "USD", "taxCode": "C003-00-2", "period": "P1W",
            "descriptors": ["displayName": "News Plus", "description": "Two newspapers, weekly"],
            "items": [
                ["SKU": "NEWS-A", "displayName": "The Daily", "description": "Every morning", "price": 3000,
                 "offer": ["period": "P1W", "periodCount": 1, "price": 1000, "reason": "ACQUISITION"]],
                ["SKU": "NEWS-B", "displayName": "The Weekly", "description": "Every Sunday", "price": 1500],
            ],
        ]
    }

    /// Apple's claims of an Advanced Commerce in-app request (`AdvancedCommerceAPIInAppSignatureCreator`).
    static func claims(_ request: [String: Any]?, app: String = Sample.app, audience: String = "advanced-commerce-api",
                       issuedAgo: TimeInterval = 0) throws -> [String: Any] {
        var claims: [String: Any] = ["bid": app, "iss": "issuer", "aud": audience, "iat": Int(Date().timeIntervalSince1970 - issuedAgo),
                                     "nonce": UUID().uuidString.lowercased()]
        if let request { claims["request"] = try JSONSerialization.data(withJSONObject: request).base64EncodedString() }
        return claims
    }

    static func pay(_ client: Client, product: String = Sample.coins, quantity: Int32 = 1, jws: String,
                    offerJWS: String? = nil, username: String? = nil) throws -> Reply {
        try client.request { id in
            .addPayment(.init(requestID: id, key: UUID().uuidString, productID: product, quantity: quantity,
                              applicationUsername: username, offerJWS: offerJWS, advancedCommerceJWS: jws))
        }
    }

    /// The payload of a signed transaction, verified by PyJWT and python3-cryptography against
    /// the daemon's root.
    static func verifiedPayload(_ record: TransactionRecord, _ daemon: DaemonProcess) throws -> [String: Any] {
        let result = try IndependentVerifier.verifyJWS(try #require(record.jwsRepresentation), root: daemon.stateDirectory + "/root-certificate.pem")
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    /// Expects `record`'s verified JWS to tell the default one-time charge, at its price.
    static func expectTellsCharge(_ record: TransactionRecord, _ daemon: DaemonProcess) throws {
        let payload = try verifiedPayload(record, daemon)
        #expect((payload["advancedCommerceInfo"] as? [String: Any])?["requestReferenceId"] as? String == "7f0c5d8e-0d9a-4d3b-9d49-2c3f1b6a9e01"
                && payload["price"] as? Int == 4990, "\(payload)")
    }

    /// Starts `daemon` on `server`'s PostgreSQL, as the fleet host `host` when given.
    static func start(_ daemon: DaemonProcess, on server: PostgresServer, host: String? = nil) throws {
        try daemon.directory.write("config/storekitd.conf.d/ledger.conf",
                                   "[Store]\nDatabase=\(server.connectionString())\n" + (host.map { "HostName=\($0)\n" } ?? ""))
        try daemon.start()
    }

    static func started() throws -> (DaemonProcess, String, Client) {
        let (daemon, key) = try PromotionalOfferTests.daemonWithOfferKey()
        try daemon.start()
        let client = try Client(daemon)
        _ = try client.subscribe()
        return (daemon, key, client)
    }

    @Test("a one-time charge signed by PyJWT buys its item: the verified transaction carries Apple's advancedCommerceInfo and the request's price")
    func oneTimeChargeBought() throws {
        let (daemon, key, client) = try Self.started()
        defer { daemon.remove() }
        let token = "9c4ac6a2-5f1e-4a77-8e5c-3a1d1b7c2e10"
        let request = Self.oneTimeCharge { $0["requestInfo"] = ["requestReferenceId": "7f0c5d8e-0d9a-4d3b-9d49-2c3f1b6a9e01", "appAccountToken": token] }
        let reply = try Self.pay(client, jws: try SignedRequestTests.pyjwt(try Self.claims(request), keyFile: key))
        #expect(reply.code == .ok, "\(reply.code.name) \(reply.message)")
        let bought = try #require(reply.updated.last)
        #expect(bought.state == .purchased && bought.productID == Sample.coins)
        let payload = try Self.verifiedPayload(bought, daemon)
        #expect(payload["price"] as? Int == 4990 && payload["currency"] as? String == "USD", "\(payload)")
        #expect(payload["appAccountToken"] as? String == token, "the request's appAccountToken is the transaction's")
        let info = try #require(payload["advancedCommerceInfo"] as? [String: Any], "\(payload)")
        #expect(info["requestReferenceId"] as? String == "7f0c5d8e-0d9a-4d3b-9d49-2c3f1b6a9e01")
        #expect(info["taxCode"] as? String == "C003-00-2" && info["taxExclusivePrice"] as? Int == 4990)
        #expect(info["taxRate"] as? String == "0" && info["estimatedTax"] as? Int == 0)
        #expect(info["period"] == nil && info["descriptors"] == nil, "a one-time charge has no period")
        let items = try #require(info["items"] as? [[String: Any]])
        #expect(items.count == 1)
        #expect(items.first?["SKU"] as? String == "BOOK-1234" && items.first?["displayName"] as? String == "A book"
                && items.first?["description"] as? String == "The first volume" && items.first?["price"] as? Int == 4990, "\(items)")

        // An ordinary purchase of the same product carries none; a refund revokes the items.
        let plain = try client.buy(Sample.coins)
        #expect(try Self.verifiedPayload(plain, daemon)["advancedCommerceInfo"] == nil)
        #expect(try daemon.ctl(["refund", String(bought.id)]).status == 0)
        let revoked = try #require(try client.unfinished().first { $0.id == bought.id })
        let refunded = try Self.verifiedPayload(revoked, daemon)
        let refundedItems = try #require((refunded["advancedCommerceInfo"] as? [String: Any])?["items"] as? [[String: Any]])
        #expect(refundedItems.first?["revocationDate"] as? Int == refunded["revocationDate"] as? Int && refunded["revocationDate"] != nil,
                "\(refunded)")
    }

    @Test("a subscription signed by storekitctl is bought in the request's period at its offer's price, and renews carrying the request at the items' prices")
    func subscriptionRenews() throws {
        let (daemon, key, client) = try Self.started()
        defer { daemon.remove() }
        let file = daemon.directory.file("subscription.json")
        try JSONSerialization.data(withJSONObject: Self.subscription()).write(to: URL(fileURLWithPath: file))
        let signed = try daemon.ctl(["sign-commerce", "--key", key, "--key-id", Self.keyID, Sample.app, file])
        #expect(signed.status == 0, "\(signed.stderr)")
        let reply = try Self.pay(client, product: Sample.monthly, jws: signed.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(reply.code == .ok, "\(reply.code.name) \(reply.message)")
        let bought = try #require(reply.updated.last)
        let payload = try Self.verifiedPayload(bought, daemon)
        // The request's week, not the product's month nor its introductory free trial.
        let purchased = try #require(payload["purchaseDate"] as? Int)
        #expect(payload["expiresDate"] as? Int == purchased + 7 * 86_400_000, "\(payload)")
        #expect(payload["offerType"] == nil && payload["price"] as? Int == 2500, "\(payload)")
        let info = try #require(payload["advancedCommerceInfo"] as? [String: Any])
        #expect(info["period"] as? String == "P1W" && info["taxExclusivePrice"] as? Int == 2500)
        let descriptors = try #require(info["descriptors"] as? [String: Any])
        #expect(descriptors["displayName"] as? String == "News Plus" && descriptors["description"] as? String == "Two newspapers, weekly")
        let items = try #require(info["items"] as? [[String: Any]])
        #expect(items.map { $0["SKU"] as? String } == ["NEWS-A", "NEWS-B"] && items.map { $0["price"] as? Int } == [1000, 1500])
        let offer = try #require(items.first?["offer"] as? [String: Any])
        #expect(offer["period"] as? String == "P1W" && offer["periodCount"] as? Int == 1 && offer["price"] as? Int == 1000
                && offer["reason"] as? String == "ACQUISITION", "\(offer)")

        // The renewal info tells what the next period sells: the items at their prices, the offer over.
        let renewalInfo = try #require(try PriceIncreaseTests.renewalInfo(daemon)["advancedCommerceInfo"] as? [String: Any])
        #expect(renewalInfo["requestReferenceId"] as? String == "1b4e28ba-2fa1-11d2-883f-0016d3cca427" && renewalInfo["period"] as? String == "P1W")
        let nextItems = try #require(renewalInfo["items"] as? [[String: Any]])
        #expect(nextItems.map { $0["price"] as? Int } == [3000, 1500] && nextItems.allSatisfy { $0["offer"] == nil }, "\(nextItems)")

        // Subscribed: another CREATE_SUBSCRIPTION in the group is refused, and records nothing; the
        // same request again is a retry, answered with the purchase it made.
        let before = try daemon.transactions(["--uid", String(client.uid)]).count
        let retried = try Self.pay(client, product: Sample.monthly, jws: signed.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(retried.code == .ok && retried.value == bought.id, "\(retried.message)")
        let another = try SignedRequestTests.pyjwt(try Self.claims(Self.subscription(reference: UUID().uuidString.lowercased())), keyFile: key)
        let again = try Self.pay(client, product: Sample.monthly, jws: another)
        #expect(again.code == .storeKit && again.detail == StoreKitErrorCode.paymentInvalid.rawValue, "\(again.message)")
        #expect(try daemon.transactions(["--uid", String(client.uid)]).count == before)

        // The renewal: the request's week again, the offer over, the items at their prices.
        _ = try daemon.ctlOK(["renew", String(bought.id)])
        let renewal = try #require(try client.unfinished().filter { $0.originalID == bought.id && $0.id != bought.id }.last)
        let renewed = try Self.verifiedPayload(renewal, daemon)
        #expect(renewed["transactionReason"] as? String == "RENEWAL" && renewed["price"] as? Int == 4500, "\(renewed)")
        let renewedStart = try #require(renewed["purchaseDate"] as? Int)
        #expect(renewed["expiresDate"] as? Int == renewedStart + 7 * 86_400_000)
        let renewedInfo = try #require(renewed["advancedCommerceInfo"] as? [String: Any])
        #expect(renewedInfo["requestReferenceId"] as? String == "1b4e28ba-2fa1-11d2-883f-0016d3cca427")
        let renewedItems = try #require(renewedInfo["items"] as? [[String: Any]])
        #expect(renewedItems.map { $0["price"] as? Int } == [3000, 1500] && renewedItems.allSatisfy { $0["offer"] == nil }, "\(renewedItems)")

        // Kept across a restart (the ledger's settings).
        client.close()
        #expect(daemon.stop() == 0)
        try daemon.start()
        let back = try Client(daemon)
        let kept = try #require(try back.unfinished().first { $0.id == bought.id })
        #expect(try Self.verifiedPayload(kept, daemon)["advancedCommerceInfo"] as? [String: Any] != nil)
    }

    @Test("a signed request buys once: a retry with the same JWS gets its transaction back, another uid replaying it is refused")
    func requestBuysOnce() throws {
        let (daemon, key, client) = try Self.started()
        defer { daemon.remove() }
        let jws = try SignedRequestTests.pyjwt(try Self.claims(Self.oneTimeCharge()), keyFile: key)
        let first = try Self.pay(client, jws: jws)
        #expect(first.code == .ok, "\(first.code.name) \(first.message)")
        let retry = try Self.pay(client, jws: jws)
        #expect(retry.code == .ok && retry.value == first.value && retry.updated.isEmpty, "\(retry.code.name) \(retry.message)")
        #expect(try daemon.transactions(["--uid", String(client.uid)]).count == 1, "charged once")
        daemon.openDirectoriesToOtherUsers()
        let stranger = try Client(daemon, asUID: 4242)
        let replay = try Self.pay(stranger, jws: jws)
        #expect(replay.code == .storeKit && replay.detail == StoreKitErrorCode.paymentInvalid.rawValue, "\(replay.code.name) \(replay.message)")
        #expect(try daemon.transactions(["--uid", "4242"]).isEmpty)
        // Kept across a restart.
        client.close()
        stranger.close()
        #expect(daemon.stop() == 0)
        try daemon.start()
        let client2 = try Client(daemon)
        #expect(try Self.pay(client2, jws: jws).value == first.value)
    }

    @Test("a transaction bought with a request is signed with it after the app's last [OfferKey] is removed: the ledger says which apps bought so, not the configuration")
    func signedAliveAfterTheKeysGo() throws {
        let (daemon, key, client) = try Self.started()
        defer { daemon.remove() }
        let reply = try Self.pay(client, product: Sample.levelPack, jws: try SignedRequestTests.pyjwt(try Self.claims(Self.oneTimeCharge()), keyFile: key))
        #expect(reply.code == .ok, "\(reply.code.name) \(reply.message)")
        let bought = try #require(reply.updated.last)
        client.close()
        #expect(daemon.stop() == 0)
        let registration = (daemon.configFile as NSString).deletingLastPathComponent + "/apps.d/com.example.game.conf"
        let text = try String(contentsOfFile: registration, encoding: .utf8)
        try (text.components(separatedBy: "\n[OfferKey]").first ?? text).write(toFile: registration, atomically: true, encoding: .utf8)
        try daemon.start()
        let back = try Client(daemon)
        let kept = try #require(try back.unfinished().first { $0.id == bought.id })
        try Self.expectTellsCharge(kept, daemon)
    }

    @Test("two hosts of a fleet sign a request's transaction alike though only one has the app's [OfferKey]",
          .enabled(if: PostgresServer.unavailableReason == nil, Comment(rawValue: PostgresServer.unavailableReason ?? "")))
    func fleetHostsSignAlike() throws {
        let server = try PostgresServer()
        defer { server.remove() }
        let (a, key) = try PromotionalOfferTests.daemonWithOfferKey()
        defer { a.remove() }
        let b = try DaemonProcess()
        defer { b.remove() }
        try Self.start(a, on: server, host: "host-a")
        try Self.start(b, on: server, host: "host-b")
        let onB = try Client(b)
        _ = try onB.subscribe()
        // B's engine is up before A's first purchase with a request.
        let onA = try Client(a)
        _ = try onA.subscribe()
        let reply = try Self.pay(onA, product: Sample.levelPack, jws: try SignedRequestTests.pyjwt(try Self.claims(Self.oneTimeCharge()), keyFile: key))
        #expect(reply.code == .ok, "\(reply.code.name) \(reply.message)")
        let restored = try #require(try onB.restore().updated.first { $0.state == .restored })
        try Self.expectTellsCharge(restored, b)
    }

    @Test("on PostgreSQL the request is kept in the ledger's settings and told again after a restart",
          .enabled(if: PostgresServer.unavailableReason == nil, Comment(rawValue: PostgresServer.unavailableReason ?? "")))
    func keptInPostgreSQL() throws {
        let server = try PostgresServer()
        defer { server.remove() }
        let (daemon, key) = try PromotionalOfferTests.daemonWithOfferKey()
        defer { daemon.remove() }
        try Self.start(daemon, on: server)
        let client = try Client(daemon)
        _ = try client.subscribe()
        let reply = try Self.pay(client, jws: try SignedRequestTests.pyjwt(try Self.claims(Self.oneTimeCharge()), keyFile: key))
        #expect(reply.code == .ok, "\(reply.code.name) \(reply.message)")
        let bought = try #require(reply.updated.last)
        let kept = try server.sql("SELECT value FROM settings WHERE key = 'commerce.\(bought.id)'")
        #expect(kept.hasPrefix("0\t{\"operation\":\"CREATE_ONE_TIME_CHARGE\""), "\(kept)")
        client.close()
        #expect(daemon.stop() == 0)
        try daemon.start()
        let back = try Client(daemon)
        let again = try #require(try back.unfinished().first { $0.id == bought.id })
        let info = try #require(try Self.verifiedPayload(again, daemon)["advancedCommerceInfo"] as? [String: Any])
        #expect(info["requestReferenceId"] as? String == "7f0c5d8e-0d9a-4d3b-9d49-2c3f1b6a9e01")
    }

    @Test("each bad signed request is refused with StoreKit's error, and records nothing")
    func refusals() throws {
        let (daemon, key, client) = try Self.started()
        defer { daemon.remove() }
        let other = daemon.directory.file("other-key.p8")
        #expect(try ProcessRunner.run("/bin/sh", ["-c", "umask 077; openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out \"$0\"", other]).status == 0)
        func signed(_ claims: [String: Any], keyFile: String? = nil, keyID: String = Self.keyID) throws -> String {
            try SignedRequestTests.pyjwt(claims, keyFile: keyFile ?? key, keyID: keyID)
        }
        func request(_ edit: @escaping (inout [String: Any]) -> Void) throws -> String { try signed(try Self.claims(Self.oneTimeCharge(edit: edit))) }
        var badBase64 = try Self.claims(nil)
        badBase64["request"] = "%%% not base64"
        let invalidSignature = StoreKitErrorCode.invalidSignature.rawValue
        let paymentInvalid = StoreKitErrorCode.paymentInvalid.rawValue
        let refusals: [(String, String, String, Int32)] = [
            ("not a JWS", Sample.coins, "abc.def", paymentInvalid),
            ("unknown kid", Sample.coins, try signed(try Self.claims(Self.oneTimeCharge()), keyID: "NOSUCHKEY"), invalidSignature),
            ("another key", Sample.coins, try signed(try Self.claims(Self.oneTimeCharge()), keyFile: other), invalidSignature),
            ("another audience", Sample.coins, try signed(try Self.claims(Self.oneTimeCharge(), audience: "promotional-offer")), invalidSignature),
            ("another app", Sample.coins, try signed(try Self.claims(Self.oneTimeCharge(), app: "com.example.other")), invalidSignature),
            ("25 hours old", Sample.coins, try signed(try Self.claims(Self.oneTimeCharge(), issuedAgo: 25 * 3600)), invalidSignature),
            ("an hour ahead", Sample.coins, try signed(try Self.claims(Self.oneTimeCharge(), issuedAgo: -3600)), invalidSignature),
            ("no request", Sample.coins, try signed(try Self.claims(nil)), paymentInvalid),
            ("request not base64", Sample.coins, try signed(badBase64), paymentInvalid),
            ("unknown operation", Sample.coins, try request { $0["operation"] = "MODIFY_SUBSCRIPTION" }, paymentInvalid),
            ("another version", Sample.coins, try request { $0["version"] = "2" }, paymentInvalid),
            ("no reference", Sample.coins, try request { $0["requestInfo"] = [String: Any]() }, paymentInvalid),
            ("a reference not a UUID", Sample.coins, try request { $0["requestInfo"] = ["requestReferenceId": "ref-1"] }, paymentInvalid),
            ("another currency", Sample.coins, try signed(try Self.claims(Self.oneTimeCharge(currency: "EUR"))), paymentInvalid),
            ("a currency not ISO 4217", Sample.coins, try signed(try Self.claims(Self.oneTimeCharge(currency: "usd"))), paymentInvalid),
            ("another storefront", Sample.coins, try request { $0["storefront"] = "FRA" }, paymentInvalid),
            ("a negative price", Sample.coins, try signed(try Self.claims(Self.oneTimeCharge(price: -1))), paymentInvalid),
            ("a price in units", Sample.coins, try signed(try Self.claims(Self.oneTimeCharge(price: 4.99))), paymentInvalid),
            ("a price as text", Sample.coins, try signed(try Self.claims(Self.oneTimeCharge(price: "4990"))), paymentInvalid),
            ("an SKU too long", Sample.coins, try signed(try Self.claims(Self.oneTimeCharge(sku: String(repeating: "x", count: 129)))), paymentInvalid),
            ("no item", Sample.coins, try request { $0["item"] = nil }, paymentInvalid),
            ("a one-time charge of a subscription", Sample.monthly, try signed(try Self.claims(Self.oneTimeCharge())), paymentInvalid),
            ("a subscription of a consumable", Sample.coins, try signed(try Self.claims(Self.subscription())), paymentInvalid),
            ("a subscription period Apple has not", Sample.monthly, try signed(try Self.claims({ var request = Self.subscription()
                                                                                                   request["period"] = "P2W"
                                                                                                   return request }())), paymentInvalid),
            ("not in the catalogue", "com.example.game.nothing", try signed(try Self.claims(Self.oneTimeCharge())),
             StoreKitErrorCode.storeProductNotAvailable.rawValue),
        ]
        for (what, product, jws, code) in refusals {
            let reply = try Self.pay(client, product: product, jws: jws)
            #expect(reply.code == .storeKit && reply.detail == code, "\(what): \(reply.code.name) \(reply.detail) \(reply.message)")
            #expect(!reply.message.isEmpty, "\(what): the refusal says why")
        }
        let good = try signed(try Self.claims(Self.oneTimeCharge()))
        let quantity = try Self.pay(client, quantity: 2, jws: good)
        #expect(quantity.code == .storeKit && quantity.detail == paymentInvalid, "\(quantity.message)")
        let token = try Self.pay(client, jws: try request { $0["requestInfo"] = ["requestReferenceId": UUID().uuidString, "appAccountToken": UUID().uuidString] },
                                 username: UUID().uuidString)
        #expect(token.code == .storeKit && token.detail == paymentInvalid, "another account: \(token.message)")
        let untold = try Self.pay(client, jws: good, username: UUID().uuidString)
        #expect(untold.code == .storeKit && untold.detail == paymentInvalid && untold.message.contains("absent"),
                "a token the request does not give: \(untold.message)")
        let withOffer = try Self.pay(client, product: Sample.monthly, jws: try signed(try Self.claims(Self.subscription())),
                                     offerJWS: try SignedRequestTests.pyjwt(SignedRequestTests.offerClaims(), keyFile: key))
        #expect(withOffer.code == .storeKit, "an offer beside the request: \(withOffer.message)")
        #expect(try daemon.transactions(["--uid", String(client.uid)]).isEmpty, "a refused request records nothing")
        // The good one still buys.
        #expect(try Self.pay(client, jws: good).code == .ok)
    }

    @Test("Apple's App Store Server Library signs what the daemon accepts, and reads the transaction's advancedCommerceInfo",
          .enabled(if: IndependentVerifier.appleLibraryPython != nil, "Apple's app-store-server-library is not installed (make test-deps)"))
    func appleLibrarySigns() throws {
        let python = try #require(IndependentVerifier.appleLibraryPython)
        // A Sandbox app: the library checks only what is not Xcode's.
        let (daemon, key) = try PromotionalOfferTests.daemonWithOfferKey()
        defer { daemon.remove() }
        let registration = daemon.directory.file("config/apps.d/com.example.game.conf")
        let text = try String(contentsOfFile: registration, encoding: .utf8)
        try text.replacingOccurrences(of: "[App]\n", with: "[App]\nEnvironment=Sandbox\n").write(toFile: registration, atomically: true, encoding: .utf8)
        try daemon.start()
        let client = try Client(daemon)
        _ = try client.subscribe()
        let script = """
            import sys, uuid
            from appstoreserverlibrary.jws_signature_creator import AdvancedCommerceAPIInAppSignatureCreator
            from appstoreserverlibrary.models.AdvancedCommerceOneTimeChargeCreateRequest import AdvancedCommerceOneTimeChargeCreateRequest
            from appstoreserverlibrary.models.AdvancedCommerceOneTimeChargeItem import AdvancedCommerceOneTimeChargeItem
            from appstoreserverlibrary.models.AdvancedCommerceRequestInfo import AdvancedCommerceRequestInfo
            request = AdvancedCommerceOneTimeChargeCreateRequest(
                requestInfo=AdvancedCommerceRequestInfo(requestReferenceId=uuid.UUID('0f8fad5b-d9cb-469f-a165-70867728950e')),
                currency='USD', taxCode='C003-00-2',
                item=AdvancedCommerceOneTimeChargeItem(SKU='BOOK-9', description='The last volume', displayName='Another book', price=12990))
            key = open(sys.argv[1], 'rb').read()
            print(AdvancedCommerceAPIInAppSignatureCreator(key, sys.argv[2], 'issuer', sys.argv[3]).create_signature(request))
            """
        let signed = try ProcessRunner.run(python, ["-c", script, key, Self.keyID, Sample.app])
        #expect(signed.status == 0, "\(signed.stderr)")
        let reply = try Self.pay(client, jws: signed.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(reply.code == .ok, "\(reply.code.name) \(reply.message)")
        let bought = try #require(reply.updated.last)
        let info = try #require(try Self.verifiedPayload(bought, daemon)["advancedCommerceInfo"] as? [String: Any])
        #expect(info["requestReferenceId"] as? String == "0f8fad5b-d9cb-469f-a165-70867728950e" && info["taxExclusivePrice"] as? Int == 12990)

        try daemon.ctl(["certificate"]).stdout.write(toFile: daemon.directory.file("root.pem"), atomically: true, encoding: .utf8)
        _ = try ProcessRunner.run("/usr/bin/openssl", ["x509", "-in", daemon.directory.file("root.pem"), "-outform", "DER",
                                                       "-out", daemon.directory.file("root.der")])
        let decoded = try IndependentVerifier.verifyWithAppleLibrary(try #require(bought.jwsRepresentation), rootDER: daemon.directory.file("root.der"),
                                                                     bundleID: Sample.app, kind: "transaction")
        #expect(decoded.status == 0, "\(decoded.stderr)")
        for part in ["advancedCommerceInfo=AdvancedCommerceTransactionInfo(", "requestReferenceId='0f8fad5b-d9cb-469f-a165-70867728950e'",
                     "taxExclusivePrice=12990", "AdvancedCommerceTransactionItem(SKU='BOOK-9'", "price=12990"] {
            #expect(decoded.stdout.contains(part), "\(part) in \(decoded.stdout)")
        }
    }
}
