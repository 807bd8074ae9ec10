import Foundation
import StoreKitLedger
import StoreKitSQLite
import StoreKitTestSupport
import StoreKitWire
import Testing

/// A unit of work is durable once `commit()` returns: in the commit log, before SQLite has it.
@Suite("SQLiteLedger: the commit log")
struct SQLiteLedgerCommitLogTests {
    static func copy(_ fixture: StoreFixture, suffixes: [String], to target: StoreFixture) throws {
        for suffix in suffixes where fixture.exists(suffix) {
            try FileManager.default.copyItem(atPath: fixture.path + suffix, toPath: target.path + suffix)
        }
    }

    @Test("units of work never flushed to SQLite come back at the next open (a crash)")
    func crashBeforeFlush() throws {
        let fixture = StoreFixture()
        do {
            let store = try fixture.open()
            try StoreFixture.unit(store) { try store.insert(makeRecord(id: 11)) }
            try StoreFixture.unit(store) { try store.insert(makeRecord(id: 12, state: .failed)) }
            try StoreFixture.unit(store) { () throws in #expect(try store.markFinished(id: 11, sequence: 5)) }
            #expect(store.hasUnsavedChanges)
            // Dropped without a flush: SQLite rolls its transaction back, as after kill -9.
        }
        let store = try fixture.open()
        #expect(store.openReport.hasSuffix("; applied 3 units of work from the commit log"))
        #expect(try store.transaction(id: 11)?.finished == true)
        #expect(try store.transaction(id: 11)?.sequence == 5)
        #expect(try store.transaction(id: 12)?.state == .failed)
        #expect(try store.appliedLSN() == 3)
    }

    @Test("the database file alone (its WAL lost) is brought up to date from the commit log")
    func walLost() throws {
        let fixture = StoreFixture()
        let copy = StoreFixture()
        do {
            let store = try fixture.open()
            try StoreFixture.unit(store) { try store.insert(makeRecord(id: 21)) }
            try store.checkpoint()   // 21 is in the database file itself now
            try StoreFixture.unit(store) { try store.insert(makeRecord(id: 22)) }
            try StoreFixture.unit(store) { () throws in #expect(try store.markFinished(id: 21, sequence: 9)) }
            // What survives a power cut that took the WAL: the main file and the fsynced log.
            try Self.copy(fixture, suffixes: ["", "-log.0", "-log.1"], to: copy)
        }
        let store = try copy.open()
        #expect(store.openReport.hasSuffix("; applied 2 units of work from the commit log"))
        #expect(try store.transaction(id: 21)?.finished == true)
        #expect(try store.transaction(id: 22) != nil)
    }

    @Test("replayed values are the stored ones: quotes, Unicode, NUL, NULL, extreme integers")
    func replayKeepsValuesExactly() throws {
        var record = makeRecord(id: UInt64(Int64.max), state: .failed, sequence: UInt64(Int64.max), date: Int64.min)
        record.errorMessage = "it's \"quoted\" ☕️ 日本語 \u{0}after NUL"
        record.applicationUsername = "O'Brien; DROP TABLE transactions; --"
        record.errorCode = Int32.min
        record.expiresDate = nil
        let flushed = StoreFixture()
        let crashed = StoreFixture()
        for fixture in [flushed, crashed] {
            let store = try fixture.open()
            try StoreFixture.unit(store) { try store.insert(record, paymentKey: "k'ey\u{0}") }
            if fixture === flushed { try store.shutDown() }
        }
        let expected = try #require(try flushed.open().transaction(id: record.id))
        let store = try crashed.open()
        #expect(store.openReport.hasSuffix("; applied 1 unit of work from the commit log"))
        #expect(try store.transaction(id: record.id) == expected)
        #expect(try store.transaction(uid: record.uid, app: record.app, paymentKey: "k'ey") == expected)
    }

    @Test("records after a gap are not applied, reported as problems, and their segments kept")
    func gapIsKeptAndReported() throws {
        let fixture = StoreFixture()
        var identity: UInt64 = 0
        do {
            let store = try fixture.open()
            identity = try #require(try store.setting("commitlog.database").flatMap { UInt64($0, radix: 16) })
            try store.shutDown()
        }
        do {
            // A log whose records start at 3 while the database holds nothing after 0.
            let log = try CommitLog(databasePath: fixture.path, database: identity)
            try log.start(nextLSN: 3)
            try log.append(Array("x".utf8))
        }
        let store = try fixture.open()
        #expect(store.openProblems.contains { $0.contains("gap after 0") })
        let kept = store.openProblems.first { $0.contains("kept as") }
        #expect(kept != nil)
        let files = try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path)
        #expect(files.filter { $0.contains("-log.0.kept-") || $0.contains("-log.1.kept-") }.count == 2)
    }

    // SQLite rolls its transaction back by itself on some I/O errors; a ROLLBACK on the store's
    // connection does the same to it here.

    @Test("units of work lost with SQLite's transaction are applied again before the next one")
    func lostTransactionIsCaughtUp() throws {
        let fixture = StoreFixture()
        let store = try fixture.open()
        try StoreFixture.unit(store) { try store.insert(makeRecord(id: 61)) }
        try StoreFixture.unit(store) { try store.insert(makeRecord(id: 62)) }
        try store.database.execute("ROLLBACK")
        #expect(try store.transaction(id: 61) == nil, "the rollback did not take")
        try StoreFixture.unit(store) { try store.insert(makeRecord(id: 63)) }
        for id: UInt64 in [61, 62, 63] { #expect(try store.transaction(id: id) != nil, "\(id) is missing") }
        try store.save()
        #expect(try store.appliedLSN() == 3)
    }

    @Test("a unit of work whose transaction SQLite lost midway records nothing and is refused")
    func lossInsideAUnitOfWork() throws {
        let fixture = StoreFixture()
        let store = try fixture.open()
        try StoreFixture.unit(store) { try store.insert(makeRecord(id: 71)) }
        let before = store.commitLog.nextLSN
        try store.begin()
        try store.insert(makeRecord(id: 72))
        try store.database.execute("ROLLBACK")
        // Without the transaction, the next statement would commit on its own: it must not run.
        #expect(throws: LedgerError.self) { try store.insert(makeRecord(id: 73)) }
        #expect(throws: LedgerError.self) { try store.commit() }
        #expect(store.commitLog.nextLSN == before, "a record of the lost unit of work was appended")
        try StoreFixture.unit(store) { try store.insert(makeRecord(id: 74)) }
        #expect(try store.transaction(id: 71) != nil)
        #expect(try store.transaction(id: 72) == nil && store.transaction(id: 73) == nil)
        #expect(try store.transaction(id: 74) != nil)
        // And what a reopen finds is the same.
        try store.shutDown()
        let reopened = try fixture.open()
        #expect(try reopened.transaction(id: 71) != nil && reopened.transaction(id: 74) != nil)
        #expect(try reopened.transaction(id: 72) == nil && reopened.transaction(id: 73) == nil)
    }

    @Test("a request undone inside a unit of work is not in its log record")
    func undoneRequestIsNotReplayed() throws {
        let fixture = StoreFixture()
        do {
            let store = try fixture.open()
            try StoreFixture.unit(store) {
                try store.savepoint()
                try store.insert(makeRecord(id: 31))
                store.rollbackToSavepoint()
                try store.savepoint()
                try store.insert(makeRecord(id: 32))
                try store.releaseSavepoint()
            }
        }
        let store = try fixture.open()
        #expect(store.openReport.hasSuffix("; applied 1 unit of work from the commit log"))
        #expect(try store.transaction(id: 31) == nil)
        #expect(try store.transaction(id: 32) != nil)
    }

    @Test("a unit of work that changes nothing writes no log record")
    func readOnlyUnitWritesNothing() throws {
        let fixture = StoreFixture()
        let store = try fixture.open()
        let before = store.commitLog.nextLSN
        try StoreFixture.unit(store) { _ = try store.transaction(id: 1) }
        #expect(store.commitLog.nextLSN == before)
        try StoreFixture.unit(store) { try store.setSetting("clock.offset", "1") }
        #expect(store.commitLog.nextLSN == before + 1)
    }

    @Test("a restored backup does not take the live database's commit log: one notice, no problem, the log kept with the time in its name, quiet at the next open")
    func backupHasItsOwnIdentity() throws {
        let fixture = StoreFixture()
        let restored = StoreFixture()
        let backup = restored.directory.file("backup.sqlite")
        do {
            let store = try fixture.open()
            try StoreFixture.unit(store) { try store.insert(makeRecord(id: 41)) }
            try store.save()
            _ = try store.backup(to: backup)
            // After the backup: in the live database's log only.
            try StoreFixture.unit(store) { try store.insert(makeRecord(id: 42)) }
            try FileManager.default.copyItem(atPath: backup, toPath: restored.path)
            try Self.copy(fixture, suffixes: ["-log.0", "-log.1"], to: restored)
        }
        let store = try restored.open()
        #expect(store.openReport.contains("was another database's"))
        #expect(store.openProblems.isEmpty, "a restore is not an error: \(store.openProblems)")
        let notice = try #require(store.openNotice)
        #expect(notice.contains("another database") && notice.contains("kept as"))
        #expect(try store.transaction(id: 41) != nil)
        #expect(try store.transaction(id: 42) == nil, "the live database's log rolled the backup forward")
        let kept = try FileManager.default.contentsOfDirectory(atPath: restored.directory.path).filter { $0.contains(".kept-") }
        #expect(kept.count == 2)
        // storekitd.sqlite-log.0.kept-20261204T225512Z
        #expect(kept.allSatisfy { $0.split(separator: "-").last?.count == 16 && $0.hasSuffix("Z") }, "\(kept)")
        try store.shutDown()
        // The next open finds the restored database's own log: nothing more to say or keep.
        let again = try restored.open()
        #expect(again.openNotice == nil && again.openProblems.isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: restored.directory.path).filter { $0.contains(".kept-") }.count == 2)
    }
}
