import CSQLite
import StoreKitLedger
import StoreKitPosix
#if canImport(Glibc)
import Glibc
#endif

// Cheap checks of an existing database file before the store opens it for writing. Each refusal
// names the file and says what is wrong; the file is read, never written.

extension SQLiteLedger {
    /// Every file the store keeps beside the database, the database first.
    static func files(databasePath path: String) -> [String] {
        [path, path + "-wal", path + "-shm", path + "-journal", path + "-reserve",
         CommitLog.segmentPath(path, 0), CommitLog.segmentPath(path, 1)]
    }

    /// Refuses a database whose files are symlinks or hard links (which another user could aim
    /// at a file of theirs to read it, or at any file to have it overwritten), and makes existing
    /// files 0600: purchases are private to the daemon. Files created later are 0600 as well
    /// (the store creates them so, and SQLite gives `-wal` and `-shm` the database's mode).
    static func refuseLinks(databasePath path: String) throws(LedgerError) {
        for file in files(databasePath: path) {
            guard let status = try? FileSystem.status(of: file, followingSymlinks: false) else { continue }
            guard status.st_mode & S_IFMT == S_IFREG else {
                throw LedgerError(.io, path: file, message: status.st_mode & S_IFMT == S_IFLNK
                    ? "\(file) is a symbolic link; the state directory must hold the store's own files only"
                    : "\(file) is not a regular file")
            }
            guard status.st_nlink == 1 else {
                throw LedgerError(.io, path: file, message: "\(file) has \(status.st_nlink) hard links; the state directory must hold the store's own files only")
            }
            if status.st_mode & 0o077 != 0 {
                do throws(Errno) {
                    try FileSystem.setPermissions(of: file, to: 0o600)
                } catch {
                    throw LedgerError(.io, path: file, message: "cannot make \(file) private (0600): \(error)")
                }
            }
        }
    }

    /// The size the SQLite header promises against the size of the file: a database cut short
    /// (a partial copy, a full disk during a copy, a truncation) is refused before it is used.
    ///
    /// Skipped while a non-empty `-wal` file exists: a crash in the middle of a checkpoint may
    /// leave the main file short, and the WAL holds the pages that complete it.
    static func checkSize(path: String) throws(LedgerError) {
        if DiskSpaceGuard.fileSize(path + "-wal") > 0 { return }
        let file: FileDescriptor
        do throws(Errno) {
            file = try FileDescriptor.open(path, .readOnly, options: [.closeOnExec, .noFollow])
        } catch {
            throw LedgerError(.io, path: path, message: "cannot open: \(error)")
        }
        // Unreadable counts as too short: the file is refused as truncated below.
        let header = (try? file.read(atAbsoluteOffset: 0, count: 100)) ?? []
        let fileSize: Int
        do throws(Errno) {
            fileSize = Int(try file.status().st_size)
        } catch {
            throw LedgerError(.io, path: path, message: "cannot stat: \(error)")
        }
        try? file.close()
        guard header.count == 100 else {
            throw LedgerError(.corrupt, path: path,
                             message: "the database is truncated: the file has \(fileSize) bytes, less than an SQLite header; refusing to touch it")
        }
        func bigEndian(_ offset: Int, _ width: Int) -> Int {
            header[offset..<offset + width].reduce(0) { $0 << 8 | Int($1) }
        }
        let rawPageSize = bigEndian(16, 2)
        let pageSize = rawPageSize == 1 ? 65536 : rawPageSize
        guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else {
            throw LedgerError(.corrupt, path: path,
                             message: "the database header is damaged (page size \(rawPageSize)); refusing to touch it")
        }
        guard fileSize % pageSize == 0 else {
            throw LedgerError(.corrupt, path: path,
                             message: "the database is truncated or damaged: \(fileSize) bytes is not a whole number of "
                                 + "\(pageSize)-byte pages; refusing to touch it")
        }
        let changeCounter = bigEndian(24, 4)
        let pages = bigEndian(28, 4)
        let validFor = bigEndian(92, 4)
        if validFor == changeCounter, pages > 0, fileSize < pages * pageSize {
            throw LedgerError(.corrupt, path: path,
                             message: "the database is truncated: its header counts \(pages) pages (\(pages * pageSize) bytes) "
                                 + "but the file has \(fileSize) bytes; refusing to touch it")
        }
    }

    /// Reads the application id, schema version and table count on a read-only connection (which
    /// never checkpoints nor rolls back a journal; with no WAL, one that creates no file at all) and refuses what is not a storekitd database of a
    /// schema this version knows.
    static func identify(path: String) throws(LedgerError) {
        let applicationID: Int32
        let version: Int
        let tables: Int64
        do {
            // Without a WAL the file is the whole database: read it without creating -wal/-shm.
            let probe = DiskSpaceGuard.fileSize(path + "-wal") > 0
                ? try SQLiteDatabase(path: path, readOnly: true) : try SQLiteDatabase(immutablePath: path)
            applicationID = Int32(truncatingIfNeeded: try probe.scalarInt("PRAGMA application_id") ?? 0)
            version = Int(try probe.scalarInt("PRAGMA user_version") ?? 0)
            tables = try probe.scalarInt("SELECT count(*) FROM sqlite_schema") ?? 0
        } catch {
            throw LedgerError(error.code, path: path,
                             message: "cannot read it as an SQLite database (\(error.message)); refusing to touch it")
        }
        if applicationID != Self.applicationID && !(applicationID == 0 && tables == 0) {
            throw foreignDatabaseError(path: path, applicationID: applicationID)
        }
        if version > Self.schemaVersion { throw newerSchemaError(path: path, version: version) }
    }

    static func foreignDatabaseError(path: String, applicationID: Int32) -> LedgerError {
        let hex = String(UInt32(bitPattern: applicationID), radix: 16)
        return LedgerError(.foreignDatabase, path: path,
                          message: "not a storekitd database (application_id \(applicationID) = 0x\(hex), storekitd's is "
                              + "0x\(String(UInt32(bitPattern: Self.applicationID), radix: 16))); refusing to touch it")
    }

    static func newerSchemaError(path: String, version: Int) -> LedgerError {
        LedgerError(.unsupportedSchema(found: version, supported: Self.schemaVersion), path: path,
                   message: "schema version \(version) is newer than this storekitd supports (\(Self.schemaVersion)); "
                       + "refusing to touch it: run the storekitd that wrote it, or restore a backup")
    }
}
