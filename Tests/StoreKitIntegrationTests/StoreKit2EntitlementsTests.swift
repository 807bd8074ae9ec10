import Foundation
import StoreKitTestSupport
import Testing

/// `Transaction.currentEntitlements`, `Transaction.all` and the subscription status against the
/// real daemon: what entitles the buyer now, as `storekitctl entitlements` computes it.
@Suite struct StoreKit2EntitlementsTests {
    @Test func aRefundedNonConsumableIsNoLongerAnEntitlement() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let levelPack = try daemon.buyForApp(Sample.levelPack)
        let seasonPass = try daemon.buyForApp(Sample.seasonPass)
        let coins = try daemon.buyForApp(Sample.coins)

        #expect(Set(try daemon.storeKit2List("entitlements")) == [levelPack.id, seasonPass.id], "no consumables")
        try daemon.ctlOK(["refund", levelPack.id])
        #expect(try daemon.storeKit2List("entitlements") == [seasonPass.id])
        #expect(try daemon.storeKit2List("all") == [levelPack.id, seasonPass.id, coins.id], "the history keeps refunds")
        let daemonView = try daemon.ctlArray(["entitlements", Sample.app, "--uid", buyer]).compactMap { $0[string: "transactionIdentifier"] }
        #expect(daemonView == [seasonPass.id], "the same rule as storekitctl entitlements")
    }

    @Test func anExpiredOrRevokedSubscriptionIsNoLongerAnEntitlement() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let monthly = try daemon.buyForApp(Sample.monthly)
        #expect(try daemon.storeKit2List("entitlements") == [monthly.id])
        let status = try daemon.storeKit2App(["status"]).filter { $0["event"] as? String == "status" }
        #expect(status.map { $0["state"] as? Int } == [1], "subscribed: \(status)")
        #expect(status.first?["willAutoRenew"] as? Bool == true)

        try daemon.ctlOK(["clock", "advance", "1mo"])
        let renewal = try #require(try daemon.history([Sample.app, "--uid", buyer]).last?[string: "transactionIdentifier"])
        #expect(renewal != monthly.id)
        #expect(try daemon.storeKit2List("entitlements") == [renewal], "the current transaction of the subscription")

        try daemon.ctlOK(["expire", renewal])
        #expect(try daemon.storeKit2List("entitlements").isEmpty)
        #expect(try daemon.storeKit2App(["status"]).first { $0["event"] as? String == "status" }?["state"] as? Int == 2)

        // Subscribed again, then refunded: revoked.
        let again = try daemon.buyForApp(Sample.yearly)
        #expect(try daemon.storeKit2List("entitlements") == [again.id])
        try daemon.ctlOK(["refund", again.id])
        #expect(try daemon.storeKit2List("entitlements").isEmpty)
        #expect(try daemon.storeKit2App(["status"]).first { $0["event"] as? String == "status" }?["state"] as? Int == 5)
    }

    @Test func theIntroductoryOfferIsForBuyersWhoNeverSubscribedInTheGroup() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        func monthly() throws -> JSONObject {
            try #require(try daemon.storeKit2App(["list", "products"]).first { $0[string: "id"] == Sample.monthly })
        }
        let before = try monthly()
        #expect(before[string: "introductoryOffer"] == "freeTrial")
        #expect(before["promotionalOffers"] as? [String] == ["com.example.game.premium.monthly.comeback"])
        #expect(before["isEligibleForIntroOffer"] as? Bool == true)
        _ = try daemon.buyForApp(Sample.yearly)
        #expect(try monthly()["isEligibleForIntroOffer"] as? Bool == false, "subscribed in the group once")
    }
}
