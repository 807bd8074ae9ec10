import CSQLite
import StoreKitLedger
import StoreKitPosix
#if canImport(Glibc)
import Glibc
#endif

// `storekitctl backup FILE`: SQLite's online backup API, while the daemon serves.

extension SQLiteLedger {
    /// Copies the last committed state of the database into a new file at `destination`.
    /// Units of work still waiting in the commit log are not in it: the daemon saves the store
    /// before a batch with a control command, so everything acknowledged before is.
    ///
    /// The copy is read on its own read-only connection: it sees exactly what was committed
    /// before it started (WAL snapshot isolation), never the uncommitted unit of work of the caller,
    /// and the writer is not blocked meanwhile. `destination` must be an absolute path that does not
    /// exist (it is created with `O_EXCL`, so nothing is ever overwritten). The copy is a
    /// self-contained rollback-journal file, fsynced with its directory and checked with
    /// `PRAGMA integrity_check` before this returns; on any failure it is removed again.
    public func backup(to destination: String) throws(LedgerError) -> BackupReport {
        let started = Monotonic.milliseconds()
        guard destination.hasPrefix("/") else {
            throw LedgerError(.other(SQLITE_MISUSE), path: destination, message: "the backup file must be an absolute path")
        }
        for suffix in ["-journal", "-wal", "-shm"] where FileSystem.exists(destination + suffix) {
            throw LedgerError(.other(SQLITE_CANTOPEN), path: destination,
                             message: "\(destination + suffix) exists; choose another name (a backup never overwrites)")
        }
        // Claim the name first: O_EXCL makes "never overwrite" atomic.
        do throws(Errno) {
            let claimed = try FileDescriptor.open(destination, .writeOnly, options: [.create, .exclusive, .closeOnExec],
                                                  permissions: 0o600)
            try? claimed.close()
        } catch {
            let reason = error == .fileExists ? "it already exists (a backup never overwrites)" : error.description
            let code: LedgerError.Code = error == .noSpace ? .full : .other(SQLITE_CANTOPEN)
            throw LedgerError(code, path: destination, message: "cannot create the backup file: \(reason)")
        }
        do {
            try copy(into: destination)
            let report = try verify(destination, started: started)
            try Self.syncDirectory(of: destination)
            return report
        } catch {
            try? FileSystem.remove(destination)
            try? FileSystem.remove(destination + "-journal")
            throw error
        }
    }

    private func copy(into destination: String) throws(LedgerError) {
        let source = try SQLiteDatabase(path: path, readOnly: true)
        let target = try SQLiteDatabase(path: destination)
        guard let backup = sqlite3_backup_init(target.handle, "main", source.handle, "main") else {
            throw target.error(sqlite3_errcode(target.handle), "backup")
        }
        var status: Int32
        repeat {
            // All pages in one step: one read transaction, so one consistent snapshot.
            status = sqlite3_backup_step(backup, -1)
            if status == SQLITE_BUSY || status == SQLITE_LOCKED { usleep(10_000) }
        } while status == SQLITE_OK || status == SQLITE_BUSY || status == SQLITE_LOCKED
        let finish = sqlite3_backup_finish(backup)
        guard status == SQLITE_DONE, finish == SQLITE_OK else {
            throw target.error(status == SQLITE_DONE ? finish : status, "backup")
        }
        // The pages came from a WAL database: make the copy one self-contained file.
        try target.execute("PRAGMA journal_mode=DELETE")
        // A copy is a database of its own: restored, it must not take this one's commit log
        // (which would roll it forward to the present).
        try target.execute("""
            UPDATE settings SET value = '\(String(CommitLog.randomSalt(), radix: 16))' WHERE key = '\(Self.identityKey)'
            """)
    }

    private func verify(_ destination: String, started: Int64) throws(LedgerError) -> BackupReport {
        let copy = try SQLiteDatabase(path: destination, readOnly: true)
        let check = try copy.scalarText("PRAGMA integrity_check(20)") ?? "no answer"
        guard check == "ok" else {
            throw LedgerError(.corrupt, path: destination, message: "the backup failed its integrity check: \(check)")
        }
        let applicationID = Int32(truncatingIfNeeded: try copy.scalarInt("PRAGMA application_id") ?? 0)
        let version = Int(try copy.scalarInt("PRAGMA user_version") ?? 0)
        guard applicationID == Self.applicationID, version == Self.schemaVersion else {
            throw LedgerError(.corrupt, path: destination,
                             message: "the backup has application_id \(applicationID) and schema \(version)")
        }
        return BackupReport(
            path: destination,
            bytes: DiskSpaceGuard.fileSize(destination),
            pages: Int(try copy.scalarInt("PRAGMA page_count") ?? 0),
            transactions: Int(try copy.scalarInt("SELECT count(*) FROM transactions") ?? 0),
            unfinishedTransactions: Int(try copy.scalarInt("SELECT count(*) FROM transactions WHERE finished = 0") ?? 0),
            highestSequence: Int(try copy.scalarInt("SELECT coalesce(max(last), 0) FROM sequences") ?? 0),
            milliseconds: Int(Monotonic.milliseconds() - started))
    }

    /// Makes the new file and its directory entry durable.
    /// (Either is skipped when it cannot be opened.)
    static func syncDirectory(of file: String) throws(LedgerError) {
        if let opened = try? FileDescriptor.open(file, .readOnly, options: [.closeOnExec]) {
            let synced = Result { () throws(Errno) in try opened.synchronize() }
            try? opened.close()
            if case .failure(let error) = synced {
                throw LedgerError(.io, path: file, message: "cannot sync the backup: \(error)")
            }
        }
        guard let slash = file.lastIndex(of: "/") else { return }
        let directory = slash == file.startIndex ? "/" : String(file[..<slash])
        guard let opened = try? FileDescriptor.open(directory, .readOnly, options: [.directory, .closeOnExec]) else { return }
        let synced = Result { () throws(Errno) in try opened.synchronize() }
        try? opened.close()
        // A file system that cannot sync a directory says EINVAL: nothing more can be done there.
        if case .failure(let error) = synced, error != .invalidArgument {
            throw LedgerError(.io, path: file, message: "cannot sync the backup's directory: \(error)")
        }
    }
}
