import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing

/// restoreCompletedTransactions: new `restored` transactions linked to their originals, for
/// non-consumables and auto-renewable subscriptions only; single-flight; always a finished event.
@Suite struct RestoreTests {
    @Test("one host: buy, restore, refund the original: the restored copy no longer entitles (storekitctl and StoreKit 2)")
    func refundOfOriginalRevokesRestoredCopy() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let client = try Client(daemon)
        _ = try client.subscribe()
        let pack = try client.buy(Sample.levelPack)
        #expect(try client.finish(pack.id).code == .ok)
        let copy = try #require(try client.restore().updated.first { $0.state == .restored && $0.productID == Sample.levelPack })
        #expect(try client.finish(copy.id).code == .ok)
        func entitled() throws -> [String] {
            (try daemon.ctlOK(["entitlements", Sample.app]) as? [[String: Any]] ?? []).compactMap { $0["productIdentifier"] as? String }
        }
        #expect(try entitled() == [Sample.levelPack])
        _ = try daemon.ctlOK(["refund", String(pack.id)])
        #expect(try entitled().isEmpty, "the restored copy still entitles")
        #expect(try daemon.storeKit2List("entitlements").isEmpty)
        let history = try daemon.ctlOK(["history", Sample.app]) as? [[String: Any]] ?? []
        #expect(history.first { $0["transactionIdentifier"] as? String == String(copy.id) }?["revocationDate"] != nil)
    }

    @Test func restoreCreatesRestoredTransactionsForNonConsumablesAndSubscriptions() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let ledger = daemon.directory.file("ledger")

        for product in [Sample.levelPack, Sample.monthly, Sample.coins] {
            let result = try daemon.app(["buy", product], ledger: ledger, timeout: appTimeout)
            #expect(result.status == 0, "buy \(product): \(result.stdout)\n\(result.stderr)")
        }
        let purchases = try daemon.transactions()
        try #require(purchases.count == 3 && purchases.allSatisfy(\.finished), "\(purchases)")
        let purchaseID = Dictionary(uniqueKeysWithValues: purchases.map { ($0.productIdentifier, $0.id) })

        let restore = try daemon.app(["restore"], ledger: ledger, timeout: appTimeout)
        #expect(restore.status == 0, "\(restore.stdout)\n\(restore.stderr)")
        let restoredEvents = updates(restore.stdout).filter { $0["state"] as? String == "restored" }
        #expect(Set(restoredEvents.compactMap { $0["productIdentifier"] as? String }) == [Sample.levelPack, Sample.monthly])
        #expect(restoredEvents.count == 2)
        for event in restoredEvents {
            let product = event["productIdentifier"] as? String ?? ""
            #expect(event["originalTransactionIdentifier"] as? String == purchaseID[product], "\(event)")
            #expect(event["transactionIdentifier"] as? String != purchaseID[product], "a restore is a new transaction")
        }
        let finished = events(restore.stdout).filter { $0["event"] as? String == "restoreFinished" }
        #expect(finished.count == 1, "\(restore.stdout)")

        // The ledger of the control plane agrees: two new restored transactions, nothing for coins.
        let restored = try daemon.transactions().filter { $0.state == "restored" }
        #expect(restored.count == 2)
        #expect(Set(restored.map(\.productIdentifier)) == [Sample.levelPack, Sample.monthly])
        for transaction in restored {
            #expect(transaction.originalTransactionIdentifier == purchaseID[transaction.productIdentifier])
            #expect(!purchaseID.values.contains(transaction.id))
        }
        #expect(restored.allSatisfy { $0.originalTransactionIdentifier != purchaseID[Sample.coins] })
        // The example app finishes what it restored (after the finish event, so poll).
        #expect(eventually { (try? daemon.transactions(["--unfinished"]).isEmpty) == true })
    }

    @Test func secondRestoreWhileRestoredAreUnfinishedMakesNoDuplicates() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()

        let client = try Client(daemon)
        _ = try client.subscribe()
        let levelPack = try client.buy(Sample.levelPack)
        let monthly = try client.buy(Sample.monthly)
        let coins = try client.buy(Sample.coins)
        for record in [levelPack, monthly, coins] { #expect(try client.finish(record.id).code == .ok) }

        let first = try client.restore()
        #expect(first.code == .ok, "\(first.message)")
        let restored = first.updated
        #expect(restored.allSatisfy { $0.state == .restored })
        #expect(Set(restored.map(\.productID)) == [Sample.levelPack, Sample.monthly])
        #expect(Set(restored.compactMap(\.originalID)) == [levelPack.id, monthly.id])

        // The restored transactions are not finished yet: a second restore adds nothing.
        let second = try client.restore()
        #expect(second.code == .ok, "\(second.message)")
        #expect(second.updated.isEmpty, "duplicates: \(second.updated)")
        let afterSecond = try daemon.transactions().filter { $0.state == "restored" }
        #expect(afterSecond.count == 2, "\(afterSecond)")

        // After the restart they are still the only ones, and still delivered.
        client.close()
        daemon.kill()
        try daemon.start()
        let again = try Client(daemon)
        #expect(Set(try again.subscribe().map(\.id)) == Set(restored.map(\.id)))
        let third = try again.restore()
        #expect(third.code == .ok)
        #expect(third.updated.isEmpty)

        // Once finished, a new restore may create new ones again, once for two concurrent requests.
        for record in restored { #expect(try again.finish(record.id).code == .ok) }
        let ids = (again.makeRequestID(), again.makeRequestID())
        try again.connection.sendRaw(
            Frame.encode(body: ClientMessage.restore(requestID: ids.0, applicationUsername: nil).encode())
                + Frame.encode(body: ClientMessage.restore(requestID: ids.1, applicationUsername: nil).encode()))
        let replyA = try again.reply(to: ids.0)
        let replyB = try again.reply(to: ids.1)
        #expect(replyA.code == .ok && replyB.code == .ok)
        let unfinishedRestores = try daemon.transactions(["--unfinished"]).filter { $0.state == "restored" }
        #expect(unfinishedRestores.count == 2, "two pipelined restores are single-flight: \(unfinishedRestores)")
        #expect(try daemon.transactions().filter { $0.state == "restored" }.count == 4)
    }

    @Test func restoreWithNothingToRestoreStillFinishes() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let ledger = daemon.directory.file("ledger")

        let empty = try daemon.app(["restore"], ledger: ledger, timeout: appTimeout)
        #expect(empty.status == 0, "\(empty.stdout)\n\(empty.stderr)")
        #expect(events(empty.stdout).contains { $0["event"] as? String == "restoreFinished" }, "\(empty.stdout)")
        #expect(updates(empty.stdout).isEmpty)
        #expect(try daemon.transactions().isEmpty)

        // A consumable is never restored.
        let bought = try daemon.app(["buy", Sample.coins], ledger: ledger, timeout: appTimeout)
        #expect(bought.status == 0)
        let consumableOnly = try daemon.app(["restore"], ledger: ledger, timeout: appTimeout)
        #expect(consumableOnly.status == 0, "\(consumableOnly.stdout)\n\(consumableOnly.stderr)")
        #expect(events(consumableOnly.stdout).contains { $0["event"] as? String == "restoreFinished" })
        #expect(!updates(consumableOnly.stdout).contains { $0["state"] as? String == "restored" })
        #expect(try daemon.transactions().count == 1)

        // Over the protocol: an ok result and no update.
        let client = try Client(daemon)
        let reply = try client.restore()
        #expect(reply.code == .ok)
        #expect(reply.value == 0)
        #expect(reply.updated.isEmpty)
    }
}
