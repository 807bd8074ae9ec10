import Foundation
import StoreKitTestSupport
import StoreKitWire
import Testing

/// StoreKit 2 and StoreKit 1 share one queue: what one finishes, the other no longer has.
@Suite struct StoreKit2QueueTests {
    @Test func aTransactionFinishedThroughStoreKit2LeavesStoreKit1sQueue() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let purchase = try daemon.buyForApp(Sample.coins)
        let observer = try Client(daemon)
        #expect(try observer.subscribe().map { String($0.id) } == [purchase.id])

        // StoreKit 1's queue (`SKPaymentQueue.unfinishedTransactions()`) has it, so has StoreKit 2's.
        #expect(events(try daemon.app(["list"]).stdout).compactMap { $0[string: "transactionIdentifier"] } == [purchase.id])
        #expect(try daemon.storeKit2List("unfinished") == [purchase.id])

        let finished = try daemon.storeKit2App(["finish", purchase.id])
        #expect(finished.contains { $0["event"] as? String == "finished" })
        // StoreKit 1 observers are told it was removed; the queue no longer has it.
        guard case .removed(let records) = try observer.nextPush() else { throw IntegrationFailure("expected removed") }
        #expect(records.map { String($0.id) } == [purchase.id])
        #expect(events(try daemon.app(["list"]).stdout).isEmpty)
        #expect(try daemon.storeKit2List("unfinished").isEmpty)
        // A finished consumable leaves the history StoreKit 2 shows, as Apple's does by default;
        // an app that opts in (SKIncludeConsumableInAppPurchaseHistory) still sees it.
        #expect(try daemon.storeKit2List("all").isEmpty, "a finished consumable is not in Transaction.all by default")
        #expect(try daemon.storeKit2List("all", environment: ["SKIncludeConsumableInAppPurchaseHistory": "YES"]) == [purchase.id],
                "finished, still in the history of an app that opted in")
        _ = try daemon.ctlOK(["refund", purchase.id])
        #expect(try daemon.storeKit2List("all") == [purchase.id], "a refunded consumable is in the history")
    }

    @Test func aTransactionFinishedThroughStoreKit1LeavesStoreKit2sUnfinished() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let purchase = try daemon.buyForApp(Sample.levelPack)
        #expect(try daemon.storeKit2List("unfinished") == [purchase.id])

        // StoreKit 1's example app grants and finishes what its observer receives.
        let sk1 = try daemon.observer()
        #expect(sk1.waitForUpdate { $0[string: "transactionIdentifier"] == purchase.id }, "\(sk1.transcript)")
        #expect(eventually { (try? daemon.unfinishedIDs().isEmpty) == true })
        #expect(try daemon.storeKit2List("unfinished").isEmpty)
        #expect(try daemon.storeKit2List("entitlements") == [purchase.id], "finished, still an entitlement")
    }
}
