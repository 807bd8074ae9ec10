@testable import StoreKitPostgres
import Foundation
import StoreKitLedger
import StoreKitSQLite
import StoreKitTestSupport
import StoreKitWire
import Testing

private let app = "com.example.game"

/// The fleet's parts of the PostgreSQL ledger, two ledgers on one real database standing in for
/// two hosts: accounts, per-host queues, fleet-wide ids, notifications and catching up by sequence.
@Suite(.enabled(if: PostgresServer.unavailableReason == nil, Comment(rawValue: PostgresServer.unavailableReason ?? "")))
struct FleetLedgerTests {
    private func purchase(_ ledger: PostgresLedger, uid: UInt32, product: String = "com.example.game.level_pack",
                          state: TransactionState = .purchased) throws -> TransactionRecord {
        TransactionRecord(id: try ledger.allocateTransactionID(), uid: uid, app: app, productID: product, quantity: 1,
                          state: state, sequence: try ledger.nextSequence(uid: uid, app: app), date: 1_700_000_000_000)
    }

    @Test("a uid becomes its user name (or #UID), or #UID with AccountFrom=uid; an account with no local user gets a stand-in uid")
    func accounts() {
        let names = AccountDirectory(source: .userName)
        #expect(names.account(of: 0) == "root")
        #expect(names.uid(of: "root") == 0)
        #expect(names.account(of: 4_242_424) == "#4242424", "no such user: the uid")
        #expect(names.uid(of: "#4242424") == 4_242_424)
        let standIn = names.uid(of: "someone-only-elsewhere")
        #expect(AccountDirectory.standInUIDs.contains(standIn))
        #expect(names.account(of: standIn) == "someone-only-elsewhere", "the stand-in maps back")
        let uids = AccountDirectory(source: .uid)
        #expect(uids.account(of: 0) == "#0")
        #expect(uids.uid(of: "#1000") == 1000)
    }

    @Test("a version 1 ledger is migrated in place: rows belong to their uid's account and to this host, ids go on above")
    func version1IsMigrated() throws {
        let conninfo = try PostgresServer.shared().freshConnectionString(label: "v1")
        let old = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "old-host"), schemaVersion: 1)
        #expect(old.openReport == "created schema 1")
        try old.begin()
        // Version 1 has no fleet-wide ids: rows as its daemons wrote them.
        var written: [TransactionRecord] = []
        for (index, uid) in [UInt32(0), 4_242_424].enumerated() {
            let record = TransactionRecord(id: 2_000_000_000_000_001 + UInt64(index), uid: uid, app: app,
                                           productID: "com.example.game.level_pack", quantity: 1, state: .purchased,
                                           sequence: 1, date: 1_700_000_000_000)
            try old.connection.execute("""
                INSERT INTO transactions(id, uid, app, product, quantity, state, sequence, date, payment_key)
                VALUES($1, $2, $3, $4, 1, 2, 1, 1700000000000, $5)
                """, [String(record.id), String(uid), app, record.productID, "key-\(index)"])
            try old.connection.execute("INSERT INTO sequences(uid, app, last) VALUES($1, $2, 1)", [String(uid), app])
            written.append(record)
        }
        try old.commit()
        old.close()

        let ledger = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "old-host"))
        defer { ledger.close() }
        #expect(ledger.openReport == "migrated schema 1 → 2")
        let rows = try ledger.connection.execute("SELECT id, account, host FROM transactions ORDER BY id").rows
        #expect(rows == [[String(written[0].id), "root", "old-host"], [String(written[1].id), "#4242424", "old-host"]])
        #expect(try ledger.unfinished(uid: 0, app: app).map(\.id) == [written[0].id])
        #expect(try ledger.transaction(uid: 4_242_424, app: app, paymentKey: "key-1")?.id == written[1].id)
        try ledger.begin()
        #expect(try ledger.allocateTransactionID() > written[1].id)
        #expect(try ledger.nextSequence(uid: 0, app: app) == 2, "the account's sequence went on")
        ledger.rollback()
    }

    @Test("deleteTransaction deletes one transaction for every host, moves its queue's sequence (kept receipts are stale) and leaves the rest")
    func deleteOneTransaction() throws {
        let conninfo = try PostgresServer.shared().freshConnectionString(label: "delete")
        let a = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "a"))
        let b = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "b"))
        defer { a.close(); b.close() }
        try a.begin()
        let gone = try purchase(a, uid: 0)
        let stays = try purchase(a, uid: 0, product: "com.example.game.season_pass")
        try a.insert(gone)
        try a.insert(stays)
        try a.commit()
        let before = try a.lastSequence(uid: 0, app: app)
        try a.begin()
        #expect(try a.deleteTransaction(id: gone.id)?.id == gone.id)
        #expect(try a.deleteTransaction(id: gone.id) == nil)
        #expect(try a.deleteTransaction(id: 4_242_424_242) == nil)
        try a.commit()
        #expect(try a.transaction(id: gone.id) == nil && b.transaction(id: gone.id) == nil)
        #expect(try b.transaction(id: stays.id)?.id == stays.id)
        #expect(try a.lastSequence(uid: 0, app: app) > before)
    }

    @Test("two hosts take transaction ids from one fleet-wide sequence: never the same id, even in units rolled back")
    func idsAreFleetWide() throws {
        let conninfo = try PostgresServer.shared().freshConnectionString(label: "ids")
        let a = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "a"))
        let b = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "b"))
        defer { a.close(); b.close() }
        var seen = Set<UInt64>()
        for round in 0..<20 {
            for ledger in [a, b] {
                try ledger.begin()
                for _ in 0..<(round % 3 == 0 ? 70 : 5) { #expect(seen.insert(try ledger.allocateTransactionID()).inserted) }
                if round % 2 == 0 { try ledger.commit() } else { ledger.rollback() }
            }
        }
        #expect(seen.count > 1_000)
    }

    @Test("each host's queue holds its own transactions; the account's history on another host shows shared purchases only, finished there")
    func queuesArePerHost() throws {
        let conninfo = try PostgresServer.shared().freshConnectionString(label: "queues")
        let a = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "a"))
        let b = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "b"))
        defer { a.close(); b.close() }
        b.sharesAcrossHosts = { _, product in !product.hasSuffix("coins") }
        try a.begin()
        let pack = try purchase(a, uid: 0)
        try a.insert(pack)
        let coins = try purchase(a, uid: 0, product: "com.example.game.coins")
        try a.insert(coins)
        let deferred = try purchase(a, uid: 0, product: "com.example.game.season_pass", state: .deferred)
        try a.insert(deferred)
        try a.commit()

        #expect(try a.unfinished(uid: 0, app: app).map(\.id) == [pack.id, coins.id, deferred.id])
        #expect(try b.unfinished(uid: 0, app: app).isEmpty)
        #expect(try b.unfinishedCount() == 0 && a.unfinishedCount() == 3)
        let history = try b.all(uid: 0, app: app)
        #expect(history.map(\.id) == [pack.id], "A's consumable and deferred request are A's alone")
        #expect(history.first?.finished == true, "not in B's queue")
        #expect(try b.all(uid: 4_242_424, app: app).isEmpty, "another account sees none of it")
        #expect(try b.transaction(id: deferred.id)?.finished == false, "named by id, the request can be answered anywhere")
        try b.begin()
        #expect(try !b.markFinished(id: pack.id, sequence: b.nextSequence(uid: 0, app: app)), "B cannot finish A's transaction")
        try b.commit()
        #expect(try a.unfinished(uid: 0, app: app).count == 3)
    }

    @Test("a renewal is delivered to every host using the app, finished by each for itself")
    func renewalsAreDelivered() throws {
        let conninfo = try PostgresServer.shared().freshConnectionString(label: "renewals")
        let a = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "a"))
        let b = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "b"))
        let c = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "c"))
        defer { a.close(); b.close(); c.close() }
        for ledger in [a, b] {   // both hosts use the app; c does not
            try ledger.begin()
            _ = try ledger.unfinished(uid: 0, app: app)
            try ledger.commit()
        }
        try c.begin()   // fired by a daemon of the fleet that does not use the app itself
        var renewal = try purchase(c, uid: 0, product: "com.example.game.premium.monthly")
        renewal.originalID = 2_000_000_000_000_001   // bought on another host
        try c.insert(renewal)
        try c.markRenewal(transactionID: renewal.id)
        try c.commit()
        #expect(try a.unfinished(uid: 0, app: app).map(\.id) == [renewal.id])
        #expect(try b.unfinished(uid: 0, app: app).map(\.id) == [renewal.id])
        #expect(try c.unfinished(uid: 0, app: app).isEmpty)
        try a.begin()
        #expect(try a.markFinished(id: renewal.id, sequence: a.nextSequence(uid: 0, app: app)))
        try a.commit()
        #expect(try a.unfinished(uid: 0, app: app).isEmpty)
        #expect(try b.unfinished(uid: 0, app: app).map(\.id) == [renewal.id])
        #expect(try b.transaction(id: renewal.id)?.finished == false && a.transaction(id: renewal.id)?.finished == true)
    }

    @Test("a commit notifies the other hosts (LISTEN); they read what changed by sequence, once, never their own changes")
    func notificationsAndCatchingUp() throws {
        let conninfo = try PostgresServer.shared().freshConnectionString(label: "notify")
        let a = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "a"))
        let b = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "b"))
        defer { a.close(); b.close() }
        let listener = try FleetListener(ledger: b)
        defer { listener.close() }
        let queue = QueueKey(uid: 0, app: app)
        try b.begin()
        #expect(try b.changesElsewhere(of: [queue]).transactions.isEmpty)
        let asked = try purchase(b, uid: 0, state: .deferred)
        try b.insert(asked)
        _ = try b.unfinished(uid: 0, app: app)   // watched from here on
        try b.commit()

        try a.begin()   // A approves B's request
        #expect(try a.transition(id: asked.id, from: .deferred, to: .purchased, sequence: a.nextSequence(uid: 0, app: app),
                                 date: 1_700_000_000_001, errorCode: nil, errorMessage: nil, expiresDate: nil, originalID: nil))
        try a.commit()
        // Heard over LISTEN (generous: the machine may be busy).
        #expect(eventually(timeout: 30) { listener.receive() }, "A's commit was heard")
        try b.begin()
        let changes = try b.changesElsewhere(of: [queue]).transactions
        #expect(changes.map(\.id) == [asked.id] && changes.first?.state == .purchased && changes.first?.finished == false)
        #expect(try b.changesElsewhere(of: [queue]).transactions.isEmpty, "once")
        // B's own change is not told back to B, nor heard as another's.
        #expect(try b.markFinished(id: asked.id, sequence: b.nextSequence(uid: 0, app: app)))
        try b.commit()
        // B's own notification names B: the listener does not count it as another's.
        #expect(!b.noteNotification("b\n" + PostgresLedger.queueName(b.account(of: 0), app)))
        // A marker from A, committed after B's finish, is heard after B's own notification
        // (NOTIFY is delivered in commit order): once it is, B's own has been read too, and
        // what B reads as changed elsewhere is the marker alone, not its own finish.
        try a.begin()
        let marker = try purchase(a, uid: 0, product: "com.example.game.season_pass")
        try a.insert(marker)
        try a.commit()
        #expect(eventually(timeout: 30) { listener.receive() }, "A's marker was heard")
        try b.begin()
        #expect(try b.changesElsewhere(of: [queue]).transactions.map(\.id) == [marker.id])
        b.rollback()
    }

    @Test("a unit of work that read others' changes and rolled back leaves them to be read again")
    func rolledBackCatchUpIsReadAgain() throws {
        let conninfo = try PostgresServer.shared().freshConnectionString(label: "again")
        let a = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "a"))
        let b = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "b"))
        defer { a.close(); b.close() }
        let queue = QueueKey(uid: 0, app: app)
        try b.begin()
        _ = try b.unfinished(uid: 0, app: app)
        try b.commit()
        try a.begin()
        let renewal = try purchase(a, uid: 0)
        try a.insert(renewal)
        try a.markRenewal(transactionID: renewal.id)
        try a.commit()
        #expect(b.noteNotification("a\n" + PostgresLedger.queueName("root", app)))
        try b.begin()
        #expect(try b.changesElsewhere(of: [queue]).transactions.map(\.id) == [renewal.id])
        b.rollback()
        try b.begin()
        #expect(try b.changesElsewhere(of: [queue]).transactions.map(\.id) == [renewal.id], "read again after the rollback")
        try b.commit()
    }

    @Test("a queue with no observer here, named by another host's change and holding work here, is said to be waiting")
    func unobservedQueuesWithWorkAreWaiting() throws {
        let conninfo = try PostgresServer.shared().freshConnectionString(label: "waiting")
        let a = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "a"))
        let b = try PostgresLedger(conninfo: conninfo, member: FleetMember(host: "b"))
        defer { a.close(); b.close() }
        try b.begin()
        _ = try b.unfinished(uid: 0, app: app)   // B's app ran once: B uses the app
        try b.commit()
        try b.begin()
        _ = try b.changesElsewhere(of: [])       // and its observer went away
        try b.commit()
        try a.begin()
        var renewal = try purchase(a, uid: 0)
        renewal.originalID = 2_000_000_000_000_001
        try a.insert(renewal)
        try a.markRenewal(transactionID: renewal.id)
        try a.commit()
        #expect(b.noteNotification("a\n" + PostgresLedger.queueName("root", app)))
        try b.begin()
        let changes = try b.changesElsewhere(of: [])
        #expect(changes.transactions.isEmpty, "nobody observes it here")
        #expect(changes.waiting == [QueueKey(uid: 0, app: app)], "the renewal waits in B's queue")
        #expect(try b.changesElsewhere(of: []).waiting.isEmpty, "said once per change")
        try b.commit()
    }
}
