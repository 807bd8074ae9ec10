@testable import StoreKitPostgres
import StoreKitLedger
import StoreKitTestSupport
import StoreKitWire
import Testing

private let app = "com.example.readahead"
private let uid: UInt32 = 1000
private let queue = QueueKey(uid: uid, app: app)

private func purchase(_ ledger: PostgresLedger, sequence: UInt64) throws -> TransactionRecord {
    TransactionRecord(id: try ledger.allocateTransactionID(), uid: uid, app: app, productID: "com.example.readahead.coins",
                      quantity: 1, state: .purchased, sequence: sequence, date: 1_700_000_000_000)
}

/// A unit of work that reads ahead (`begin(readingAhead:)`, what the daemon does for its
/// payments and finishes on PostgreSQL): the same answers and rows as one that asks as it goes,
/// in three round trips whatever it holds, and still right when another connection races it or a
/// request is undone.
@Suite(.enabled(if: PostgresServer.unavailableReason == nil, Comment(rawValue: PostgresServer.unavailableReason ?? "")))
struct ReadAheadTests {
    /// A key with what an array literal must quote: quotes, a backslash, a comma, braces, a space.
    static let awkwardKey = "k2 \"quoted\" \\ {x,y}"

    @Test("payments and finishes read ahead: the answers and rows of a unit that asks as it goes, in three round trips (read, writes, COMMIT)")
    func answersFromOneRoundTrip() throws {
        let ledger = try PostgresLedger(conninfo: try PostgresServer.shared().freshConnectionString(label: "readahead"))
        defer { ledger.close() }
        // Before: one unfinished purchase with the payment key "k1".
        try ledger.begin()
        let first = try purchase(ledger, sequence: try ledger.nextSequence(uid: uid, app: app))
        try ledger.insert(first, paymentKey: "k1")
        try ledger.commit()
        let lastBefore = try ledger.lastSequence(uid: uid, app: app)

        let roundTrips = ledger.connection.roundTrips
        try ledger.begin(readingAhead: ReadAhead(payments: [.init(queue: queue, key: "k1"), .init(queue: queue, key: Self.awkwardKey)],
                                                 finishes: [.init(queue: queue, transactionID: first.id)]))
        #expect(try ledger.transaction(uid: uid, app: app, paymentKey: "k1") == first)
        #expect(try ledger.transaction(uid: uid, app: app, paymentKey: Self.awkwardKey) == nil)
        #expect(try ledger.unfinishedCount(of: queue) == 1)
        let sequence = try ledger.nextSequence(uid: uid, app: app)
        #expect(sequence == lastBefore + 1)
        #expect(try ledger.lastSequence(uid: uid, app: app) == sequence)
        let second = try purchase(ledger, sequence: sequence)
        try ledger.insert(second, paymentKey: Self.awkwardKey)
        #expect(try ledger.transaction(uid: uid, app: app, paymentKey: Self.awkwardKey) == second, "a second payment with the key finds it")
        #expect(try ledger.unfinishedCount(of: queue) == 2)
        #expect(try ledger.transaction(id: first.id) == first)
        let finishing = try ledger.nextSequence(uid: uid, app: app)
        #expect(try ledger.markFinished(id: first.id, sequence: finishing, of: queue))
        #expect(try ledger.markFinished(id: first.id, sequence: finishing, of: queue) == false, "finished once")
        #expect(try ledger.transaction(id: first.id)?.finished == true)
        #expect(try ledger.unfinishedCount(of: queue) == 1)
        #expect(ledger.connection.roundTrips - roundTrips == 1, "everything so far from the read ahead")
        try ledger.flushWrites()
        try ledger.commit()
        #expect(ledger.connection.roundTrips - roundTrips == 3)

        // What landed, read as a unit that does not read ahead reads it.
        try ledger.begin()
        #expect(try ledger.transaction(id: first.id)?.finished == true)
        #expect(try ledger.transaction(id: first.id)?.sequence == finishing)
        #expect(try ledger.transaction(uid: uid, app: app, paymentKey: Self.awkwardKey) == second)
        #expect(try ledger.unfinishedCount(of: queue) == 1)
        #expect(try ledger.lastSequence(uid: uid, app: app) == finishing)
        #expect(try ledger.nextSequence(uid: uid, app: app) == finishing + 1)
        ledger.rollback()
    }

    @Test("a payment key another connection commits after the read ahead: the deferred insert fails at flushWrites, and the unit run again finds the other's row")
    func racedPaymentKey() throws {
        let conninfo = try PostgresServer.shared().freshConnectionString(label: "readahead_race")
        let ledger = try PostgresLedger(conninfo: conninfo)
        defer { ledger.close() }
        let other = try PostgresLedger(conninfo: conninfo)
        defer { other.close() }
        let plan = ReadAhead(payments: [.init(queue: queue, key: "race")])

        try ledger.begin(readingAhead: plan)
        #expect(try ledger.transaction(uid: uid, app: app, paymentKey: "race") == nil)
        try other.begin()
        let theirs = try purchase(other, sequence: try other.nextSequence(uid: uid, app: app))
        try other.insert(theirs, paymentKey: "race")
        // `other` waits for nothing of ours: the queue had no sequence row to lock yet.
        try other.commit()
        let ours = try purchase(ledger, sequence: try ledger.nextSequence(uid: uid, app: app))
        try ledger.insert(ours, paymentKey: "race")
        #expect {
            try ledger.flushWrites()
        } throws: { error in
            (error as? LedgerError)?.code == .other(PostgresConnection.uniqueViolation)
        }
        ledger.rollback()

        try ledger.begin(readingAhead: plan)
        #expect(try ledger.transaction(uid: uid, app: app, paymentKey: "race") == theirs)
        try ledger.commit()
    }

    @Test("a request undone in its savepoint: its sequence numbers are given again (no gap), what it wrote is not read, a failing request fails at its own release")
    func savepointUndone() throws {
        let ledger = try PostgresLedger(conninfo: try PostgresServer.shared().freshConnectionString(label: "readahead_savepoint"))
        defer { ledger.close() }
        try ledger.begin()
        let first = try purchase(ledger, sequence: try ledger.nextSequence(uid: uid, app: app))
        try ledger.insert(first, paymentKey: "kept")
        try ledger.commit()
        let last = try ledger.lastSequence(uid: uid, app: app)

        try ledger.begin(readingAhead: ReadAhead(payments: [.init(queue: queue, key: "undone"), .init(queue: queue, key: "kept")]))
        try ledger.savepoint()
        let undone = try purchase(ledger, sequence: try ledger.nextSequence(uid: uid, app: app))
        try ledger.insert(undone, paymentKey: "undone")
        ledger.rollbackToSavepoint()
        #expect(try ledger.transaction(uid: uid, app: app, paymentKey: "undone") == nil)
        #expect(try ledger.unfinishedCount(of: queue) == 1)

        // A request whose insert fails (its id is taken): the failure comes at its release, and
        // its savepoint undoes it; the next request's is its own.
        try ledger.savepoint()
        var duplicate = try purchase(ledger, sequence: try ledger.nextSequence(uid: uid, app: app))
        duplicate.id = first.id
        try ledger.insert(duplicate, paymentKey: "other")
        #expect(throws: LedgerError.self) { try ledger.releaseSavepoint() }
        ledger.rollbackToSavepoint()

        try ledger.savepoint()
        let sequence = try ledger.nextSequence(uid: uid, app: app)
        #expect(sequence == last + 1, "the undone requests' numbers are given again")
        try ledger.insert(try purchase(ledger, sequence: sequence), paymentKey: "next")
        try ledger.releaseSavepoint()
        try ledger.commit()

        try ledger.begin()
        #expect(try ledger.lastSequence(uid: uid, app: app) == last + 1)
        #expect(try ledger.transaction(uid: uid, app: app, paymentKey: "undone") == nil)
        #expect(try ledger.transaction(uid: uid, app: app, paymentKey: "next")?.sequence == last + 1)
        #expect(try ledger.unfinishedCount(of: queue) == 2)
        ledger.rollback()
    }

    @Test("what a unit read ahead to write stays locked until it ends: another connection's change of the transaction or the queue's sequence waits")
    func readRowsLocked() throws {
        let conninfo = try PostgresServer.shared().freshConnectionString(label: "readahead_locks")
        let ledger = try PostgresLedger(conninfo: conninfo)
        defer { ledger.close() }
        try ledger.begin()
        let first = try purchase(ledger, sequence: try ledger.nextSequence(uid: uid, app: app))
        try ledger.insert(first)
        try ledger.commit()

        let other = try PostgresConnection(conninfo: conninfo)
        defer { other.close() }
        try other.execute("SET lock_timeout = '200ms'")
        try ledger.begin(readingAhead: ReadAhead(finishes: [.init(queue: queue, transactionID: first.id)]))
        for sql in ["UPDATE transactions SET revocation_date = 1 WHERE id = \(first.id)",
                    "UPDATE sequences SET last = last + 1 WHERE app = '\(app)'"] {
            #expect(Comment(rawValue: sql)) {
                try other.execute(sql)
            } throws: { error in
                (error as? LedgerError)?.code == .busy
            }
        }
        #expect(try ledger.markFinished(id: first.id, sequence: try ledger.nextSequence(uid: uid, app: app), of: queue))
        try ledger.flushWrites()
        try ledger.commit()
        #expect(try other.execute("UPDATE transactions SET revocation_date = 1 WHERE id = \(first.id)").changed == 1)
    }

    @Test("a queue's own unfinished count is read once and then follows this host's units (read ahead or not, rolled back or not); other hosts' deliveries are counted each time")
    func ownCountsFollowUnits() throws {
        let conninfo = try PostgresServer.shared().freshConnectionString(label: "readahead_counts")
        let ledger = try PostgresLedger(conninfo: conninfo)
        defer { ledger.close() }
        let plan = ReadAhead(payments: [.init(queue: queue, key: nil)])
        try ledger.begin()
        let first = try purchase(ledger, sequence: try ledger.nextSequence(uid: uid, app: app))
        try ledger.insert(first)
        try ledger.commit()

        try ledger.begin(readingAhead: plan)
        #expect(try ledger.unfinishedCount(of: queue) == 1)
        try ledger.commit()
        // A unit without a read ahead adds one; a rolled-back one adds nothing; a finish read
        // ahead takes one away.
        try ledger.begin()
        try ledger.insert(try purchase(ledger, sequence: try ledger.nextSequence(uid: uid, app: app)))
        try ledger.commit()
        try ledger.begin()
        try ledger.insert(try purchase(ledger, sequence: try ledger.nextSequence(uid: uid, app: app)))
        ledger.rollback()
        try ledger.begin(readingAhead: ReadAhead(finishes: [.init(queue: queue, transactionID: first.id)]))
        #expect(try ledger.markFinished(id: first.id, sequence: try ledger.nextSequence(uid: uid, app: app), of: queue))
        try ledger.flushWrites()
        try ledger.commit()

        // A row of this host's written behind its back (no host does): the count read ahead is
        // the one this host followed, not counted again; an exact count sees the row.
        let other = try PostgresConnection(conninfo: conninfo)
        defer { other.close() }
        try other.execute("""
            INSERT INTO transactions(id, uid, app, product, quantity, state, sequence, date, finished, account, host, changed_by)
            VALUES(9000000001, \(uid), '\(app)', 'p', 1, 1, 1, 0, 0, '\(ledger.account(of: uid))', '\(ledger.member.host)', 'x')
            """)
        try ledger.begin(readingAhead: plan)
        #expect(try ledger.unfinishedCount(of: queue) == 1, "followed, not counted again")
        ledger.rollback()
        try ledger.begin()
        #expect(try ledger.unfinishedCount(of: queue) == 2, "counted")
        ledger.rollback()

        // Another host's renewal delivered here counts at once.
        try other.execute("""
            INSERT INTO transactions(id, uid, app, product, quantity, state, sequence, date, finished, account, host, changed_by)
            VALUES(9000000002, \(uid), '\(app)', 'p', 1, 1, 2, 0, 0, '\(ledger.account(of: uid))', '', 'x')
            """)
        try other.execute("INSERT INTO deliveries(transaction_id, host) VALUES(9000000002, '\(ledger.member.host)')")
        try ledger.begin(readingAhead: plan)
        #expect(try ledger.unfinishedCount(of: queue) == 2)
        ledger.rollback()

        // Another host deleted a history (more than transactions changed): counted again.
        #expect(ledger.noteNotification("elsewhere\n*"))
        try ledger.begin(readingAhead: plan)
        #expect(try ledger.unfinishedCount(of: queue) == 3)
        ledger.rollback()
    }

    @Test("an empty ledger is not analyzed at open (statistics saying empty make key lookups scan), and is analyzed once it holds a thousand transactions")
    func youngLedgerAnalyzedOnce() throws {
        let conninfo = try PostgresServer.shared().freshConnectionString(label: "readahead_analyze")
        let ledger = try PostgresLedger(conninfo: conninfo)
        defer { ledger.close() }
        func estimatedRows() throws -> Double? {
            try ledger.connection.execute("SELECT reltuples FROM pg_class WHERE oid = 'transactions'::regclass").rows.first?.first?.flatMap { Double($0) }
        }
        #expect(try estimatedRows() == -1, "never analyzed")
        try ledger.begin()
        for _ in 1..<PostgresLedger.insertsBeforeFirstAnalyze { try ledger.insert(try purchase(ledger, sequence: 1)) }
        try ledger.commit()
        #expect(try estimatedRows() == -1)
        try ledger.begin()
        try ledger.insert(try purchase(ledger, sequence: 1))
        try ledger.commit()
        #expect(try estimatedRows() == Double(PostgresLedger.insertsBeforeFirstAnalyze))
        // Opened again with rows: analyzed at open.
        try ledger.begin()
        try ledger.insert(try purchase(ledger, sequence: 1))
        try ledger.commit()
        let reopened = try PostgresLedger(conninfo: conninfo)
        reopened.close()
        #expect(try estimatedRows() == Double(PostgresLedger.insertsBeforeFirstAnalyze + 1))
    }

    @Test("a row another transaction holds fails the unit after the lock timeout (busy) instead of holding the serving loop for as long as it is held")
    func lockTimeoutBoundsTheWait() throws {
        let conninfo = try PostgresServer.shared().freshConnectionString(label: "readahead_lock_timeout")
        let ledger = try PostgresLedger(conninfo: conninfo)
        defer { ledger.close() }
        try ledger.begin()
        _ = try ledger.nextSequence(uid: uid, app: app)
        try ledger.commit()
        #expect(ledger.lockTimeout == 5_000)
        ledger.lockTimeout = 300

        // A person's open transaction in psql holding the queue's sequence row.
        let other = try PostgresConnection(conninfo: conninfo)
        defer { other.close() }
        try other.execute("BEGIN")
        try other.execute("SELECT last FROM sequences WHERE app = $1 FOR UPDATE", [app])
        let started = ContinuousClock.now
        #expect {
            try ledger.begin(readingAhead: ReadAhead(payments: [.init(queue: queue, key: "held")]))
        } throws: { error in
            (error as? LedgerError)?.code == .busy
        }
        let waited = ContinuousClock.now - started
        #expect(waited >= .milliseconds(250) && waited < .seconds(3), "waited \(waited)")
        ledger.rollback()
        // Without a read ahead too (a sequence number given out as it goes).
        try ledger.begin()
        #expect(throws: LedgerError.self) { _ = try ledger.nextSequence(uid: uid, app: app) }
        ledger.rollback()

        try other.execute("ROLLBACK")
        try ledger.begin(readingAhead: ReadAhead(payments: [.init(queue: queue, key: "held")]))
        #expect(try ledger.nextSequence(uid: uid, app: app) == 2)
        try ledger.flushWrites()
        try ledger.commit()
    }
}
