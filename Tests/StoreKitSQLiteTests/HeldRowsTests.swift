import StoreKitPosix
import Foundation
@testable import StoreKitSQLite
import StoreKitTestSupport
import StoreKitWire
import Testing

/// New rows are held in memory until the SQLite transaction needs them (HeldRows.swift): every
/// read sees them, undoing a unit of work or a request undoes them, and a crash loses none.
@Suite("SQLiteLedger: held rows")
struct HeldRowsTests {
    static let app = "com.example.game"

    /// A purchase as the engine makes it: the payment key looked up first, then the row inserted.
    @discardableResult
    static func purchase(_ store: SQLiteLedger, key: String, state: TransactionState = .purchased,
                         uid: UInt32 = 1000) throws -> TransactionRecord {
        #expect(try store.transaction(uid: uid, app: app, paymentKey: key) == nil)
        let record = makeRecord(id: store.allocateTransactionID(), uid: uid, state: state,
                                sequence: try store.nextSequence(uid: uid, app: app))
        try store.insert(record, paymentKey: key)
        return record
    }

    @Test("a new row with a looked-up key is held, visible to every read, and written at the save")
    func heldAndVisible() throws {
        let store = try StoreFixture().open()
        let record = try StoreFixture.unit(store) { try Self.purchase(store, key: "a") }
        #expect(store.heldRowCount == 1)
        #expect(try store.transaction(id: record.id) == record)
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "a") == record)
        #expect(store.heldRowCount == 1)   // those two reads are answered from memory

        // Any other query writes the held rows into the SQLite transaction first.
        #expect(try store.unfinished(uid: 1000, app: Self.app) == [record])
        #expect(store.heldRowCount == 0)
        for read in [{ try store.all(uid: 1000, app: Self.app) },
                     { try store.list(uid: nil, app: nil, unfinishedOnly: true) }] {
            let second = try StoreFixture.unit(store) { try Self.purchase(store, key: UUID().uuidString) }
            #expect(store.heldRowCount == 1)
            #expect(try read().last == second)
            #expect(store.heldRowCount == 0)
        }
        try StoreFixture.unit(store) { try Self.purchase(store, key: "count") }
        #expect(try store.unfinishedCount() == 4)
        #expect(store.heldRowCount == 0)

        try StoreFixture.unit(store) { try Self.purchase(store, key: "saved") }
        try store.save()
        #expect(store.heldRowCount == 0)
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "saved") != nil)
    }

    @Test("a held row's values reach the commit log exactly: NUL, Unicode, quotes, NULL, extreme integers")
    func heldValuesReplayExactly() throws {
        let saved = StoreFixture()
        let crashed = StoreFixture()
        var ids: [UInt64] = []
        for fixture in [saved, crashed] {
            let store = try fixture.open()
            try StoreFixture.unit(store) { () throws in
                #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "k'ey\u{0}tail") == nil)
                var record = makeRecord(id: store.allocateTransactionID(), productID: "com.example.☕️", state: .failed,
                                        sequence: UInt64(Int64.max), date: Int64.min)
                record.errorMessage = "it's \"quoted\" 日本語 \u{0}after NUL"
                record.errorCode = Int32.min
                record.applicationUsername = "O'Brien; DROP TABLE transactions; --"
                record.originalID = nil
                record.expiresDate = Int64.max
                try store.insert(record, paymentKey: "k'ey\u{0}tail")
                ids.append(record.id)
            }
            #expect(store.heldRowCount == 1)
            if fixture === saved { try store.shutDown() }   // written from memory; the other only in the log
        }
        // The two databases gave different ids (ids never repeat across databases): compare the rest.
        var expected = try #require(try saved.open().transaction(id: ids[0]))
        expected.id = ids[1]
        #expect(expected.errorMessage == "it's \"quoted\" 日本語 ")
        let store = try crashed.open()
        #expect(store.openReport.hasSuffix("; applied 1 unit of work from the commit log"))
        #expect(try store.transaction(id: ids[1]) == expected)
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "k'ey") == expected)
    }

    @Test("a row finished while held is written once, finished, and the commit log replays both changes")
    func finishedWhileHeld() throws {
        let fixture = StoreFixture()
        let id: UInt64
        do {
            let store = try fixture.open()
            let record = try StoreFixture.unit(store) { try Self.purchase(store, key: "k") }
            id = record.id
            try StoreFixture.unit(store) { () throws in
                #expect(try store.markFinished(id: id, sequence: 7))
                #expect(try !store.markFinished(id: id, sequence: 8))   // finished already
            }
            #expect(store.heldRowCount == 1)
            #expect(try store.transaction(id: id)?.finished == true)
            #expect(try store.transaction(id: id)?.sequence == 7)
            // Dropped without a save, as after kill -9: only the commit log has the row.
        }
        do {
            let store = try fixture.open()
            #expect(store.openReport.hasSuffix("; applied 2 units of work from the commit log"))
            #expect(try store.transaction(id: id)?.finished == true)
            #expect(try store.transaction(id: id)?.sequence == 7)
            #expect(try store.unfinishedCount() == 0)
            // The same row written from memory at a save is identical.
            let second = try StoreFixture.unit(store) { try Self.purchase(store, key: "k2") }
            try StoreFixture.unit(store) { () throws in #expect(try store.markFinished(id: second.id, sequence: 9)) }
            try store.shutDown()
        }
        let store = try fixture.open()
        #expect(store.openReport == "schema \(SQLiteLedger.schemaVersion)")
        let rows = try store.list(uid: nil, app: nil, unfinishedOnly: false)
        #expect(rows.map(\.finished) == [true, true])
        #expect(rows.map(\.sequence) == [7, 9])
    }

    @Test("rows held longer than the given age are written between units of work, the younger ones wait")
    func writtenByAge() throws {
        var now: Int64 = 5_000
        let store = try StoreFixture().open(heldRowClock: { now })
        let old = try StoreFixture.unit(store) { try Self.purchase(store, key: "old") }
        try StoreFixture.unit(store) { () throws in #expect(try store.markFinished(id: old.id, sequence: 3)) }
        now = 5_010
        let young = try StoreFixture.unit(store) { try Self.purchase(store, key: "young") }
        #expect(store.heldRowCount == 2)

        now = 5_020   // "old" has been held 20 ms, "young" 10 ms
        try store.writeRows(heldLongerThan: 20, now: now)
        #expect(store.heldRowCount == 1)
        #expect(try store.transaction(id: young.id) == young)   // still held
        try store.writeRows(heldLongerThan: 20, now: now)       // nothing new is due
        #expect(store.heldRowCount == 1)
        now = 6_000
        try store.writeRows(heldLongerThan: 0, now: now)
        #expect(store.heldRowCount == 0)
        try store.save()
        #expect(try store.list(uid: nil, app: nil, unfinishedOnly: false).map(\.finished) == [true, false])
    }

    @Test("rows held again after an undo are written by their age, in time order")
    func writtenByAgeAfterUndo() throws {
        var now: Int64 = 5_000
        let store = try StoreFixture().open(heldRowClock: { now })
        let first = try StoreFixture.unit(store) { try Self.purchase(store, key: "a") }
        now = 5_010
        let second = try StoreFixture.unit(store) { try Self.purchase(store, key: "b") }
        now = 5_020
        try store.begin()
        _ = try store.unfinished(uid: 1000, app: Self.app)   // writes both into SQLite
        #expect(store.heldRowCount == 0)
        store.rollback()
        #expect(store.heldRowCount == 2)
        // Held again since 5_000 and 5_010 (not since they were written): only "a" is due.
        try store.writeRows(heldLongerThan: 15, now: now)
        #expect(store.heldRowCount == 1)
        #expect(try store.transaction(id: second.id) == second)
        try store.save()
        #expect(try store.list(uid: nil, app: nil, unfinishedOnly: false) == [first, second])
    }

    @Test("a save after SQLite lost its transaction commits the units it held, for other connections too")
    func flushAfterLostTransaction() throws {
        let fixture = StoreFixture()
        let store = try fixture.open()
        try StoreFixture.unit(store) { () throws in
            try Self.purchase(store, key: "a")
            try Self.purchase(store, key: "b")
        }
        try store.database.execute("ROLLBACK")   // as SQLite does on some I/O errors
        try store.save()
        let reader = try SQLiteDatabase(path: fixture.path, readOnly: true)
        #expect(try reader.scalarInt("SELECT count(*) FROM transactions") == 2)
    }

    @Test("a held row that is not finishable is not finished")
    func heldNotFinishable() throws {
        let store = try StoreFixture().open()
        let record = try StoreFixture.unit(store) { try Self.purchase(store, key: "p", state: .purchasing) }
        #expect(store.heldRowCount == 1)
        #expect(try !StoreFixture.unit(store) { try store.markFinished(id: record.id, sequence: 5) })
        #expect(try store.transaction(id: record.id) == record)
    }

    @Test("undoing a unit of work removes its held rows and puts back the ones it wrote into SQLite")
    func rollbackOfUnit() throws {
        let store = try StoreFixture().open()
        let kept = try StoreFixture.unit(store) { try Self.purchase(store, key: "kept") }
        #expect(store.heldRowCount == 1)

        try store.begin()
        let undone = try Self.purchase(store, key: "undone")
        #expect(try store.markFinished(id: undone.id, sequence: 40))
        // A query writes both rows into SQLite, inside this unit of work's savepoint.
        #expect(try store.all(uid: 1000, app: Self.app).map(\.id) == [kept.id, undone.id])
        #expect(store.heldRowCount == 0)
        store.rollback()

        // SQLite undid the INSERTs; the row of the committed unit is held again, as it was.
        #expect(store.heldRowCount == 1)
        #expect(try store.transaction(id: kept.id) == kept)
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "kept") == kept)
        #expect(try store.transaction(id: undone.id) == nil)
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "undone") == nil)
        try store.save()
        #expect(try store.list(uid: nil, app: nil, unfinishedOnly: false) == [kept])
        // The key of the undone row is free again.
        try StoreFixture.unit(store) { try Self.purchase(store, key: "undone") }
        #expect(try store.unfinishedCount() == 2)
    }

    @Test("undoing one request's savepoint undoes only its changes to held rows")
    func rollbackOfSavepoint() throws {
        let store = try StoreFixture().open()
        let first = try StoreFixture.unit(store) { try Self.purchase(store, key: "first") }

        try store.begin()
        let second = try Self.purchase(store, key: "second")
        try store.savepoint()
        #expect(try store.markFinished(id: first.id, sequence: 50))
        let third = try Self.purchase(store, key: "third")
        _ = try store.unfinished(uid: 1000, app: Self.app)   // writes all three into SQLite
        store.rollbackToSavepoint()
        try store.commit()

        #expect(store.heldRowCount == 2)
        #expect(try store.transaction(id: first.id) == first)
        #expect(try store.transaction(id: second.id) == second)
        #expect(try store.transaction(id: third.id) == nil)
        #expect(try store.unfinished(uid: 1000, app: Self.app) == [first, second])
    }

    @Test("a payment key that is held is refused a second time, in the same or a later unit of work")
    func heldKeyIsUnique() throws {
        let store = try StoreFixture().open()
        let record = try StoreFixture.unit(store) { try Self.purchase(store, key: "k") }
        #expect(store.heldRowCount == 1)
        try store.begin()
        let error = storeError {
            try store.insert(makeRecord(id: store.allocateTransactionID()), paymentKey: "k")
        }
        #expect(error?.message.contains("taken already") == true)
        store.rollback()
        #expect(try store.list(uid: nil, app: nil, unfinishedOnly: false) == [record])
    }

    @Test("a held key belongs to its queue: another uid or app may use it, and each finds its own row")
    func heldKeysPerQueue() throws {
        let store = try StoreFixture().open()
        let first = try StoreFixture.unit(store) { try Self.purchase(store, key: "k") }
        let otherUID = try StoreFixture.unit(store) { try Self.purchase(store, key: "k", uid: 1001) }
        let otherApp = try StoreFixture.unit(store) { () throws in
            #expect(try store.transaction(uid: 1000, app: "com.example.other", paymentKey: "k") == nil)
            let record = makeRecord(id: store.allocateTransactionID(), app: "com.example.other")
            try store.insert(record, paymentKey: "k")
            return record
        }
        #expect(store.heldRowCount == 3)
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "k") == first)
        #expect(try store.transaction(uid: 1001, app: Self.app, paymentKey: "k") == otherUID)
        #expect(try store.transaction(uid: 1000, app: "com.example.other", paymentKey: "k") == otherApp)
        try store.save()
        #expect(try store.transaction(uid: 1001, app: Self.app, paymentKey: "k") == otherUID)
        #expect(try store.unfinishedCount() == 3)
    }

    @Test("rows with made-up ids or unchecked keys are inserted at once, so SQLite checks them")
    func uncheckedRowsAreNotHeld() throws {
        let store = try StoreFixture().open()
        try StoreFixture.unit(store) { try store.insert(makeRecord(id: 5), paymentKey: "k") }
        #expect(store.heldRowCount == 0)
        try StoreFixture.unit(store) { try store.insert(makeRecord(id: store.allocateTransactionID())) }
        #expect(store.heldRowCount == 1)
        try store.begin()
        #expect(storeError { try store.insert(makeRecord(id: 5, uid: 7)) } != nil)   // id taken, in SQLite
        store.rollback()
        #expect(try store.unfinishedCount() == 2)
    }

    @Test("held rows lost with SQLite's transaction come back from the commit log")
    func lostTransaction() throws {
        let store = try StoreFixture().open()
        let record = try StoreFixture.unit(store) { try Self.purchase(store, key: "k") }
        #expect(store.heldRowCount == 1)
        // What SQLite does on some I/O errors: the open transaction is rolled back by itself.
        try store.database.execute("ROLLBACK")
        try StoreFixture.unit(store) { try Self.purchase(store, key: "k2") }
        #expect(try store.transaction(id: record.id) == record)
        #expect(try store.unfinishedCount() == 2)
    }

    @Test("a held key is compared as SQLite stores it: up to a NUL, byte for byte")
    func heldKeysAsStored() throws {
        let store = try StoreFixture().open()
        let withNUL = try StoreFixture.unit(store) { () throws in
            var record = makeRecord(id: store.allocateTransactionID())
            record.applicationUsername = "player\u{0}hidden"
            #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "a\u{0}x") == nil)
            try store.insert(record, paymentKey: "a\u{0}x")
            return record
        }
        #expect(store.heldRowCount == 1)
        // SQLite keeps "a" for both keys: the second payment is the first one.
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "a\u{0}y")?.id == withNUL.id)
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "a")?.id == withNUL.id)
        #expect(try store.transaction(id: withNUL.id)?.applicationUsername == "player")

        // Canonically equivalent keys are different bytes, and different keys to SQLite.
        let precomposed = try StoreFixture.unit(store) { try Self.purchase(store, key: "caf\u{E9}") }
        let decomposed = try StoreFixture.unit(store) { try Self.purchase(store, key: "cafe\u{301}") }
        #expect(precomposed.id != decomposed.id)
        #expect(store.heldRowCount == 3)
        try store.save()
        #expect(try store.transaction(id: withNUL.id)?.applicationUsername == "player")
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "cafe\u{301}")?.id == decomposed.id)
        #expect(try store.unfinishedCount() == 3)
    }

    @Test("a key found absent before a savepoint that is undone is checked by SQLite again")
    func absentKeyAfterUndoneSavepoint() throws {
        let store = try StoreFixture().open()
        let kept = try StoreFixture.unit(store) { try Self.purchase(store, key: "k") }
        try store.save()
        try store.begin()
        try store.savepoint()
        _ = try store.deleteHistory(uid: nil, app: nil)
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "k") == nil)
        store.rollbackToSavepoint()   // the row with "k" is back
        #expect(storeError { try store.insert(makeRecord(id: store.allocateTransactionID()), paymentKey: "k") } != nil)
        store.rollback()
        try store.save()
        #expect(try store.list(uid: nil, app: nil, unfinishedOnly: false) == [kept])
    }

    @Test("changes other than a finish reach a held row through SQLite")
    func otherChangesOfHeldRows() throws {
        let store = try StoreFixture().open()
        let record = try StoreFixture.unit(store) { try Self.purchase(store, key: "p", state: .purchasing) }
        #expect(store.heldRowCount == 1)
        try StoreFixture.unit(store) { () throws in
            #expect(try store.transition(id: record.id, from: .purchasing, to: .purchased, sequence: 4, date: 5))
        }
        #expect(store.heldRowCount == 0)
        #expect(try store.transaction(id: record.id)?.state == .purchased)

        let second = try StoreFixture.unit(store) { try Self.purchase(store, key: "q") }
        try StoreFixture.unit(store) { () throws in #expect(try store.touch(id: second.id, sequence: 9)) }
        #expect(try store.transaction(id: second.id)?.sequence == 9)

        let third = try StoreFixture.unit(store) { try Self.purchase(store, key: "r") }
        try StoreFixture.unit(store) { () throws in
            #expect(try store.setRevocation(id: third.id, date: 7, reason: 1, sequence: 10))
        }
        #expect(try store.transaction(id: third.id)?.revocationDate == 7)
        #expect(store.heldRowCount == 0)
    }

    // MARK: Written rows kept

    @Test("a written row stays in memory: its finish is answered there, written as an UPDATE, and replayed after a crash")
    func writtenRowFinishedInMemory() throws {
        let fixture = StoreFixture()
        let id: UInt64
        do {
            let store = try fixture.open()
            id = try StoreFixture.unit(store) { try Self.purchase(store, key: "k") }.id
            try store.save()   // in SQLite, committed; kept in memory as written
            #expect(store.heldRowCount == 0)
            #expect(store.keptWrittenRowCount == 1)
            try StoreFixture.unit(store) { () throws in
                #expect(try store.markFinished(id: id, sequence: 7))
                #expect(try !store.markFinished(id: id, sequence: 8))   // finished already
            }
            #expect(store.heldRowCount == 1)   // changed: waits to be written again
            #expect(store.keptWrittenRowCount == 0)
            #expect(try store.transaction(id: id)?.finished == true)
            #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "k")?.sequence == 7)
            // Dropped without a save, as after kill -9: only the commit log has the finish.
        }
        do {
            let store = try fixture.open()
            #expect(store.openReport.hasSuffix("; applied 1 unit of work from the commit log"))
            #expect(try store.transaction(id: id)?.finished == true)
            #expect(try store.transaction(id: id)?.sequence == 7)
            #expect(try store.unfinishedCount() == 0)
            // The same change written from memory at a save is identical.
            let second = try StoreFixture.unit(store) { try Self.purchase(store, key: "k2") }
            try store.save()
            try StoreFixture.unit(store) { () throws in #expect(try store.markFinished(id: second.id, sequence: 9)) }
            #expect(store.heldRowCount == 1)
            try store.shutDown()
        }
        let store = try fixture.open()
        #expect(store.openReport == "schema \(SQLiteLedger.schemaVersion)")
        let rows = try store.list(uid: nil, app: nil, unfinishedOnly: false)
        #expect(rows.map(\.finished) == [true, true])
        #expect(rows.map(\.sequence) == [7, 9])
    }

    @Test("undoing a unit that finished a written row puts the written row back, also after it was written again")
    func rollbackOfWrittenRow() throws {
        let store = try StoreFixture().open()
        let record = try StoreFixture.unit(store) { try Self.purchase(store, key: "u") }
        try store.save()
        struct Undo: Error {}
        #expect(throws: Undo.self) {
            try StoreFixture.unit(store) { () throws in
                #expect(try store.markFinished(id: record.id, sequence: 5))
                #expect(try store.unfinished(uid: 1000, app: Self.app).isEmpty)   // wrote the change first
                throw Undo()
            }
        }
        #expect(store.heldRowCount == 0)
        #expect(store.keptWrittenRowCount == 1)
        #expect(try store.transaction(id: record.id) == record)
        #expect(try store.unfinished(uid: 1000, app: Self.app) == [record])
        try store.save()
        #expect(try store.list(uid: nil, app: nil, unfinishedOnly: true) == [record])
    }

    @Test("a statement that changes a written row in SQLite forgets the copy: reads see SQLite's row")
    func directChangesForgetWrittenRows() throws {
        let store = try StoreFixture().open()
        let pending = try StoreFixture.unit(store) { try Self.purchase(store, key: "p", state: .purchasing) }
        let touched = try StoreFixture.unit(store) { try Self.purchase(store, key: "t") }
        let revoked = try StoreFixture.unit(store) { try Self.purchase(store, key: "r") }
        try store.save()
        #expect(store.keptWrittenRowCount == 3)
        try StoreFixture.unit(store) { () throws in
            #expect(try store.transition(id: pending.id, from: .purchasing, to: .purchased, sequence: 4, date: 5))
            #expect(try store.touch(id: touched.id, sequence: 9))
            #expect(try store.setRevocation(id: revoked.id, date: 7, reason: 1, sequence: 10))
        }
        #expect(store.keptWrittenRowCount == 0)
        #expect(try store.transaction(id: pending.id)?.state == .purchased)
        #expect(try store.transaction(id: touched.id)?.sequence == 9)
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "r")?.revocationDate == 7)
        // A finish after the transition goes through SQLite and sees its state.
        try StoreFixture.unit(store) { () throws in #expect(try store.markFinished(id: pending.id, sequence: 11)) }
        #expect(try store.transaction(id: pending.id)?.finished == true)

        // `storekitctl clear` deletes rows in SQLite: no copy of them answers afterwards.
        let cleared = try StoreFixture.unit(store) { try Self.purchase(store, key: "c") }
        try store.save()
        #expect(store.keptWrittenRowCount == 1)
        try StoreFixture.unit(store) { () throws in _ = try store.deleteHistory(uid: 1000, app: Self.app) }
        #expect(try store.transaction(id: cleared.id) == nil)
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "c") == nil)
    }

    @Test("deleteTransaction deletes one row, held or saved, and nothing else; after a crash the commit log deletes it again")
    func deleteOneTransaction() throws {
        let fixture = StoreFixture()
        let (held, saved, kept): (TransactionRecord, TransactionRecord, TransactionRecord)
        do {
            let store = try fixture.open()
            saved = try StoreFixture.unit(store) { try Self.purchase(store, key: "s") }
            kept = try StoreFixture.unit(store) { try Self.purchase(store, key: "k") }
            try store.save()
            held = try StoreFixture.unit(store) { try Self.purchase(store, key: "h") }
            #expect(store.heldRowCount == 1)
            try StoreFixture.unit(store) { () throws in
                #expect(try store.deleteTransaction(id: held.id)?.id == held.id)
                #expect(try store.deleteTransaction(id: saved.id)?.id == saved.id)
                #expect(try store.deleteTransaction(id: saved.id) == nil)   // gone already
                #expect(try store.deleteTransaction(id: 42) == nil)
            }
            #expect(try store.transaction(id: held.id) == nil && store.transaction(id: saved.id) == nil)
            #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "h") == nil)
            #expect(try store.unfinishedCount() == 1)
            // Dropped without a save, as after kill -9: only the commit log has the deletes.
        }
        let store = try fixture.open()
        #expect(try store.transaction(id: held.id) == nil)
        #expect(try store.transaction(id: saved.id) == nil)
        #expect(try store.transaction(id: kept.id)?.id == kept.id)
        #expect(try store.unfinishedCount() == 1)
    }

    @Test("written rows are forgotten after a second, and beyond the most kept, between units of work")
    func writtenRowsAreForgotten() throws {
        let store = try StoreFixture().open()
        let count = HeldRows.maximumWritten + 10
        try StoreFixture.unit(store) { () throws in
            for index in 0..<count { try Self.purchase(store, key: "key-\(index)") }
        }
        let now = Monotonic.milliseconds()
        try store.writeRows(heldLongerThan: 0, now: now)
        #expect(store.heldRowCount == 0)
        #expect(store.keptWrittenRowCount == count)
        try store.writeRows(heldLongerThan: 0, now: now)   // the cap applies from the next turn
        #expect(store.keptWrittenRowCount == HeldRows.maximumWritten)
        try store.writeRows(heldLongerThan: 0, now: now + HeldRows.keepWritten + 60_000)
        #expect(store.keptWrittenRowCount == 0)
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "key-0") != nil)   // from SQLite
        #expect(try store.unfinishedCount() == count)
    }
}
