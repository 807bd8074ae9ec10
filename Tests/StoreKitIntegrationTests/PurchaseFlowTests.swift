import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing

/// A purchase from payment to removal, over the raw protocol and through the real example app.
@Suite struct PurchaseFlowTests {
    @Test("a daemon on SQLite loads neither libpq and the libraries it needs nor Foundation beyond FoundationEssentials")
    func sqliteDaemonLoadsNoMoreThanItUses() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let buyer = try Client(daemon)
        #expect(try buyer.subscribe().isEmpty)
        #expect(try buyer.addPayment(Sample.coins).code == .ok)
        let mapped = try daemon.mappedFiles()
        #expect(mapped.contains { $0.contains("/libsqlite3.so") }, "\(mapped.sorted())")
        for library in ["/libpq.so", "/libldap", "/libgssapi_krb5", "/libgnutls",
                        "/libFoundation.so", "/libFoundationInternationalization.so", "/lib_FoundationICU.so"] {
            #expect(!mapped.contains { $0.contains(library) }, "\(library) is mapped")
        }
    }

    @Test func purchaseIsPushedAsPurchasingThenPurchasedAndFinishRemovesIt() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()

        let buyer = try Client(daemon)
        #expect(try buyer.subscribe().isEmpty)
        // A second observer of the same (uid, app) must see every change too.
        let other = try Client(daemon)
        #expect(try other.subscribe().isEmpty)

        let reply = try buyer.addPayment(Sample.coins, quantity: 2)
        #expect(reply.code == .ok, "\(reply.message)")
        let updates = reply.updated
        try #require(updates.count == 2, "pushes: \(reply.pushes)")
        #expect(updates[0].state == .purchasing)
        #expect(updates[1].state == .purchased)
        #expect(updates[0].id == updates[1].id)
        #expect(reply.value == updates[1].id, "the result carries the transaction id")
        #expect(updates[0].sequence < updates[1].sequence)
        #expect(updates[1].productID == Sample.coins)
        #expect(updates[1].quantity == 2)
        #expect(updates[1].uid == buyer.uid)
        #expect(updates[1].app == Sample.app)
        #expect(!updates[1].finished)
        let id = updates[1].id

        // The other observer got the same two updates, in order.
        guard case .updated(let first) = try other.nextPush(), case .updated(let second) = try other.nextPush() else {
            Issue.record("the second observer did not get two updates")
            return
        }
        #expect(first.map(\.state) == [.purchasing] && first.map(\.id) == [id])
        #expect(second.map(\.state) == [.purchased] && second.map(\.id) == [id])

        // Before the finish the control plane lists it as unfinished.
        let before = try daemon.transactions(["--unfinished"])
        #expect(before.map(\.id) == [String(id)])
        #expect(before.first?.state == "purchased")

        let finish = try buyer.finish(id)
        #expect(finish.code == .ok, "\(finish.message)")
        #expect(finish.removed.map(\.id) == [id], "pushes: \(finish.pushes)")
        #expect(finish.removed.first?.finished == true)
        #expect((finish.removed.first?.sequence ?? 0) > updates[1].sequence)
        guard case .removed(let removed) = try other.nextPush() else {
            Issue.record("the second observer did not get removedTransactions")
            return
        }
        #expect(removed.map(\.id) == [id])

        let listed = try daemon.transactions()
        #expect(listed.count == 1)
        #expect(listed.first?.id == String(id))
        #expect(listed.first?.state == "purchased")
        #expect(listed.first?.finished == true)
        #expect(listed.first?.quantity == 2)
        #expect(try daemon.transactions(["--unfinished"]).isEmpty)
    }

    @Test func exampleAppBuyGrantsOnceAndFinishes() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let ledger = daemon.directory.file("ledger")

        let result = try daemon.app(["buy", Sample.levelPack], ledger: ledger, timeout: appTimeout)
        #expect(result.status == 0, "stdout: \(result.stdout)\nstderr: \(result.stderr)")

        let listed = try daemon.transactions()
        try #require(listed.count == 1, "\(listed)")
        let transaction = listed[0]
        #expect(transaction.productIdentifier == Sample.levelPack)
        #expect(transaction.state == "purchased")
        #expect(transaction.finished)
        #expect(transaction.uid == Int(getuid()), "bought by the uid the app runs as")
        #expect(ledgerIDs(ledger) == [transaction.id], "the ledger has exactly one line, for this purchase")

        // The observer saw the transaction in `purchasing`, then once in `purchased`.
        let states = updates(result.stdout).filter { $0["transactionIdentifier"] as? String == transaction.id }
            .compactMap { $0["state"] as? String }
        #expect(states == ["purchasing", "purchased"], "\(result.stdout)")
        let purchased = updates(result.stdout).filter { $0["state"] as? String == "purchased" }
        #expect(purchased.count == 1)
        #expect(purchased.first?["transactionIdentifier"] as? String == transaction.id)
        #expect(purchased.first?["granted"] as? Bool == true)
    }

    /// Refused payments: the SKError code, exit status 1, and no transaction in the queue.
    @Test(arguments: [
        (["buy", "com.example.game.no_such_product"], 5),
        (["--quantity", "0", "buy", Sample.coins], 3),
        (["--quantity", "11", "buy", Sample.coins], 3),
    ])
    func exampleAppRefusedPaymentFails(arguments: [String], code: Int) throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let ledger = daemon.directory.file("ledger")

        let result = try daemon.app(arguments, ledger: ledger, timeout: appTimeout)
        #expect(result.status == 1, "stdout: \(result.stdout)\nstderr: \(result.stderr)")
        let failed = updates(result.stdout).filter { $0["state"] as? String == "failed" }
        #expect(failed.count == 1, "\(result.stdout)")
        #expect((failed.first?["error"] as? [String: Any])?["code"] as? Int == code)
        #expect(try daemon.transactions().isEmpty, "a refused payment creates no transaction")
        #expect(ledgerIDs(ledger).isEmpty)
    }

    @Test func refusedPaymentsCarryTheSKErrorCodeAndCreateNothing() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let client = try Client(daemon)
        _ = try client.subscribe()

        let cases: [(product: String, quantity: Int32, requestData: Bool, code: StoreKitErrorCode)] = [
            ("com.example.game.no_such_product", 1, false, .storeProductNotAvailable),
            (Sample.coins, 0, false, .paymentInvalid),
            (Sample.coins, 11, false, .paymentInvalid),
            (Sample.coins, -1, false, .paymentInvalid),
            (Sample.coins, 1, true, .unauthorizedRequestData),
        ]
        for item in cases {
            let reply = try client.addPayment(item.product, quantity: item.quantity, hasRequestData: item.requestData)
            #expect(reply.code == .storeKit, "\(item): \(reply.code.name) \(reply.message)")
            #expect(reply.detail == item.code.rawValue, "\(item)")
            #expect(reply.updated.isEmpty, "a refused payment is never pushed: \(reply.pushes)")
        }
        // The edges of the legal range are accepted.
        #expect(try client.addPayment(Sample.coins, quantity: 1).code == .ok)
        #expect(try client.addPayment(Sample.coins, quantity: 10).code == .ok)
        #expect(try daemon.transactions().map(\.quantity).sorted() == [1, 10])
    }

    @Test func sameIdempotencyKeyMakesOneTransaction() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let client = try Client(daemon)

        let first = try client.addPayment(Sample.coins, key: "retry-key-1")
        let second = try client.addPayment(Sample.coins, key: "retry-key-1")
        #expect(first.code == .ok && second.code == .ok)
        #expect(first.value != 0)
        #expect(second.value == first.value, "a retried payment answers with the first transaction's id")

        // Also across connections and a daemon restart: the key is durable.
        client.close()
        daemon.kill()
        try daemon.start()
        let again = try Client(daemon).addPayment(Sample.coins, key: "retry-key-1")
        #expect(again.code == .ok)
        #expect(again.value == first.value)

        // Another key is another purchase.
        let third = try Client(daemon).addPayment(Sample.coins, key: "retry-key-2")
        #expect(third.code == .ok)
        #expect(third.value != first.value)

        let listed = try daemon.transactions()
        #expect(listed.map(\.id).sorted() == [String(first.value), String(third.value)].sorted())
    }
}
