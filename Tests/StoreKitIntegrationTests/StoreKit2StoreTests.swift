import Foundation
import StoreKitTestSupport
import Testing

/// The "done when": code in the common StoreKit 2 shape — the sample's `Store`, with
/// `listenForTransactions()`, `checkVerified(_:)`, `requestProducts()`, `purchase(_:)` and
/// `updateCustomerProductStatus()` — driven through a purchase, Ask to Buy, a renewal and refunds
/// against the real daemon, granting only what verifies and finishing what it granted.
@Suite struct StoreKit2StoreTests {
    @Test func theSampleStoreThroughPurchaseAskToBuyRenewalAndRefund() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let app = try StoreKit2App(daemon)
        func status() -> JSONObject? { events(app.output).last { $0["event"] as? String == "customerStatus" } }

        // A purchase: its verified transaction comes back from purchase(), is granted and finished.
        let bought = try app.command("buy \(Sample.levelPack)")
        let purchase = try #require(bought.first { $0["event"] as? String == "purchase" }, "\(app.transcript)")
        #expect(purchase[string: "result"] == "success")
        #expect(purchase["verified"] as? Bool == true, "\(purchase)")
        let levelPack = try #require(purchase[string: "transactionIdentifier"])
        #expect(status()?["levelPacks"] as? [String] == [Sample.levelPack], "\(app.transcript)")
        #expect(try daemon.unfinishedIDs().isEmpty, "the store finished what it granted")

        // Ask to Buy: pending, then the approval arrives through the listener, verified, granted, finished.
        let asked = try app.command("buy \(Sample.monthly) --ask-to-buy")
        #expect(asked.contains { $0["event"] as? String == "purchase" && $0[string: "result"] == "pending" }, "\(app.transcript)")
        let request = try #require(try daemon.transactions(["--app", Sample.app, "--uid", buyer]).first { $0.state == "deferred" })
        try daemon.ctlOK(["approve", request.id])
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == request.id && $0["verified"] as? Bool == true }, "\(app.transcript)")
        #expect(app.waitForOutput { _ in (status()?["subscriptions"] as? [String]) == [Sample.monthly] }, "\(app.transcript)")
        #expect(eventually { (try? daemon.unfinishedIDs().isEmpty) == true })

        // A renewal on the store clock.
        try daemon.ctlOK(["clock", "advance", "1mo"])
        let renewal = try #require(try daemon.history([Sample.app, "--uid", buyer]).last?[string: "transactionIdentifier"])
        #expect(renewal != request.id)
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == renewal && $0[string: "reason"] == "RENEWAL" && $0["verified"] as? Bool == true },
                "\(app.transcript)")
        #expect(eventually { (try? daemon.unfinishedIDs().isEmpty) == true }, "the renewal was finished")
        #expect(status()?["subscriptionGroupStatus"] as? Int == 1, "subscribed: \(app.transcript)")

        // Refunds: the level pack, then the subscription's current transaction.
        try daemon.ctlOK(["refund", levelPack])
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == levelPack && $0[string: "revocationDate"] != nil }, "\(app.transcript)")
        #expect(app.waitForOutput { _ in (status()?["levelPacks"] as? [String]) == [] }, "\(app.transcript)")
        try daemon.ctlOK(["refund", renewal])
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == renewal && $0[string: "revocationDate"] != nil }, "\(app.transcript)")
        #expect(app.waitForOutput { _ in (status()?["subscriptions"] as? [String]) == [] && status()?["subscriptionGroupStatus"] as? Int == 5 },
                "revoked: \(app.transcript)")

        // The purchase's own transaction never went through the listener.
        #expect(app.updates(of: levelPack).allSatisfy { $0[string: "revocationDate"] != nil }, "\(app.transcript)")
        #expect(app.updates(listener: 0).allSatisfy { $0["verified"] as? Bool == true }, "\(app.transcript)")
    }
}
