import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing

/// At-least-once delivery: an unfinished transaction comes back on every registration, across
/// reconnects and a kill -9 of the daemon, until it is finished; then never again.
@Suite struct RedeliveryTests {
    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func unfinishedTransactionIsRedeliveredUntilFinished() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()

        // A purchase made outside the app for this test's uid (root: 0), left unfinished.
        let bought = try daemon.buyOutsideApp(Sample.levelPack, uid: 0)
        #expect(bought.state == "purchased")
        #expect(!bought.finished)
        let id = try #require(UInt64(bought.id))

        let first = try Client(daemon)
        #expect(first.uid == 0)
        #expect(try first.subscribe().map(\.id) == [id], "delivered on subscribe")
        first.close()

        let second = try Client(daemon)
        let redelivered = try second.subscribe()
        #expect(redelivered.map(\.id) == [id], "delivered again after reconnecting")
        #expect(redelivered.first?.state == .purchased)
        #expect(redelivered.first?.productID == Sample.levelPack)
        second.close()

        daemon.kill()
        try daemon.start()
        let afterCrash = try Client(daemon)
        #expect(try afterCrash.subscribe().map(\.id) == [id], "delivered again after kill -9 and restart")

        let finish = try afterCrash.finish(id)
        #expect(finish.code == .ok, "\(finish.message)")
        #expect(finish.removed.map(\.id) == [id])
        // Finishing again is a no-op success, and nothing is removed twice.
        let again = try afterCrash.finish(id)
        #expect(again.code == .ok, "\(again.message)")
        #expect(again.removed.isEmpty)
        afterCrash.close()

        #expect(try Client(daemon).subscribe().isEmpty, "a finished transaction is not delivered again")
        daemon.kill()
        try daemon.start()
        #expect(try Client(daemon).subscribe().isEmpty, "nor after a kill -9 and restart")
        let listed = try daemon.transactions()
        #expect(listed.map(\.id) == [bought.id])
        #expect(listed.first?.finished == true, "the finish survived the kill")
        // Idempotent after a restart too.
        #expect(try Client(daemon).finish(id).code == .ok)
    }

    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func sequenceNumbersIncreasePerQueueAcrossRestarts() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()

        let a = try daemon.buyOutsideApp(Sample.coins)
        let b = try daemon.buyOutsideApp(Sample.levelPack)
        #expect(a.sequence < b.sequence)
        let client = try Client(daemon)
        let snapshot = try client.subscribe()
        #expect(snapshot.map(\.id) == [UInt64(a.id), UInt64(b.id)].compactMap { $0 })
        #expect(snapshot.map(\.sequence) == [UInt64(a.sequence), UInt64(b.sequence)])

        let finish = try client.finish(try #require(UInt64(a.id)))
        let finishSequence = try #require(finish.removed.first?.sequence)
        #expect(finishSequence > UInt64(b.sequence))
        client.close()

        // Another uid's queue does not disturb this one's order.
        _ = try daemon.buyOutsideApp(Sample.coins, uid: 1000)

        daemon.kill()
        try daemon.start()
        let c = try daemon.buyOutsideApp(Sample.coins)
        #expect(UInt64(c.sequence) > finishSequence, "sequence numbers keep growing after a kill -9")

        let next = try Client(daemon)
        _ = try next.subscribe()
        let purchase = try next.addPayment(Sample.seasonPass)
        let sequences = purchase.updated.map(\.sequence)
        try #require(sequences.count == 2)
        #expect(sequences[0] > UInt64(c.sequence) && sequences[1] > sequences[0])

        // Each update of the queue, in the order observed, has a strictly larger number.
        let all = try daemon.transactions(["--uid", "0"]).map(\.sequence)
        #expect(Set(all).count == all.count, "no two transactions of a queue share a sequence number")
    }

    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func exampleAppObserverGrantsEachTransactionOnce() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let ledger = daemon.directory.file("ledger")

        let a = try daemon.buyOutsideApp(Sample.coins)
        let b = try daemon.buyOutsideApp(Sample.levelPack)

        func observe() throws -> RunningProcess {
            try RunningProcess(Paths.binary("storekit-example-app"), ["--ledger", ledger, "observe"],
                               environment: daemon.clientEnvironment)
        }
        func grants(_ output: String) -> [String] {
            updates(output).filter { $0["granted"] as? Bool == true }.compactMap { $0["transactionIdentifier"] as? String }
        }

        let first = try observe()
        #expect(first.waitForOutput { Set(grants($0)).isSuperset(of: [a.id, b.id]) },
                "observe did not grant both: \(first.output)\n\(first.errorOutput)")
        #expect(first.process.isRunning, "observe runs until it is stopped")
        first.stop()
        #expect(ledgerIDs(ledger).sorted() == [a.id, b.id].sorted(), "each transaction granted exactly once")

        // A second run: whatever is redelivered is not granted again. A new purchase made while it
        // runs is the sync point: it comes after any redelivery of a and b.
        let second = try observe()
        let c = try daemon.buyOutsideApp(Sample.coins)
        #expect(second.waitForOutput { grants($0).contains(c.id) }, "\(second.output)\n\(second.errorOutput)")
        #expect(!grants(second.output).contains(a.id) && !grants(second.output).contains(b.id))
        #expect(eventually { (try? daemon.transactions(["--unfinished"]).isEmpty) == true },
                "observe finishes what it granted")
        second.stop()
        #expect(ledgerIDs(ledger).sorted() == [a.id, b.id, c.id].sorted())
    }

    /// Two instances of one app for one user (its observer, and a `buy` run beside it), as in
    /// test-system's step f: both receive each purchase and race to grant and finish it. Each buy
    /// succeeds, whichever instance wins; each transaction is granted once in the shared ledger; an
    /// instance that finds its receipt no longer listing a transaction the other one finished takes
    /// the ledger's word for it instead of refusing it.
    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func secondInstanceBuysBesideTheObserver() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let ledger = daemon.directory.file("ledger")
        let app = Paths.binary("storekit-example-app")

        let observer = try daemon.observer(ledger: ledger)
        defer { observer.stop() }

        var bought: [String] = []
        for round in 0..<12 {
            let product = round % 3 == 0 ? Sample.levelPack : Sample.coins
            let buy = try ProcessRunner.run(app, ["--ledger", ledger, "buy", product],
                                            environment: daemon.clientEnvironment, timeout: 30)
            // Its own purchase, as it names it when it exits (the level pack's content may be
            // downloaded, granted and finished by the observer first).
            let done = events(buy.stdout).first { $0["event"] as? String == "purchaseDone" }
            #expect(buy.status == 0, "round \(round): buy exited \(buy.status)\n\(buy.stdout)\n\(buy.stderr)")
            let id = try #require(done?["transactionIdentifier"] as? String,
                                  "round \(round): no purchaseDone\n\(buy.stdout)\n\(buy.stderr)")
            bought.append(id)
        }
        #expect(eventually { (try? daemon.transactions(["--unfinished"]).isEmpty) == true }, "every purchase is finished")
        let granted = ledgerIDs(ledger)
        #expect(granted.sorted() == bought.sorted(), "each purchase granted exactly once, by one of the two instances")
    }

    /// A ledger whose last line was cut short (a full disk, a crash mid-write): the next grant
    /// starts on a line of its own, so neither id is mistaken for another.
    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func grantAfterTornLedgerLineStartsOnItsOwnLine() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let ledger = daemon.directory.file("ledger")
        try "12".write(toFile: ledger, atomically: true, encoding: .utf8)
        let bought = try daemon.buyOutsideApp(Sample.levelPack)
        let observer = try daemon.observer(ledger: ledger)
        defer { observer.stop() }
        #expect(observer.waitForOutput { output in
            updates(output).contains { $0["transactionIdentifier"] as? String == bought.id && $0["granted"] as? Bool == true }
        }, "\(observer.output)\n\(observer.errorOutput)")
        #expect(ledgerIDs(ledger) == ["12", bought.id])
    }

    /// The app crashed after granting but before finishing: the redelivery is finished, not granted.
    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func redeliveryAfterGrantIsFinishedWithoutGrantingAgain() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let ledger = daemon.directory.file("ledger")

        let bought = try daemon.buyOutsideApp(Sample.levelPack)
        try "\(bought.id) \(Sample.levelPack) 1\n".write(toFile: ledger, atomically: true, encoding: .utf8)

        let observer = try RunningProcess(Paths.binary("storekit-example-app"), ["--ledger", ledger, "observe"],
                                          environment: daemon.clientEnvironment)
        #expect(observer.waitForOutput { output in
            updates(output).contains { $0["transactionIdentifier"] as? String == bought.id }
        }, "\(observer.output)\n\(observer.errorOutput)")
        let delivered = updates(observer.output).filter { $0["transactionIdentifier"] as? String == bought.id }
        #expect(delivered.count == 1)
        #expect(delivered.first?["granted"] as? Bool == false)
        #expect(eventually { (try? daemon.transactions(["--unfinished"]).isEmpty) == true },
                "the redelivered transaction is finished")
        observer.stop()
        #expect(ledgerIDs(ledger) == [bought.id])
    }
}
