import Foundation
import StoreKitTestSupport
import StoreKitWire
import Testing

/// A database that is damaged, cut short, another program's or of a newer schema: storekitd
/// refuses to start, says which file and what is wrong, exits non-zero, and leaves the file
/// (and its WAL) byte for byte as it was.
@Suite struct NothingLostCorruptDatabaseTests {
    enum Damage: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case randomBytes
        case truncatedToHalf
        case truncatedMidPage
        case foreignDatabase
        case foreignDatabaseWithWAL
        case newerSchema

        var testDescription: String { rawValue }

        /// What the refusal must say about the file.
        var reason: String {
            switch self {
            case .randomBytes: "not an SQLite database"
            case .truncatedToHalf, .truncatedMidPage: "truncated"
            case .foreignDatabase, .foreignDatabaseWithWAL: "not a storekitd database"
            case .newerSchema: "schema version 99 is newer than this storekitd supports"
            }
        }
    }

    /// A real storekitd database with some history, closed cleanly (no WAL left).
    static func makeRealDatabase(_ daemon: SupervisedDaemon) throws {
        try daemon.start()
        let client = try Client(daemon.base)
        _ = try client.subscribe()
        for index in 0..<40 {
            let purchase = try client.buy(Sample.coins)
            if index % 2 == 0 { _ = try client.finish(purchase.id) }
        }
        client.close()
        daemon.crash()
        // Whatever the stop left behind is folded into the main file, as a clean close does.
        _ = try sqlite3(daemon.databasePath, "PRAGMA wal_checkpoint(TRUNCATE);")
        try? FileManager.default.removeItem(atPath: daemon.databasePath + "-wal")
        try? FileManager.default.removeItem(atPath: daemon.databasePath + "-shm")
        try? FileManager.default.removeItem(atPath: daemon.databasePath + "-reserve")
    }

    static func damage(_ daemon: SupervisedDaemon, _ damage: Damage) throws {
        let path = daemon.databasePath
        try FileManager.default.createDirectory(atPath: daemon.stateDirectory, withIntermediateDirectories: true)
        switch damage {
        case .randomBytes:
            var bytes = [UInt8](repeating: 0, count: 64 * 1024)
            for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255) }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
        case .truncatedToHalf, .truncatedMidPage:
            try makeRealDatabase(daemon)
            let size = try #require(fileBytes(path)).count
            let pageSize = try #require(Int(try sqlite3(path, "PRAGMA page_size;").trimmingCharacters(in: .whitespacesAndNewlines)))
            let pages = size / pageSize
            try #require(pages >= 8, "the real database has only \(pages) pages")
            let length = damage == .truncatedToHalf ? pages / 2 * pageSize : pages / 2 * pageSize + pageSize / 3
            #expect(truncate(path, off_t(length)) == 0)
        case .foreignDatabase:
            _ = try sqlite3(path, """
                PRAGMA application_id=305419896; CREATE TABLE notes(body TEXT NOT NULL);
                INSERT INTO notes VALUES('somebody else''s data');
                """)
        case .foreignDatabaseWithWAL:
            // Another program's WAL database with committed data still in its -wal file (it crashed):
            // a read-write connection closing would checkpoint it into the main file.
            let script = """
                import sqlite3, shutil, sys
                path = sys.argv[1]
                db = sqlite3.connect(path + ".tmp")
                db.execute("PRAGMA journal_mode=WAL"); db.execute("PRAGMA wal_autocheckpoint=0")
                db.execute("CREATE TABLE notes(body TEXT NOT NULL)")
                db.execute("INSERT INTO notes VALUES('only in the wal')"); db.commit()
                shutil.copy(path + ".tmp", path); shutil.copy(path + ".tmp-wal", path + "-wal")
                db.close()
                """
            let result = try ProcessRunner.run("/usr/bin/python3", ["-c", script, path])
            try #require(result.status == 0, "\(result.stderr)")
            try? FileManager.default.removeItem(atPath: path + ".tmp")
            #expect(fileBytes(path + "-wal")?.isEmpty == false)
        case .newerSchema:
            try makeRealDatabase(daemon)
            _ = try sqlite3(path, "PRAGMA user_version=99;")
        }
    }

    @Test(arguments: Damage.allCases)
    func refusesToStartAndLeavesTheFileAlone(_ damage: Damage) throws {
        let daemon = try SupervisedDaemon()
        defer { daemon.remove() }
        try Self.damage(daemon, damage)
        let path = daemon.databasePath
        let before = try #require(fileBytes(path))
        let walBefore = fileBytes(path + "-wal")

        let result = try ProcessRunner.run(Paths.binary("storekitd"), daemon.base.arguments, timeout: 20)
        #expect(result.status == 1, "storekitd exited with \(result.status):\n\(result.stderr)")
        #expect(result.stderr.contains(path), "the message must name \(path):\n\(result.stderr)")
        #expect(result.stderr.contains(damage.reason), "the message must say '\(damage.reason)':\n\(result.stderr)")
        #expect(fileBytes(path) == before, "the database file was modified")
        #expect(fileBytes(path + "-wal") == walBefore, "the WAL was modified or created")
        #expect(!FileManager.default.fileExists(atPath: daemon.base.controlSocket) || !daemon.isRunning)
        // It refuses every time, not only the first.
        let again = try ProcessRunner.run(Paths.binary("storekitd"), daemon.base.arguments, timeout: 20)
        #expect(again.status == 1)
        #expect(fileBytes(path) == before)
    }
}
