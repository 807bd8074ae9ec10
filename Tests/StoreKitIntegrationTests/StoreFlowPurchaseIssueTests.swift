import Foundation
import StoreKitTestSupport
import Testing

/// Purchases that do not go straight through, end to end: Ask to Buy (approve, decline,
/// consolidation), interrupted purchases and `resolve`, failing the next purchases.
@Suite struct StoreFlowPurchaseIssueTests {
    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func askToBuyApproveAndDecline() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let app = try daemon.observer()

        let switches = try daemon.ctlObject(["ask-to-buy", "on", "--uid", "0"])
        #expect((switches["askToBuyByUID"] as? JSONObject)?["0"] as? Bool == true)

        // A purchase waits for a parent: the app sees it deferred.
        let request = try daemon.ctlObject(["buy", Sample.app, Sample.levelPack])
        #expect(request[string: "state"] == "deferred")
        let deferredID = try #require(request[string: "transactionIdentifier"])
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == deferredID && $0[string: "state"] == "deferred" },
                "\(app.transcript)")
        #expect(try daemon.ctl(["transactions", "--unfinished"]).stdout.contains("deferred"), "a deferred transaction stays unfinished")

        // A second request for the same product joins the open one.
        let repeated = try daemon.ctlObject(["buy", Sample.app, Sample.levelPack])
        #expect(repeated[string: "transactionIdentifier"] == deferredID)
        #expect(repeated[string: "state"] == "deferred")
        #expect(try daemon.history().count == 1, "one request, not two")

        let approved = try daemon.ctlObject(["approve", deferredID])
        #expect(approved[string: "state"] == "purchased")
        #expect(app.waitForUpdate {
            $0[string: "transactionIdentifier"] == deferredID && $0[string: "state"] == "purchased" && $0["granted"] as? Bool == true
        }, "\(app.transcript)")
        #expect(eventually { (try? daemon.transactions(["--unfinished"]).isEmpty) == true }, "the app finished it")
        let twice = try daemon.ctl(["approve", deferredID])
        #expect(twice.status == 1 && twice.stderr.contains("not an Ask to Buy request"), "\(twice.stderr)")

        // Decline: the deferred transaction fails with paymentCancelled.
        let second = try daemon.ctlObject(["buy", Sample.app, Sample.coins])
        let secondID = try #require(second[string: "transactionIdentifier"])
        #expect(second[string: "state"] == "deferred")
        let declined = try daemon.ctlObject(["decline", secondID])
        #expect(declined[string: "state"] == "failed")
        #expect((declined["error"] as? JSONObject)?["code"] as? Int == 2)
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == secondID && $0[string: "state"] == "failed" },
                "\(app.transcript)")

        // The switch is per account: another uid buys straight through.
        let other = try daemon.buyOutsideApp(Sample.coins, uid: 503)
        #expect(other.state == "purchased")
        // Unknown transactions are a clear error.
        let unknown = try daemon.ctl(["approve", "2999999999999999"])
        #expect(unknown.status == 1 && unknown.stderr.contains("does not exist"), "\(unknown.stderr)")
    }

    @Test func unansweredAskToBuyLapsesAfterADay() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        try daemon.ctlOK(["ask-to-buy", "on"])
        let request = try daemon.ctlObject(["buy", Sample.app, Sample.levelPack])
        #expect(request[string: "state"] == "deferred")
        try daemon.ctlOK(["clock", "advance", "23h"])
        #expect(try daemon.history().first?[string: "state"] == "deferred")
        try daemon.ctlOK(["clock", "advance", "2h"])
        let lapsed = try #require(try daemon.history().first)
        #expect(lapsed[string: "state"] == "failed")
        #expect((lapsed["error"] as? JSONObject)?["code"] as? Int == 2)
    }

    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func interruptedPurchaseThenResolved() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let app = try daemon.observer()

        try daemon.ctlOK(["interrupted", "on"])
        let failed = try daemon.ctlObject(["buy", Sample.app, Sample.levelPack])
        #expect(failed[string: "state"] == "failed")
        let failedID = try #require(failed[string: "transactionIdentifier"])
        #expect((failed["error"] as? JSONObject)?["code"] as? Int == 0)
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == failedID && $0[string: "state"] == "failed" },
                "\(app.transcript)")
        try daemon.ctlOK(["interrupted", "off"])

        let resolved = try daemon.ctlObject(["resolve", failedID])
        let resolvedID = try #require(resolved[string: "transactionIdentifier"])
        #expect(resolvedID != failedID, "the follow-up is a new transaction")
        #expect(resolved[string: "state"] == "purchased")
        #expect(resolved[string: "originalTransactionIdentifier"] == failedID)
        #expect(app.waitForUpdate {
            $0[string: "transactionIdentifier"] == resolvedID && $0[string: "originalTransactionIdentifier"] == failedID
                && $0["granted"] as? Bool == true
        }, "\(app.transcript)")

        let again = try daemon.ctl(["resolve", failedID])
        #expect(again.status == 1 && again.stderr.contains("no issue to resolve"), "\(again.stderr)")
        #expect(try daemon.ctl(["resolve", "12"]).status == 1)
        #expect(try daemon.ctl(["resolve", "twelve"]).status == 64)
    }

    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func failNextFailsTheNextPurchasesWithTheChosenCode() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()

        let switches = try daemon.ctlObject(["fail-next", "paymentNotAllowed", "--count", "2"])
        #expect((switches["failNext"] as? JSONObject)?["remaining"] as? Int == 2)
        let app = try daemon.observer()
        let first = try daemon.buyOutsideApp(Sample.coins)
        #expect(first.state == "failed" && first.errorCode == 4)
        #expect(app.waitForUpdate {
            $0[string: "transactionIdentifier"] == first.id && ($0["error"] as? JSONObject)?["code"] as? Int == 4
        }, "the app sees the failure with its code: \(app.transcript)")
        let second = try daemon.buyOutsideApp(Sample.coins)
        #expect(second.state == "failed" && second.errorCode == 4)
        let third = try daemon.buyOutsideApp(Sample.coins)
        #expect(third.state == "purchased", "only two failed")
        #expect(try daemon.ctlObject(["switches"])["failNext"] is NSNull)

        try daemon.ctlOK(["fail-next", "18"])
        #expect(try daemon.buyOutsideApp(Sample.levelPack).errorCode == 18)
        let bad = try daemon.ctl(["fail-next", "bogus"])
        #expect(bad.status == 1 && bad.stderr.contains("not an SKError.Code"), "\(bad.stderr)")
        #expect(try daemon.ctl(["fail-next", "2", "--count", "x"]).status == 64)
    }
}
