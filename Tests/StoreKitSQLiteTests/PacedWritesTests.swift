import Foundation
@testable import StoreKitSQLite
import StoreKitTestSupport
import Testing

/// The store's connections write the database and its WAL in synced steps (PacedWrites.swift), so
/// that no sync hands the disk megabytes at once while the commit log waits for its own.
@Suite("PacedWrites: the database and WAL written in synced steps")
struct PacedWritesTests {
    static func syncs(_ path: String) -> Int { PacedWrites.stepSyncs.withLock { $0[path] ?? 0 } }

    /// A database with a table of blobs, in `journalMode`, on which SQLite itself syncs nothing:
    /// every sync counted is one of the steps.
    static func database(in directory: TemporaryDirectory, journalMode: String) throws -> (SQLiteDatabase, String) {
        let path = directory.path + "/paced-\(journalMode).sqlite"
        let database = try SQLiteDatabase(path: path)
        try database.execute("PRAGMA journal_mode=\(journalMode)")
        try database.execute("PRAGMA synchronous=OFF")
        try database.execute("PRAGMA wal_autocheckpoint=0")
        try database.execute("CREATE TABLE blobs(id INTEGER PRIMARY KEY, data BLOB)")
        return (database, path)
    }

    @Test("a transaction of 2 MiB syncs the WAL every step, a checkpoint the database file; the data reads back")
    func commitAndCheckpointAreSyncedInSteps() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let (database, path) = try Self.database(in: directory, journalMode: "WAL")
        let megabytes = 2
        let steps = megabytes << 20 / PacedWrites.step
        // SQLite may spill pages into the WAL before the COMMIT: the steps count from the BEGIN.
        let walBefore = Self.syncs(path + "-wal")
        try database.execute("BEGIN")
        try database.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(megabytes * 64)) INSERT INTO blobs(data) SELECT randomblob(16384) FROM n")
        try database.execute("COMMIT")
        let walSteps = Self.syncs(path + "-wal") - walBefore
        #expect(walSteps >= steps - 1, "the WAL was synced \(walSteps) times for \(megabytes) MiB")
        #expect(walSteps <= steps + 2)

        let databaseBefore = Self.syncs(path)
        try database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        let databaseSteps = Self.syncs(path) - databaseBefore
        #expect(databaseSteps >= steps - 1, "the database file was synced \(databaseSteps) times for \(megabytes) MiB")

        let reopened = try SQLiteDatabase(path: path)
        #expect(try reopened.scalarInt("SELECT count(*) FROM blobs") == Int64(megabytes * 64))
        #expect(try reopened.scalarInt("SELECT sum(length(data)) FROM blobs") == Int64(megabytes) << 20)
    }

    @Test("in rollback-journal mode the database file is paced and its journal is not")
    func onlyTheDatabaseAndItsWALArePaced() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        // A rollback journal (not WAL): the journal file is written but never stepped.
        let (database, path) = try Self.database(in: directory, journalMode: "DELETE")
        try database.execute("INSERT INTO blobs(data) SELECT randomblob(16384) FROM (SELECT 1 UNION ALL SELECT 2)")
        try database.execute("BEGIN")
        try database.execute("UPDATE blobs SET data = randomblob(16384)")
        try database.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 64) INSERT INTO blobs(data) SELECT randomblob(16384) FROM n")
        try database.execute("COMMIT")
        #expect(Self.syncs(path + "-journal") == 0)
        #expect(Self.syncs(path) >= (1 << 20) / PacedWrites.step - 1, "the database file took 1 MiB in one transaction")
        let reader = try SQLiteDatabase(path: path, readOnly: true)
        #expect(try reader.scalarInt("SELECT count(*) FROM blobs") == 66)
    }
}
