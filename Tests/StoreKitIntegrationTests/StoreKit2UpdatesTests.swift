import Foundation
import StoreKitLedger
import StoreKitTestSupport
import Testing

/// `Transaction.updates` and `Product.purchase()` against the real daemon, through the StoreKit 2
/// sample app: what arrives through `updates`, what comes back from `purchase()`, and that every
/// listener of a process receives every update.
@Suite struct StoreKit2UpdatesTests {
    @Test func unfinishedTransactionsAreEmittedOnceAtLaunch() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let first = try daemon.buyForApp(Sample.coins)
        let second = try daemon.buyForApp(Sample.levelPack)

        let app = try StoreKit2App(daemon)
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == second.id }, "\(app.transcript)")
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == first.id }, "\(app.transcript)")

        // A later change arrives; the launch batch is not emitted again.
        let third = try daemon.buyForApp(Sample.coins)
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == third.id }, "\(app.transcript)")
        _ = try app.command("list unfinished")
        for id in [first.id, second.id, third.id] {
            #expect(app.updates(of: id).count == 1, "\(id): \(app.transcript)")
        }
        #expect(app.updates(listener: 0).count == 3, "\(app.transcript)")
        app.stop()

        // Purchases made while the app is not running are unfinished at its next launch, which
        // emits, once, everything still unfinished then (the store finished what it verified).
        let whileStopped = try [Sample.coins, Sample.seasonPass].map { try daemon.buyForApp($0).id }
        let unfinished = try daemon.unfinishedIDs()
        #expect(unfinished.isSuperset(of: whileStopped))
        let relaunched = try StoreKit2App(daemon)
        let arrived = relaunched.waitForOutput { _ in Set(relaunched.updates(listener: 0).compactMap { $0[string: "transactionIdentifier"] }) == unfinished }
        #expect(arrived, "expected \(unfinished): \(relaunched.transcript)")
        _ = try relaunched.command("list unfinished")
        #expect(relaunched.updates(listener: 0).count == unfinished.count, "\(relaunched.transcript)")
    }

    @Test func aPurchasesOwnTransactionComesBackFromPurchaseNotFromUpdates() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let app = try StoreKit2App(daemon, listeners: 1)

        let events = try app.command("buy \(Sample.coins) --quantity 3")
        let purchase = try #require(events.first { $0["event"] as? String == "purchase" }, "\(app.transcript)")
        #expect(purchase[string: "result"] == "success")
        #expect(purchase["quantity"] as? Int == 3)
        #expect(purchase[string: "productType"] == "Consumable")
        #expect(purchase["verified"] as? Bool == true, "signed by storekitd, checked against its root: \(purchase)")
        let id = try #require(purchase[string: "transactionIdentifier"])

        // A purchase made outside the app afterwards does arrive: by then the purchase's own records
        // have been handled, and none of them reached a listener.
        let outside = try daemon.buyForApp(Sample.coins)
        for listener in [0, 1] {
            #expect(app.waitForUpdate(listener: listener) { $0[string: "transactionIdentifier"] == outside.id }, "\(app.transcript)")
            #expect(app.updates(of: id, listener: listener).isEmpty, "listener \(listener): \(app.transcript)")
        }
    }

    @Test func askToBuyIsPendingAndTheApprovalArrivesThroughUpdates() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let app = try StoreKit2App(daemon)

        let events = try app.command("buy \(Sample.levelPack) --ask-to-buy")
        #expect(events.contains { $0["event"] as? String == "purchase" && $0[string: "result"] == "pending" }, "\(app.transcript)")
        let request = try #require(try daemon.transactions(["--app", Sample.app, "--uid", buyer]).first { $0.state == "deferred" })
        #expect(app.updates(listener: 0).isEmpty, "a pending purchase is not an update: \(app.transcript)")

        try daemon.ctlOK(["approve", request.id])
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == request.id && $0[string: "productIdentifier"] == Sample.levelPack },
                "\(app.transcript)")

        // A declined request produces no transaction: nothing arrives for it.
        _ = try app.command("buy \(Sample.seasonPass) --ask-to-buy")
        let declined = try #require(try daemon.transactions(["--app", Sample.app, "--uid", buyer]).first { $0.state == "deferred" })
        try daemon.ctlOK(["decline", declined.id])
        let later = try daemon.buyForApp(Sample.coins)
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == later.id }, "\(app.transcript)")
        #expect(app.updates(of: declined.id).isEmpty, "\(app.transcript)")
    }

    @Test func renewalsOnTheStoreClockArriveThroughUpdates() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let app = try StoreKit2App(daemon)

        let purchase = try daemon.buyForApp(Sample.monthly)
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == purchase.id && $0[string: "reason"] == "PURCHASE" },
                "\(app.transcript)")
        let clock = try daemon.ctlObject(["clock", "advance", "1mo"])
        #expect(clock["firedEvents"] as? Int == 1, "\(clock)")
        try daemon.ctlOK(["renew", purchase.id])

        let renewals = try daemon.history([Sample.app, "--uid", buyer]).compactMap { $0[string: "transactionIdentifier"] }.filter { $0 != purchase.id }
        try #require(renewals.count == 2, "\(renewals)")
        for renewal in renewals {
            #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == renewal }, "\(app.transcript)")
            let update = try #require(app.updates(of: renewal).first)
            #expect(update[string: "originalTransactionIdentifier"] == purchase.id)
            #expect(update[string: "reason"] == "RENEWAL")
            #expect(update[string: "productType"] == "Auto-Renewable Subscription")
            #expect(update[string: "expirationDate"] != nil)
        }
    }

    @Test func refundsArriveThroughUpdatesWithTheirRevocation() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let app = try StoreKit2App(daemon)

        let levelPack = try daemon.buyForApp(Sample.levelPack)
        let subscription = try daemon.buyForApp(Sample.yearly)
        for id in [levelPack.id, subscription.id] {
            #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == id }, "\(app.transcript)")
        }
        try daemon.ctlOK(["refund", levelPack.id, "--reason", "1"])
        try daemon.ctlOK(["refund", subscription.id])
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == levelPack.id && $0[string: "revocationDate"] != nil },
                "\(app.transcript)")
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == subscription.id && $0[string: "revocationDate"] != nil },
                "\(app.transcript)")
        #expect(app.updates(of: levelPack.id).last?["revocationReason"] as? Int == 1)
        #expect(app.updates(of: subscription.id).last?["revocationReason"] as? Int == 0)
    }

    @Test func everyListenerOfAProcessReceivesEveryUpdate() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let app = try StoreKit2App(daemon, listeners: 2)

        let bought = try [Sample.coins, Sample.levelPack, Sample.coins].map { try daemon.buyForApp($0).id }
        for listener in 0...2 {
            for id in bought {
                #expect(app.waitForUpdate(listener: listener) { $0[string: "transactionIdentifier"] == id }, "listener \(listener): \(app.transcript)")
            }
        }
        _ = try app.command("list unfinished")
        for listener in 0...2 {
            #expect(app.updates(listener: listener).compactMap { $0[string: "transactionIdentifier"] } == bought,
                    "listener \(listener), once each, in order: \(app.transcript)")
        }
    }

    @Test func theAppAccountTokenTravelsAsTheApplicationUsername() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let token = UUID()

        let events = try daemon.storeKit2App(["buy", Sample.levelPack, "--account-token", token.uuidString])
        let purchase = try #require(events.first { $0["event"] as? String == "purchase" }, "\(events)")
        #expect(purchase[string: "appAccountToken"] == token.uuidString)
        let id = try #require(purchase[string: "transactionIdentifier"])
        let listed = try #require(try daemon.history([Sample.app, "--uid", buyer]).first { $0[string: "transactionIdentifier"] == id })
        #expect(listed[string: "applicationUsername"] == token.uuidString, "StoreKit 1 sees the token as the application username")
    }
}
