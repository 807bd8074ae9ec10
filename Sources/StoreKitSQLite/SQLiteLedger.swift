import CSQLite
import StoreKitLedger
import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

/// The durable payment queue: every transaction of every (uid, app), in one SQLite file.
///
/// Writes happen inside `begin()` … `commit()`; the daemon groups many clients' requests into one
/// unit of work (group commit) and tells no client anything before `commit()` returned.
/// `commit()` makes a unit of work durable in the commit log (CommitLog.swift) — when it returns,
/// or, with a `CommitLogSyncer`, once `commitLog.syncedLSN` reaches it; SQLite commits many of
/// them at once, without an fsync, at `save()`. Transitions are guarded in SQL
/// (`WHERE state = ?`) and the changed-row count is checked.
public final class SQLiteLedger {
    public static let schemaVersion = 3
    /// `PRAGMA application_id`: "SKQD". A database with another id is not ours and is never touched.
    public static let applicationID: Int32 = 0x534B_5144

    public let database: SQLiteDatabase
    public var path: String { database.path }
    /// Low-space mode on a filling file system (see DiskSpaceGuard.swift).
    public let space: DiskSpaceGuard

    var nextID: UInt64 = 0
    /// No row has an id from here up (set with `nextID` from the table): a new row with such an
    /// id, above every id inserted since, may be held without SQLite checking it is unique.
    var unusedIDsFrom = UInt64.max
    var highestInsertedID: UInt64 = 0
    /// The payment key `transaction(uid:app:paymentKey:)` last found in no row, if no row took it since.
    var absentPaymentKey: StoredPaymentKey?
    /// Every payment key in the table or held (and some undone), once built (PaymentKeyFilter.swift).
    var keyFilter: PaymentKeyFilter?
    var keyFilterBuild: PaymentKeyFilterBuild?
    /// Keys inserted since the build began reading: added to its filter when it is taken.
    var keysDuringBuild: [StoredPaymentKey] = []
    var keyFilterWanted = false
    /// When the last build failed (monotonic ms); nil after one succeeded.
    var keyFilterFailedAt: Int64?
    /// For tests: runs on the build's thread before it reads anything.
    var keyFilterBuildHook: (@Sendable () -> Void)?
    /// Keys the build reads per read transaction.
    var keyFilterChunk = 20_000
    /// Lookups of a payment key answered by the filter, without SQLite.
    public internal(set) var keyLookupsSkipped = 0
    /// Per-queue sequence counters, authoritative in memory; written to the `sequences` table at
    /// `save()` for the queues that moved since the last one (units of work in the commit log
    /// carry no counter writes: after a replay they are recomputed from the rows).
    var sequences: [QueueKey: UInt64] = [:]
    /// Unfinished transactions per queue, counted from the table once per queue and then kept by
    /// `insert` and `markFinished`; dropped whenever changes are undone (`unfinishedCount(of:)`).
    var unfinishedCounts: [QueueKey: Int] = [:]
    var movedSequences: Set<QueueKey> = []
    /// The counters as the unit of work found them, restored when it is undone.
    var sequencesAtBegin: [QueueKey: UInt64] = [:]
    var movedAtBegin: Set<QueueKey> = []
    /// A unit of work is open (`begin()` … `commit()`/`rollback()`).
    var inTransaction = false
    /// The unit of work's savepoints are open in SQLite: `batch`, and the first this many of
    /// its requests' (`savepointMarks`). They are opened at its first statement
    /// (`openUnitInSQLite`): a unit that only holds new rows and records them needs none, and
    /// runs while a save's `COMMIT` has the connection (Saver.swift).
    var unitOpenInSQLite = false
    var requestSavepointsInSQLite = 0
    /// The SQLite transaction that holds units of work until `save()` is open.
    var sqliteOpen = false
    /// Since when (monotonic ms) units of work wait to be saved (in the SQLite transaction, held
    /// rows, moved counters); nil when none does.
    var unsavedSince: Int64?
    /// Runs saves' `COMMIT`s off the loop (`startSave()`); nil: `save()` commits on the caller's thread.
    public var saver: Saver?
    /// WAL checkpoints on a connection of their own (`startBackgroundWork`).
    var checkpointer: Checkpointer?
    /// The save whose `COMMIT` has the connection: the LSN it stores and since when its units waited.
    var lentSave: (lsn: UInt64, since: Int64)?
    /// How the last save whose `COMMIT` ran off the loop ended, until `takeSaveOutcome()`.
    var saveOutcome: Result<Void, LedgerError>?
    /// Units of work that began while the connection was lent, and how many of them had to wait
    /// for it (for tests and measurements).
    public internal(set) var unitsDuringSaves = 0
    public internal(set) var unitsThatWaitedForSaves = 0
    /// SQLite lost the open transaction (it rolls back on some I/O errors): the units of work it
    /// held are re-applied from the commit log before the next one.
    var needsCatchUp = false
    /// Where the recording stood at each open request savepoint.
    var savepointMarks: [(bytes: Int, templates: Int)] = []
    var log: CommitLog?
    /// New transaction rows not yet written into the SQLite transaction (HeldRows.swift).
    var held = HeldRows()
    /// The monotonic ms held rows are stamped with; `writeRows(heldLongerThan:now:)` is given times
    /// of the same clock. Tests pass one they set, to age rows without sleeping.
    let heldRowClock: () -> Int64

    /// Grows at every rollback: whoever caches state read from the store (the engine's clock,
    /// switches and next due event) compares it to know when its cache may hold undone changes.
    public internal(set) var generation: UInt64 = 0

    /// What was found at open, for the recovery log line.
    public private(set) var openReport = ""
    /// What opening found wrong but could not mend (records of the commit log it could not
    /// apply), for error-level journal entries.
    public internal(set) var openProblems: [String] = []
    /// What opening found that is expected after a restore (the commit log of the database that
    /// was replaced), for one notice-level journal entry.
    public internal(set) var openNotice: String?

    /// Opens (creating when absent) the database at `path`. Cheap checks only: file header,
    /// application id, schema version, WAL recovery. The full integrity check runs separately.
    public convenience init(path: String) throws(LedgerError) {
        try self.init(path: path, spaceReserve: DiskSpaceGuard.defaultReserveSize)
    }

    /// `spaceReserve`: bytes of the reserve file kept for a full disk (0: none; see DiskSpaceGuard).
    public convenience init(path: String, spaceReserve: Int) throws(LedgerError) {
        try self.init(path: path, spaceReserve: spaceReserve, heldRowClock: Monotonic.milliseconds)
    }

    init(path: String, spaceReserve: Int, heldRowClock: @escaping () -> Int64) throws(LedgerError) {
        self.heldRowClock = heldRowClock
        try Self.refuseLinks(databasePath: path)
        // Created here, 0600 whatever the umask (SQLite would make it 0644): `-wal` and `-shm` follow its mode.
        if let created = try? FileDescriptor.open(path, .writeOnly, options: [.create, .exclusive, .closeOnExec, .noFollow],
                                                  permissions: 0o600) {
            try? created.close()
        }
        space = DiskSpaceGuard(databasePath: path, reserveSize: spaceReserve)
        space.prepareForOpen()
        let existed = try Self.checkHeader(path: path)
        if existed {
            // A truncated file, a foreign or a newer database is refused before a read-write
            // connection exists: closing one would checkpoint (rewrite) a WAL database.
            try Self.checkSize(path: path)
            try Self.identify(path: path)
        }
        database = try SQLiteDatabase(path: path)
        database.fullHandler = { [space] in space.noteFull() }
        database.willUse = { [weak self] () throws(LedgerError) in try self?.prepareConnection() }
        database.onLoanReturned = { [weak self] outcome in self?.saveReturned(outcome) }
        // Identify the file before changing anything about it: a foreign database is never touched
        // (not even switched to WAL, which rewrites its header).
        let applicationID = Int32(truncatingIfNeeded: try database.scalarInt("PRAGMA application_id") ?? 0)
        let version = Int(try database.scalarInt("PRAGMA user_version") ?? 0)
        if existed {
            let tables = try database.scalarInt("SELECT count(*) FROM sqlite_schema") ?? 0
            if applicationID != Self.applicationID && !(applicationID == 0 && tables == 0) {
                throw Self.foreignDatabaseError(path: path, applicationID: applicationID)
            }
        }
        // A newer schema is refused before anything about the file changes.
        guard version <= Self.schemaVersion else { throw Self.newerSchemaError(path: path, version: version) }
        // Small pages: a commit appends every page it touched to the WAL, and the checkpoint
        // copies and fsyncs them; a batch of payments touches one page per index per queue, and
        // 1 KiB pages keep those writes four times smaller than SQLite's default 4 KiB (4 KiB
        // pages measured the same CPU per purchase). Only for a new file.
        if !existed { try database.execute("PRAGMA page_size=1024") }
        // WAL: readers (backups, the integrity check) never block the writer.
        // synchronous=FULL while opening (migrations and commit-log replay are fsynced);
        // startCommitLog() then switches to NORMAL: from there the commit log is what fsyncs.
        guard try database.scalarText("PRAGMA journal_mode=WAL")?.lowercased() == "wal" else {
            throw LedgerError(.io, path: path, message: "cannot switch to WAL journal mode")
        }
        try database.execute("PRAGMA synchronous=FULL")
        try database.execute("PRAGMA foreign_keys=ON")
        // Savepoint journals (one per request) in memory, not in a temporary file.
        try database.execute("PRAGMA temp_store=MEMORY")
        // A page cache (16 MiB at most) that holds the hot index pages of many queues.
        try database.execute("PRAGMA cache_size=-16384")
        // Units of work acknowledged but not yet in the database come back from the commit log,
        // under the schema they were made with, before any migration.
        let identity = version >= 1 ? try storedIdentity() : nil
        var replay = ""
        if let identity { replay = try replayCommitLog(CommitLog(databasePath: path, database: identity)) }
        if version < Self.schemaVersion {
            try migrate(from: version)
            openReport = existed ? "migrated schema \(version) → \(Self.schemaVersion)" : "created schema \(Self.schemaVersion)"
        } else {
            openReport = "schema \(version)"
        }
        openReport += replay
        try startCommitLog(identity: identity)
        nextID = max(try highestAllocatedID() + 1, TransactionIDs.first)
        unusedIDsFrom = nextID
        space.opened()
    }

    /// The largest transaction id ever handed out: in the table, or remembered when `clear`
    /// deleted it, so that an id is never given twice (apps key their ledgers by it).
    func highestAllocatedID() throws(LedgerError) -> UInt64 {
        let highest = try database.scalarInt("""
            SELECT max(coalesce((SELECT max(id) FROM transactions), 0),
                       coalesce((SELECT CAST(value AS INTEGER) FROM settings WHERE key = 'transactions.lastID'), 0))
            """)
        return max(UInt64(highest ?? 0), held.highestID ?? 0)
    }


    /// Reads the first 16 bytes: an existing non-empty file must be an SQLite 3 database.
    static func checkHeader(path: String) throws(LedgerError) -> Bool {
        let file: FileDescriptor
        do throws(Errno) {
            file = try FileDescriptor.open(path, .readOnly, options: [.closeOnExec, .noFollow])
        } catch {
            if error == .notFound { return false }
            throw LedgerError(.io, path: path, message: "cannot open: \(error)")
        }
        let header = try? file.read(atAbsoluteOffset: 0, count: 16)   // nil (unreadable): not a database
        try? file.close()
        if header?.isEmpty == true { return false }
        let magic = Array("SQLite format 3\0".utf8)
        guard header == magic else {
            throw LedgerError(.notADatabase, path: path, message: "file is not an SQLite database (bad header); refusing to touch it")
        }
        return true
    }


    // MARK: Transactions (units of work)

    /// Opens a unit of work. Nothing happens in SQLite yet: its savepoint (and the SQLite
    /// transaction, when none is open) opens at its first statement (`openUnitInSQLite`).
    public func begin() throws(LedgerError) {
        precondition(!inTransaction, "nested store transaction")
        database.takeBackIfDone()
        // Low on space: SQLite commits after every unit of work, so that its checkpoints can
        // reuse the WAL (DiskSpaceGuard.swift).
        if space.isLow && unsavedSince != nil { try? save() }
        space.beforeUnitOfWork(database)
        noticeLostTransaction()
        if needsCatchUp { try catchUp() }
        sequencesAtBegin = sequences
        movedAtBegin = movedSequences
        inTransaction = true
        unitOpenInSQLite = false
        requestSavepointsInSQLite = 0
        if database.isLent { unitsDuringSaves += 1 }
        database.startRecording()
        savepointMarks.removeAll()
        held.beginUnit()
    }

    /// Before a statement runs on the connection (`SQLiteDatabase.willUse`, after a lent
    /// connection came back): a unit of work opens its savepoints.
    func prepareConnection() throws(LedgerError) {
        guard inTransaction, !unitOpenInSQLite else { return }
        try openUnitInSQLite()
    }

    /// Opens the SQLite transaction (when none is open), the unit of work's savepoint and those
    /// of its requests so far.
    func openUnitInSQLite() throws(LedgerError) {
        try database.unrecorded { () throws(LedgerError) in
            // A save whose COMMIT failed off the loop may have lost the transaction; its units of
            // work are applied again from the commit log before the next unit (`noticeLostTransaction`).
            if sqliteOpen { try database.requireTransaction() }
            try openSQLiteTransaction()
            try database.statement("SAVEPOINT batch").run()
            unitOpenInSQLite = true
            while requestSavepointsInSQLite < savepointMarks.count {
                try database.statement("SAVEPOINT request").run()
                requestSavepointsInSQLite += 1
            }
        }
    }

    /// Opens the SQLite transaction that holds units of work until `save()`, unless it is open.
    func openSQLiteTransaction() throws(LedgerError) {
        guard !sqliteOpen else { return }
        try database.execute("BEGIN IMMEDIATE")
        sqliteOpen = true
        if unsavedSince == nil { unsavedSince = Monotonic.milliseconds() }
    }

    /// Makes everything since `begin()` durable: its statements are appended to the commit log and
    /// fsynced. Throws (and undoes the unit of work) when it could not.
    public func commit() throws(LedgerError) {
        precondition(inTransaction, "commit without begin")
        do throws(LedgerError) {
            guard !database.recordingFailed else {
                throw LedgerError(.other(SQLITE_NOMEM), path: path, message: "out of memory recording a change")
            }
            // SQLite rolls a transaction back by itself on some errors: then this unit of work's
            // changes are not what it recorded, and nothing of it may reach the log.
            if unitOpenInSQLite { try database.requireTransaction() }
            if !database.recorded.isEmpty, let log {
                try log.append(database.recorded)
                if unsavedSince == nil { unsavedSince = Monotonic.milliseconds() }
            }
            database.stopRecording()
            if unitOpenInSQLite { try database.statement("RELEASE batch").run() }
            inTransaction = false
            unitOpenInSQLite = false
            held.endUnit()
        } catch {
            if error.code == .full { space.noteFull() }
            rollback()
            throw error
        }
        if space.isLow { try? save() }
    }

    /// Abandons the unit of work and forgets cached counters that may include its changes.
    public func rollback() {
        database.stopRecording()
        let wasInUnit = inTransaction
        if inTransaction {
            if unitOpenInSQLite {
                try? database.statement("ROLLBACK TO batch").run()
                try? database.statement("RELEASE batch").run()
            }
            inTransaction = false
            unitOpenInSQLite = false
        }
        held.rollBackUnit()
        noticeLostTransaction()
        if needsCatchUp {
            // The units of work since the last save come back from the commit log, with counters
            // recomputed from their rows.
            forgetCachedCounters()
        } else if wasInUnit {
            // Earlier units of work wait to be saved (in the SQLite transaction, held, or made
            // while a save had the connection): back to the counters as this one found them.
            forgetCachedCounters(keeping: sequencesAtBegin, moved: movedAtBegin)
        } else {
            forgetCachedCounters(keeping: sequences, moved: movedSequences)
        }
    }

    /// Drops counters that may include undone changes (keeping the ones given) and reads the
    /// next transaction id from the table again.
    func forgetCachedCounters(keeping kept: [QueueKey: UInt64] = [:], moved: Set<QueueKey> = []) {
        sequences = kept
        unfinishedCounts.removeAll()
        movedSequences = moved
        generation &+= 1
        let highest = try? highestAllocatedID()
        nextID = max((highest ?? 0) + 1, TransactionIDs.first)
        unusedIDsFrom = highest == nil ? .max : nextID
        highestInsertedID = 0
        absentPaymentKey = nil
    }

    public var isInTransaction: Bool { inTransaction }

    /// Rows held in memory that wait to be written into the SQLite transaction, new or changed
    /// (HeldRows.swift).
    public var heldRowCount: Int { held.count }
    /// Written rows kept in memory for the requests that follow them.
    var keptWrittenRowCount: Int { held.writtenRowCount }

    // MARK: Savepoints: one request's changes inside the batch's unit of work

    /// Starts one request's changes, so that its failure can be undone without the batch's.
    public func savepoint() throws(LedgerError) {
        precondition(inTransaction, "savepoint outside a unit of work")
        if unitOpenInSQLite {
            try database.requireTransaction()   // else SAVEPOINT would start a transaction of its own
            try database.statement("SAVEPOINT request").run()
            requestSavepointsInSQLite += 1
        }
        savepointMarks.append(database.recordingMark)
        held.beginSavepoint()
    }

    /// Keeps the request's changes in the unit of work.
    public func releaseSavepoint() throws(LedgerError) {
        if requestSavepointsInSQLite == savepointMarks.count && requestSavepointsInSQLite > 0 {
            try database.statement("RELEASE request").run()
            requestSavepointsInSQLite -= 1
        }
        savepointMarks.removeLast()
        held.releaseSavepoint()
    }

    /// Undoes the request's changes. Ids and sequence numbers it allocated stay used (gaps are
    /// harmless: both only need to be unique and increasing).
    public func rollbackToSavepoint() {
        if requestSavepointsInSQLite == savepointMarks.count && requestSavepointsInSQLite > 0 {
            try? database.statement("ROLLBACK TO request").run()
            try? database.statement("RELEASE request").run()
            requestSavepointsInSQLite -= 1
        }
        if let mark = savepointMarks.popLast() { database.rollBackRecording(to: mark) }
        held.rollBackSavepoint()
        unfinishedCounts.removeAll()
        absentPaymentKey = nil   // the undone changes may have removed the row that had it
        generation &+= 1
    }

    /// Hands checkpoints to a `Checkpointer` thread instead of running them inside commits.
    public func disableAutomaticCheckpoints() throws(LedgerError) {
        try database.execute("PRAGMA wal_autocheckpoint=0")
        database.watchWAL()
    }

}
