import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing

/// A price increase that needs the subscriber's consent, through the real daemon: the app's
/// observers are told (and told again at each registration while unanswered), the renewal info
/// says where it stands, an agreed one renews, a declined or unanswered one ends the subscription
/// at the renewal with Apple's expirationIntent 3.
@Suite struct PriceIncreaseTests {
    static let monthly = "com.example.game.premium.monthly"

    /// The JSON payload of a compact JWS (no check: the signature suites check signatures).
    static func payload(_ jws: String) throws -> [String: Any] {
        let part = String(jws.split(separator: ".")[1])
        let data = try #require(Data(base64Encoded: ProofOfPurchaseTests.base64(part)))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static func renewalInfo(_ daemon: DaemonProcess) throws -> [String: Any] {
        let subscription = try #require((try daemon.ctlJSON(["subscriptions"]) as? [[String: Any]])?.first)
        return try payload(try #require(subscription["signedRenewalInfo"] as? String))
    }

    /// A daemon, an observer of the sample app, and its purchase of the monthly subscription.
    static func subscriber() throws -> (DaemonProcess, Client, TransactionRecord) {
        let daemon = try DaemonProcess()
        try daemon.start()
        let client = try Client(daemon)
        _ = try client.subscribe()
        return (daemon, client, try client.buy(monthly))
    }

    static func waitForPriceConsent(_ client: Client) throws -> String? {
        client.connection.setReceiveTimeout(5)
        while true {
            guard let message = try? client.nextPush() else { return nil }
            if case .priceConsent(let productID) = message { return productID }
        }
    }

    @Test("raised: observers are told, renewal info says pending; agreed: it renews at the renewal")
    func agreedIncreaseRenews() throws {
        let (daemon, client, bought) = try Self.subscriber()
        defer { daemon.remove() }
        #expect(try daemon.ctl(["price-increase", String(bought.id)]).status == 0)
        #expect(try Self.waitForPriceConsent(client) == Self.monthly)
        #expect(try Self.renewalInfo(daemon)["priceIncreaseStatus"] as? Int == 0)
        #expect(try daemon.ctlOK(["subscriptions"]) is [Any])
        // Unanswered, it is told again to an observer that registers.
        let later = try Client(daemon)
        let id = later.makeRequestID()
        try later.connection.send(.subscribe(requestID: id))
        #expect(try Self.waitForPriceConsent(later) == Self.monthly)

        #expect(try daemon.ctl(["price-consent", "yes", String(bought.id)]).status == 0)
        #expect(try Self.renewalInfo(daemon)["priceIncreaseStatus"] as? Int == 1)
        #expect(try daemon.ctl(["price-consent", "no", String(bought.id)]).status != 0, "answered once")
        _ = try daemon.ctlOK(["clock", "advance", "1mo"])
        let subscription = try #require((try daemon.ctlJSON(["subscriptions"]) as? [[String: Any]])?.first)
        #expect(subscription["state"] as? String == "subscribed" && subscription["renewalCount"] as? Int == 1, "\(subscription)")
        #expect(subscription["priceIncrease"] == nil, "done once the period at the new price started")
        #expect(try Self.renewalInfo(daemon)["priceIncreaseStatus"] == nil)
    }

    @Test("declined, or left unanswered: the subscription ends at the renewal, expirationIntent 3", arguments: [true, false])
    func declinedOrUnansweredIncreaseEnds(declines: Bool) throws {
        let (daemon, client, bought) = try Self.subscriber()
        defer { daemon.remove() }
        #expect(try daemon.ctl(["price-increase", Sample.app, Self.monthly, "--uid", String(client.uid)]).status == 0)
        if declines {
            #expect(try daemon.ctl(["price-consent", "no", String(bought.id)]).status == 0)
            #expect(try Self.renewalInfo(daemon)["autoRenewStatus"] as? Int == 0)
        }
        _ = try daemon.ctlOK(["clock", "advance", "1mo"])
        let subscription = try #require((try daemon.ctlJSON(["subscriptions"]) as? [[String: Any]])?.first)
        #expect(subscription["state"] as? String == "expired" && subscription["renewalCount"] as? Int == 0, "\(subscription)")
        #expect(try Self.renewalInfo(daemon)["expirationIntent"] as? Int == 3)
        // A new run of the subscription is at today's price.
        _ = try client.buy(Self.monthly)
        #expect(try Self.renewalInfo(daemon)["expirationIntent"] == nil)
        _ = try daemon.ctlOK(["clock", "advance", "1mo"])
        let renewed = try #require((try daemon.ctlJSON(["subscriptions"]) as? [[String: Any]])?.first)
        #expect(renewed["state"] as? String == "subscribed", "\(renewed)")
    }

    @Test("auto-renew turned on again after declining agrees; a forced renewal starts the period at the new price")
    func turnedBackOnOrForced() throws {
        let (daemon, _, bought) = try Self.subscriber()
        defer { daemon.remove() }
        #expect(try daemon.ctl(["price-increase", String(bought.id)]).status == 0)
        #expect(try daemon.ctl(["price-consent", "no", String(bought.id)]).status == 0)
        #expect(try daemon.ctl(["auto-renew", "on", String(bought.id)]).status == 0)
        #expect(try Self.renewalInfo(daemon)["priceIncreaseStatus"] as? Int == 1)
        _ = try daemon.ctlOK(["clock", "advance", "1mo"])
        let renewed = try #require((try daemon.ctlJSON(["subscriptions"]) as? [[String: Any]])?.first)
        #expect(renewed["state"] as? String == "subscribed" && renewed["priceIncrease"] == nil, "\(renewed)")

        #expect(try daemon.ctl(["price-increase", String(bought.id)]).status == 0)
        _ = try daemon.ctlOK(["renew", String(bought.id)])
        let forced = try #require((try daemon.ctlJSON(["subscriptions"]) as? [[String: Any]])?.first)
        #expect(forced["priceIncrease"] == nil, "\(forced)")
    }

    @Test("a subscription that does not renew has no price to raise; an answer with no increase waiting is refused")
    func refusals() throws {
        let (daemon, client, bought) = try Self.subscriber()
        defer { daemon.remove() }
        let unasked = try daemon.ctl(["price-consent", "yes", String(bought.id)])
        #expect(unasked.status == 1 && unasked.stderr.contains("no price increase waiting"), "\(unasked.stderr)")
        #expect(try daemon.ctl(["auto-renew", "off", String(bought.id)]).status == 0)
        let notRenewing = try daemon.ctl(["price-increase", String(bought.id)])
        #expect(notRenewing.status == 1 && notRenewing.stderr.contains("does not renew"), "\(notRenewing.stderr)")
        let coins = try client.buy("com.example.game.coins100")
        #expect(try daemon.ctl(["price-increase", String(coins.id)]).status == 1)
        #expect(try daemon.ctl(["price-consent", "maybe", String(bought.id)]).status == 64)
    }
}
