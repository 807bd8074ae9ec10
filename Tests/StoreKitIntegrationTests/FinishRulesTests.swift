import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing

/// Who may finish what: only finishable states, only one's own (uid, app) queue.
@Suite struct FinishRulesTests {
    /// Writes rows straight into the stopped daemon's database (no public way to park a
    /// transaction in `purchasing` or `deferred` yet).
    static func insert(_ daemon: DaemonProcess, rows: [(id: UInt64, uid: UInt32, app: String, state: Int, sequence: Int)]) throws {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        var sql = "BEGIN;"
        for row in rows {
            sql += """
                INSERT INTO transactions(id, original_id, uid, app, product, quantity, state, sequence, date, finished)
                VALUES (\(row.id), NULL, \(row.uid), '\(row.app)', '\(Sample.levelPack)', 1, \(row.state), \(row.sequence), \(now), 0);
                INSERT INTO sequences(uid, app, last) VALUES (\(row.uid), '\(row.app)', \(row.sequence))
                  ON CONFLICT(uid, app) DO UPDATE SET last = max(last, excluded.last);
                """
        }
        sql += "COMMIT;"
        let result = try ProcessRunner.run("/usr/bin/sqlite3", [daemon.databasePath, sql])
        guard result.status == 0 else { throw IntegrationFailure("sqlite3 failed: \(result.stderr)") }
    }

    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func finishingPurchasingOrDeferredIsRefused() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()   // creates the schema
        #expect(daemon.stop() == 0)
        let purchasing: UInt64 = 2_000_000_000_000_500
        let deferred: UInt64 = 2_000_000_000_000_501
        try Self.insert(daemon, rows: [(purchasing, 0, Sample.app, 0, 1), (deferred, 0, Sample.app, 4, 2)])
        try daemon.start()

        let client = try Client(daemon)
        let snapshot = try client.subscribe()
        #expect(snapshot.map(\.id) == [purchasing, deferred], "unfinished rows are delivered")
        #expect(snapshot.map(\.state) == [.purchasing, .deferred])

        let refusedPurchasing = try client.finish(purchasing)
        #expect(refusedPurchasing.code == .notFinishable, "\(refusedPurchasing.code.name) \(refusedPurchasing.message)")
        #expect(refusedPurchasing.removed.isEmpty)
        let refusedDeferred = try client.finish(deferred)
        #expect(refusedDeferred.code == .notFinishable, "\(refusedDeferred.code.name) \(refusedDeferred.message)")
        #expect(refusedDeferred.removed.isEmpty)

        // Still in the queue, in the same states, also after a restart.
        daemon.kill()
        try daemon.start()
        let listed = try daemon.transactions(["--unfinished"])
        #expect(listed.map(\.id) == [String(purchasing), String(deferred)])
        #expect(listed.map(\.state) == ["purchasing", "deferred"])
        #expect(try Client(daemon).subscribe().map(\.id) == [purchasing, deferred])

        // A purchased one next to them can be finished: the refusal is about the state.
        let other = try Client(daemon)
        _ = try other.subscribe()
        let bought = try other.buy(Sample.coins)
        #expect(try other.finish(bought.id).code == .ok)
    }

    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func finishingAnotherQueuesOrAnUnknownTransactionIsNotFound() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        // A second app on the same catalogue.
        try daemon.directory.write("config/apps.d/com.example.other.conf",
                                   "[App]\nID=com.example.other\nCatalog=catalog/example.storekit\n")
        try daemon.start()

        let mine = try daemon.buyOutsideApp(Sample.levelPack)
        let otherUID = try daemon.buyOutsideApp(Sample.levelPack, uid: 1000)
        let otherApp = try daemon.buyOutsideApp(Sample.levelPack, app: "com.example.other")
        let mineID = try #require(UInt64(mine.id))

        let client = try Client(daemon)
        #expect(client.uid == 0)
        for (label, id) in [("another uid's", otherUID.id), ("another app's", otherApp.id), ("an unknown", "2999999999999999")] {
            let reply = try client.finish(try #require(UInt64(id)))
            #expect(reply.code == .transactionNotFound, "finishing \(label) transaction: \(reply.code.name) \(reply.message)")
        }
        #expect(try client.finish(0).code == .transactionNotFound)

        // The same uid connected as the other app cannot finish this app's transaction either.
        let asOtherApp = try Client(daemon, app: "com.example.other")
        #expect(try asOtherApp.finish(mineID).code == .transactionNotFound)

        let unfinished = try daemon.transactions(["--unfinished"])
        #expect(Set(unfinished.map(\.id)) == [mine.id, otherUID.id, otherApp.id], "nothing was finished")

        // The owner can.
        #expect(try client.finish(mineID).code == .ok)
        #expect(Set(try daemon.transactions(["--unfinished"]).map(\.id)) == [otherUID.id, otherApp.id])
    }
}
