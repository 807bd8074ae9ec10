import CSQLite
import Foundation
@testable import StoreKitSQLite
import StoreKitLedger
import StoreKitPosix
import StoreKitTestSupport
import StoreKitWire
import Testing

/// A save's `COMMIT` runs on the saver's thread (Saver.swift) while units of work that
/// need no statement go on; a statement waits for the connection; nothing is lost or numbered
/// twice, whatever happens meanwhile.
@Suite("SQLiteLedger: saves committed off the loop")
struct SaverTests {
    static let app = "com.example.game"

    /// Waits until the saver has given the connection back (its COMMIT done); fails the test
    /// after 10 s instead of hanging.
    struct CommitNeverDone: Error {}
    static func awaitTakeBack(_ store: SQLiteLedger, timeout: Double = 10) throws {
        let deadline = Monotonic.seconds() + timeout
        while !store.database.takeBackIfDone() {
            guard Monotonic.seconds() < deadline else {
                Issue.record("the saver did not give the connection back within \(timeout) s")
                throw CommitNeverDone()
            }
            usleep(1000)
        }
    }

    /// Holds the saver's jobs until opened.
    final class Gate: @unchecked Sendable {   // `condition` guards `open` and `jobs`
        private let condition = Condition()
        private var open = false
        private var jobs = 0

        func pass() {
            condition.lock()
            while !open { condition.wait() }
            jobs += 1
            condition.unlock()
        }

        func openUp() {
            condition.withLock { open = true }
            condition.broadcast()
        }

        var jobsStarted: Int { condition.withLock { jobs } }
    }

    /// A store with a saver whose jobs wait at `gate`.
    static func store(_ fixture: StoreFixture, gate: Gate) throws -> (SQLiteLedger, Saver) {
        let store = try fixture.open()
        let saver = Saver(onDone: {}, beforeJob: { gate.pass() })
        saver.start()
        store.saver = saver
        return (store, saver)
    }

    /// A purchase as a unit of work makes it with no statement: a new id, the queue's next
    /// number (cached), a row held in memory, then finished.
    @discardableResult
    static func heldPurchase(
        _ store: SQLiteLedger, finish: Bool = true, productID: String = "com.example.game.coins100"
    ) throws -> TransactionRecord {
        try StoreFixture.unit(store) { () throws in
            let sequence = try store.nextSequence(uid: 1000, app: app)
            let record = makeRecord(id: store.allocateTransactionID(), productID: productID, sequence: sequence)
            try store.insert(record)
            if finish { #expect(try store.markFinished(id: record.id, sequence: try store.nextSequence(uid: 1000, app: app))) }
            return record
        }
    }

    @Test("units that only hold rows run while the COMMIT has the connection; a statement waits for it")
    func unitsRunDuringTheCommit() throws {
        let fixture = StoreFixture()
        let gate = Gate()
        let (store, saver) = try Self.store(fixture, gate: gate)
        defer { saver.stop() }
        let first = try Self.heldPurchase(store)   // reads the queue's counter once
        try store.startSave()
        #expect(store.database.isLent)

        var during: [TransactionRecord] = []
        for _ in 0..<5 { during.append(try Self.heldPurchase(store)) }
        #expect(store.unitsDuringSaves == 5)
        #expect(store.unitsThatWaitedForSaves == 0)
        #expect(gate.jobsStarted == 0)   // the COMMIT has not even begun
        #expect(store.database.isLent)

        // A unit with a statement (a row not held: a known id) waits until the COMMIT is done.
        NamedThread.start("test-open-gate") {
            usleep(300_000)
            gate.openUp()
        }
        let started = Monotonic.seconds()
        try StoreFixture.unit(store) { () throws in
            #expect(try store.unfinished(uid: 1000, app: Self.app).isEmpty)
        }
        #expect(Monotonic.seconds() - started >= 0.25)
        #expect(gate.jobsStarted == 1)
        #expect(store.unitsThatWaitedForSaves == 1)
        #expect(store.takeSaveOutcome().map { if case .success = $0 { true } else { false } } == true)
        #expect(store.hasUnsavedChanges)   // the five units wait for the next save
        try store.shutDown()

        // Reopened: everything is in the database, finished, with its own numbers.
        let reopened = try fixture.open()
        #expect(reopened.openReport == "schema \(SQLiteLedger.schemaVersion)")   // nothing left to replay
        for record in [first] + during {
            let stored = try reopened.transaction(id: record.id)
            #expect(stored?.finished == true)
        }
        let sequences = try ([first] + during).map { try #require(try reopened.transaction(id: $0.id)).sequence }
        #expect(Set(sequences).count == sequences.count)
        #expect(try StoreFixture.unit(reopened) { try reopened.nextSequence(uid: 1000, app: Self.app) } == sequences.max()! + 1)
    }

    @Test("the finish of a row written before the save needs no statement: it does not wait for the COMMIT")
    func finishOfWrittenRowDuringCommit() throws {
        let fixture = StoreFixture()
        let gate = Gate()
        let (store, saver) = try Self.store(fixture, gate: gate)
        defer { saver.stop() }
        try Self.heldPurchase(store)   // prepares the finish's statement, as any daemon has
        let bought = try Self.heldPurchase(store, finish: false)
        try store.startSave()   // writes the row into SQLite; the COMMIT waits at the gate
        #expect(store.database.isLent)
        #expect(store.heldRowCount == 0)

        // Were the finish a statement, it would wait for the gate, which opens after 300 ms.
        NamedThread.start("test-open-gate") {
            usleep(300_000)
            gate.openUp()
        }
        let started = Monotonic.seconds()
        try StoreFixture.unit(store) { () throws in
            #expect(try store.markFinished(id: bought.id, sequence: try store.nextSequence(uid: 1000, app: Self.app)))
        }
        #expect(Monotonic.seconds() - started < 0.25)
        #expect(gate.jobsStarted == 0)
        #expect(store.unitsThatWaitedForSaves == 0)
        #expect(try store.transaction(id: bought.id)?.finished == true)
        try store.shutDown()

        let reopened = try fixture.open()
        #expect(reopened.openReport == "schema \(SQLiteLedger.schemaVersion)")
        #expect(try reopened.transaction(id: bought.id)?.finished == true)
        #expect(try reopened.unfinishedCount() == 0)
    }

    @Test("a unit undone after a COMMIT off the loop keeps the numbers that units made meanwhile")
    func rollbackKeepsCountersOfUnsavedUnits() throws {
        let fixture = StoreFixture()
        let gate = Gate()
        gate.openUp()
        let (store, saver) = try Self.store(fixture, gate: gate)
        defer { saver.stop() }
        try Self.heldPurchase(store)
        try store.startSave()
        let during = try Self.heldPurchase(store, finish: false)   // moves the counter, not stored yet
        // The COMMIT is done: the connection comes back with no SQLite transaction open.
        try Self.awaitTakeBack(store)
        #expect(!store.sqliteOpen)
        #expect(store.hasUnsavedChanges)

        struct Undo: Error {}
        #expect(throws: Undo.self) {
            try StoreFixture.unit(store) { () throws in
                _ = try store.nextSequence(uid: 1000, app: Self.app)
                throw Undo()
            }
        }
        let after = try StoreFixture.unit(store) { try store.nextSequence(uid: 1000, app: Self.app) }
        #expect(after == during.sequence + 1)
        try store.save()
        #expect(try store.transaction(id: during.id)?.sequence == during.sequence)
    }

    @Test("a COMMIT that fails off the loop is reported, its transaction kept, and the next save commits it all")
    func failedCommitIsReportedAndRetried() throws {
        let fixture = StoreFixture()
        let gate = Gate()
        gate.openUp()
        let (store, saver) = try Self.store(fixture, gate: gate)
        defer { saver.stop() }
        // A deferred foreign key fails the COMMIT itself, and SQLite keeps the transaction open.
        try store.database.execute("CREATE TABLE parents (id INTEGER PRIMARY KEY)")
        try store.database.execute("CREATE TABLE children (parent INTEGER REFERENCES parents(id) DEFERRABLE INITIALLY DEFERRED)")
        let before = try Self.heldPurchase(store)
        try store.openSQLiteTransaction()
        try store.database.execute("INSERT INTO children VALUES (7)")
        try store.startSave()
        let during = try Self.heldPurchase(store)
        try Self.awaitTakeBack(store)

        let outcome = try #require(store.takeSaveOutcome())
        guard case .failure(let error) = outcome else {
            Issue.record("the COMMIT succeeded")
            return
        }
        #expect(error.message.contains("COMMIT"))
        #expect(error.message.contains("FOREIGN KEY"))
        #expect(store.takeSaveOutcome().map { _ in true } == nil)   // said once
        #expect(store.sqliteOpen)
        #expect(store.hasUnsavedChanges)          // both units wait for the next save

        try store.database.execute("INSERT INTO parents VALUES (7)")
        try store.startSave()
        try Self.awaitTakeBack(store)
        #expect(store.takeSaveOutcome().map { if case .success = $0 { true } else { false } } == true)
        #expect(!store.hasUnsavedChanges)
        try store.shutDown()

        let reopened = try fixture.open()
        #expect(reopened.openReport == "schema \(SQLiteLedger.schemaVersion)")
        #expect(try reopened.transaction(id: before.id)?.finished == true)
        #expect(try reopened.transaction(id: during.id)?.finished == true)
    }

    @Test("a save's held rows, counters and LSN are written on the saver's thread, not by the loop")
    func heldRowsAreWrittenOffTheLoop() throws {
        let fixture = StoreFixture()
        let gate = Gate()
        let (store, saver) = try Self.store(fixture, gate: gate)
        defer { saver.stop() }
        let purchases = try (0..<5).map { _ in try Self.heldPurchase(store) }
        let changesBefore = store.database.totalChanges
        try store.startSave()
        // The loop is back from startSave while the saver's job waits at the gate: it ran no
        // statement for the rows, and reads still find them (kept as written).
        #expect(store.database.totalChanges == changesBefore)
        #expect(store.database.isLent)
        #expect(try store.transaction(id: purchases[2].id)?.finished == true)
        #expect(store.database.isLent)
        gate.openUp()
        try Self.awaitTakeBack(store)
        #expect(store.takeSaveOutcome().map { if case .success = $0 { true } else { false } } == true)
        // Five rows, the queue's counter and the LSN, on the saver's thread.
        #expect(store.database.totalChanges == changesBefore + 7)
        try store.shutDown()
        let reopened = try fixture.open()
        for purchase in purchases { #expect(try reopened.transaction(id: purchase.id)?.finished == true) }
    }

    /// Off the loop (`lent`): the saver's job; inline: a save with no saver (backup,
    /// shutdown, low disk space), which runs the same statements on the loop.
    @Test("a held row that cannot be written rolls the save back; its units are applied again and nothing is lost",
          arguments: [true, false])
    func failedRowWriteRollsBackAndCatchesUp(lent: Bool) throws {
        let fixture = StoreFixture()
        let gate = Gate()
        gate.openUp()
        let (store, saver) = try Self.store(fixture, gate: gate)
        defer { saver.stop() }
        if !lent { store.saver = nil }
        func save() throws -> Result<Void, LedgerError>? {
            guard lent else {
                do throws(LedgerError) { try store.save() } catch { return .failure(error) }
                return .success(())
            }
            try store.startSave()
            try Self.awaitTakeBack(store)
            return store.takeSaveOutcome()
        }
        // A trigger of this connection refuses one product's row, as a full disk would refuse any.
        try store.database.execute("""
            CREATE TEMP TRIGGER refuse BEFORE INSERT ON transactions WHEN NEW.product = 'com.example.game.refused'
            BEGIN SELECT RAISE(ABORT, 'refused on purpose'); END
            """)
        let before = try Self.heldPurchase(store)
        let refused = try Self.heldPurchase(store, productID: "com.example.game.refused")
        let outcome = try #require(try save())
        guard case .failure(let error) = outcome else {
            Issue.record("the save succeeded")
            return
        }
        #expect(error.message.contains("writing a saved row"))
        #expect(error.message.contains("refused on purpose"))
        // The whole transaction is gone, not only the refused row: nothing of it is half saved.
        #expect(!store.sqliteOpen)
        #expect(store.needsCatchUp)
        #expect(sqlite3_get_autocommit(store.database.handle) != 0)

        try store.database.execute("DROP TRIGGER refuse")
        #expect(try save().map { if case .success = $0 { true } else { false } } == true)
        #expect(!store.needsCatchUp)
        try store.shutDown()
        let reopened = try fixture.open()
        #expect(try reopened.transaction(id: before.id)?.finished == true)
        #expect(try reopened.transaction(id: refused.id)?.productID == "com.example.game.refused")
    }

    @Test("without a saver a save commits before it returns")
    func withoutSaverSavesAtOnce() throws {
        let store = try StoreFixture().open()
        try Self.heldPurchase(store)
        try store.startSave()
        #expect(!store.database.isLent)
        #expect(!store.hasUnsavedChanges)
        #expect(!store.sqliteOpen)
    }
}
