import CSQLite
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
public final class TransactionStore {
    public static let schemaVersion = 2
    /// `PRAGMA application_id`: "SKQD". A database with another id is not ours and is never touched.
    public static let applicationID: Int32 = 0x534B_5144

    public let database: SQLiteDatabase
    public var path: String { database.path }
    /// Low-space mode on a filling file system (see DiskSpaceGuard.swift).
    public let space: DiskSpaceGuard

    private var nextID: UInt64 = 0
    /// No row has an id from here up (set with `nextID` from the table): a new row with such an
    /// id, above every id inserted since, may be held without SQLite checking it is unique.
    private var unusedIDsFrom = UInt64.max
    private var highestInsertedID: UInt64 = 0
    /// The payment key `transaction(uid:app:paymentKey:)` last found in no row, if no row took it since.
    private var absentPaymentKey: StoredPaymentKey?
    /// Every payment key in the table or held (and some undone), once built (PaymentKeyFilter.swift).
    private var keyFilter: PaymentKeyFilter?
    private var keyFilterBuild: PaymentKeyFilterBuild?
    /// Keys inserted since the build began reading: added to its filter when it is taken.
    private var keysDuringBuild: [StoredPaymentKey] = []
    private var keyFilterWanted = false
    /// When the last build failed (monotonic ms); nil after one succeeded.
    private var keyFilterFailedAt: Int64?
    /// For tests: runs on the build's thread before it reads anything.
    var keyFilterBuildHook: (@Sendable () -> Void)?
    /// Keys the build reads per read transaction.
    var keyFilterChunk = 20_000
    /// Lookups of a payment key answered by the filter, without SQLite.
    public private(set) var keyLookupsSkipped = 0
    /// Per-queue sequence counters, authoritative in memory; written to the `sequences` table at
    /// `save()` for the queues that moved since the last one (units of work in the commit log
    /// carry no counter writes: after a replay they are recomputed from the rows).
    private var sequences: [QueueKey: UInt64] = [:]
    /// Unfinished transactions per queue, counted from the table once per queue and then kept by
    /// `insert` and `markFinished`; dropped whenever changes are undone (`unfinishedCount(of:)`).
    private var unfinishedCounts: [QueueKey: Int] = [:]
    var movedSequences: Set<QueueKey> = []
    /// The counters as the unit of work found them, restored when it is undone.
    private var sequencesAtBegin: [QueueKey: UInt64] = [:]
    private var movedAtBegin: Set<QueueKey> = []
    /// A unit of work is open (`begin()` … `commit()`/`rollback()`): the savepoint `batch`.
    var inTransaction = false
    /// The SQLite transaction that holds units of work until `save()`, and when it began (ms).
    var sqliteOpen = false
    var sqliteOpenedAt: Int64 = 0
    /// SQLite lost the open transaction (it rolls back on some I/O errors): the units of work it
    /// held are re-applied from the commit log before the next one.
    var needsCatchUp = false
    /// Where the recording stood at each open request savepoint.
    var savepointMarks: [(bytes: Int, templates: Int)] = []
    var log: CommitLog?
    /// New transaction rows not yet written into the SQLite transaction (HeldRows.swift).
    var held = HeldRows()

    /// Grows at every rollback: whoever caches state read from the store (the engine's clock,
    /// switches and next due event) compares it to know when its cache may hold undone changes.
    public private(set) var generation: UInt64 = 0

    /// What was found at open, for the recovery log line.
    public private(set) var openReport = ""
    /// What opening found wrong but could not mend (records of the commit log it could not
    /// apply), for error-level journal entries.
    public internal(set) var openProblems: [String] = []

    public struct QueueKey: Hashable, Sendable {
        public let uid: UInt32
        public let app: String
        public init(uid: UInt32, app: String) {
            self.uid = uid
            self.app = app
        }
    }

    /// Opens (creating when absent) the database at `path`. Cheap checks only: file header,
    /// application id, schema version, WAL recovery. The full integrity check runs separately.
    public convenience init(path: String) throws(StoreError) {
        try self.init(path: path, spaceReserve: DiskSpaceGuard.defaultReserveSize)
    }

    /// `spaceReserve`: bytes of the reserve file kept for a full disk (0: none; see DiskSpaceGuard).
    public init(path: String, spaceReserve: Int) throws(StoreError) {
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
            throw StoreError(.io, path: path, message: "cannot switch to WAL journal mode")
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
        nextID = max(try highestAllocatedID() + 1, Self.firstTransactionID)
        unusedIDsFrom = nextID
        space.opened()
    }

    /// The largest transaction id ever handed out: in the table, or remembered when `clear`
    /// deleted it, so that an id is never given twice (apps key their ledgers by it).
    private func highestAllocatedID() throws(StoreError) -> UInt64 {
        let highest = try database.scalarInt("""
            SELECT max(coalesce((SELECT max(id) FROM transactions), 0),
                       coalesce((SELECT CAST(value AS INTEGER) FROM settings WHERE key = 'transactions.lastID'), 0))
            """)
        return max(UInt64(highest ?? 0), held.highestID ?? 0)
    }

    /// Transaction identifiers look like the App Store's: 16 digits, from here up (see `allocateTransactionID`).
    public static let firstTransactionID: UInt64 = 2_000_000_000_000_001

    /// Reads the first 16 bytes: an existing non-empty file must be an SQLite 3 database.
    private static func checkHeader(path: String) throws(StoreError) -> Bool {
        let file: FileDescriptor
        do throws(Errno) {
            file = try FileDescriptor.open(path, .readOnly, options: [.closeOnExec, .noFollow])
        } catch {
            if error == .notFound { return false }
            throw StoreError(.io, path: path, message: "cannot open: \(error)")
        }
        let header = try? file.read(atAbsoluteOffset: 0, count: 16)   // nil (unreadable): not a database
        try? file.close()
        if header?.isEmpty == true { return false }
        let magic = Array("SQLite format 3\0".utf8)
        guard header == magic else {
            throw StoreError(.notADatabase, path: path, message: "file is not an SQLite database (bad header); refusing to touch it")
        }
        return true
    }

    private func migrate(from version: Int) throws(StoreError) {
        try database.immediateTransaction { () throws(StoreError) in
            if version < 1 {
                try database.execute("""
                    CREATE TABLE transactions (
                        id INTEGER PRIMARY KEY,
                        original_id INTEGER,
                        uid INTEGER NOT NULL,
                        app TEXT NOT NULL,
                        product TEXT NOT NULL,
                        quantity INTEGER NOT NULL,
                        state INTEGER NOT NULL,
                        sequence INTEGER NOT NULL,
                        date INTEGER NOT NULL,
                        finished INTEGER NOT NULL DEFAULT 0,
                        error_code INTEGER,
                        error_message TEXT,
                        revocation_date INTEGER,
                        revocation_reason INTEGER,
                        app_username TEXT,
                        expires_date INTEGER,
                        payment_key TEXT
                    );
                    CREATE INDEX transactions_unfinished ON transactions(uid, app, id) WHERE finished = 0;
                    CREATE INDEX transactions_queue ON transactions(uid, app, product);
                    CREATE UNIQUE INDEX transactions_payment_key ON transactions(uid, app, payment_key)
                        WHERE payment_key IS NOT NULL;
                    CREATE TABLE sequences (
                        uid INTEGER NOT NULL, app TEXT NOT NULL, last INTEGER NOT NULL,
                        PRIMARY KEY (uid, app)
                    ) WITHOUT ROWID;
                    CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
                    """)
            }
            if version < 2 {
                // v2: the simulated store's durable schedule. A subscription row is one buyer's
                // subscription in one group (renewals, expiry, billing retry); a purchase request is
                // an Ask to Buy awaiting a parent or an interrupted purchase awaiting resolution.
                // `due` / `expires` is when the next scheduled event fires on the store clock.
                try database.execute("""
                    CREATE TABLE subscriptions (
                        original_id INTEGER PRIMARY KEY,
                        uid INTEGER NOT NULL,
                        app TEXT NOT NULL,
                        group_id TEXT NOT NULL,
                        product TEXT NOT NULL,
                        quantity INTEGER NOT NULL,
                        app_username TEXT,
                        status INTEGER NOT NULL,
                        period_start INTEGER NOT NULL,
                        expires_date INTEGER NOT NULL,
                        auto_renew INTEGER NOT NULL,
                        next_product TEXT,
                        offer_periods_left INTEGER NOT NULL DEFAULT 0,
                        grace_end INTEGER,
                        retry_end INTEGER,
                        due INTEGER,
                        last_transaction INTEGER NOT NULL,
                        renewals INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE UNIQUE INDEX subscriptions_group ON subscriptions(uid, app, group_id);
                    CREATE INDEX subscriptions_due ON subscriptions(due) WHERE due IS NOT NULL;
                    CREATE TABLE purchase_requests (
                        transaction_id INTEGER PRIMARY KEY,
                        kind INTEGER NOT NULL,
                        uid INTEGER NOT NULL,
                        app TEXT NOT NULL,
                        product TEXT NOT NULL,
                        created INTEGER NOT NULL,
                        expires INTEGER
                    );
                    CREATE INDEX purchase_requests_product ON purchase_requests(uid, app, product, kind);
                    CREATE INDEX purchase_requests_due ON purchase_requests(expires) WHERE expires IS NOT NULL;
                    """)
            }
            try database.execute("PRAGMA application_id=\(Self.applicationID)")
            try database.execute("PRAGMA user_version=\(Self.schemaVersion)")
        }
    }

    // MARK: Transactions (units of work)

    /// Opens a unit of work (inside the SQLite transaction, which it opens when none is).
    public func begin() throws(StoreError) {
        precondition(!inTransaction, "nested store transaction")
        // Low on space: SQLite commits after every unit of work, so that its checkpoints can
        // reuse the WAL (DiskSpaceGuard.swift).
        if space.isLow && sqliteOpen { try? save() }
        space.beforeUnitOfWork(database)
        noticeLostTransaction()
        if needsCatchUp { try catchUp() }
        if !sqliteOpen {
            try database.execute("BEGIN IMMEDIATE")
            sqliteOpen = true
            sqliteOpenedAt = DiskSpaceGuard.monotonicMilliseconds()
        }
        sequencesAtBegin = sequences
        movedAtBegin = movedSequences
        try database.statement("SAVEPOINT batch").run()
        inTransaction = true
        database.startRecording()
        savepointMarks.removeAll()
        held.beginUnit()
    }

    /// Makes everything since `begin()` durable: its statements are appended to the commit log and
    /// fsynced. Throws (and undoes the unit of work) when it could not.
    public func commit() throws(StoreError) {
        precondition(inTransaction, "commit without begin")
        do throws(StoreError) {
            guard !database.recordingFailed else {
                throw StoreError(.other(SQLITE_NOMEM), path: path, message: "out of memory recording a change")
            }
            // SQLite rolls a transaction back by itself on some errors: then this unit of work's
            // changes are not what it recorded, and nothing of it may reach the log.
            try database.requireTransaction()
            if !database.recorded.isEmpty, let log {
                try log.append(database.recorded)
            }
            database.stopRecording()
            try database.statement("RELEASE batch").run()
            inTransaction = false
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
        if inTransaction {
            try? database.statement("ROLLBACK TO batch").run()
            try? database.statement("RELEASE batch").run()
            inTransaction = false
        }
        held.rollBackUnit()
        noticeLostTransaction()
        if sqliteOpen {
            // Earlier units of work are still in the SQLite transaction: back to the counters
            // as this one found them.
            forgetCachedCounters(keeping: sequencesAtBegin, moved: movedAtBegin)
        } else {
            forgetCachedCounters()
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
        nextID = max((highest ?? 0) + 1, Self.firstTransactionID)
        unusedIDsFrom = highest == nil ? .max : nextID
        highestInsertedID = 0
        absentPaymentKey = nil
    }

    public var isInTransaction: Bool { inTransaction }

    /// New rows held in memory, not yet written into the SQLite transaction (HeldRows.swift).
    public var heldRowCount: Int { held.count }

    // MARK: Savepoints: one request's changes inside the batch's unit of work

    /// Starts one request's changes, so that its failure can be undone without the batch's.
    public func savepoint() throws(StoreError) {
        precondition(inTransaction, "savepoint outside a unit of work")
        try database.requireTransaction()   // else SAVEPOINT would start a transaction of its own
        try database.statement("SAVEPOINT request").run()
        savepointMarks.append(database.recordingMark)
        held.beginSavepoint()
    }

    /// Keeps the request's changes in the unit of work.
    public func releaseSavepoint() throws(StoreError) {
        try database.statement("RELEASE request").run()
        savepointMarks.removeLast()
        held.releaseSavepoint()
    }

    /// Undoes the request's changes. Ids and sequence numbers it allocated stay used (gaps are
    /// harmless: both only need to be unique and increasing).
    public func rollbackToSavepoint() {
        try? database.statement("ROLLBACK TO request").run()
        try? database.statement("RELEASE request").run()
        if let mark = savepointMarks.popLast() { database.rollBackRecording(to: mark) }
        held.rollBackSavepoint()
        unfinishedCounts.removeAll()
        absentPaymentKey = nil   // the undone changes may have removed the row that had it
        generation &+= 1
    }

    /// Hands checkpoints to a `Checkpointer` thread instead of running them inside commits.
    public func disableAutomaticCheckpoints() throws(StoreError) {
        try database.execute("PRAGMA wal_autocheckpoint=0")
        database.watchWAL()
    }

    // MARK: Allocation

    /// A new transaction id: above every id this database gave, and at least the clock's id, so
    /// that a database created later (a reinstall, another `--state-dir`, a restore into a fresh
    /// directory) never gives an id an earlier one gave: apps key what they granted by it.
    public func allocateTransactionID() -> UInt64 {
        precondition(inTransaction, "id allocated outside a unit of work")
        let id = max(nextID, Self.clockTransactionID())
        nextID = id + 1
        return id
    }

    /// Microseconds since 2026-01-01T00:00:00Z, above `firstTransactionID`: 16 decimal digits,
    /// like the App Store's, for the next 250 years. No daemon gives ids faster than one per
    /// microsecond, so ids from the clock stay ahead of every id given earlier on this machine
    /// unless the wall clock is set back.
    static func clockTransactionID() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let microseconds = Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000 - clockEpochMicroseconds
        return firstTransactionID + UInt64(max(microseconds, 0))
    }

    private static let clockEpochMicroseconds: Int64 = 1_767_225_600 * 1_000_000

    /// The next per-(uid, app) sequence number (stored at the next `save()`; after a crash,
    /// recomputed from the rows that carry it).
    public func nextSequence(uid: UInt32, app: String) throws(StoreError) -> UInt64 {
        precondition(inTransaction, "sequence allocated outside a unit of work")
        let key = QueueKey(uid: uid, app: app)
        let last: UInt64
        if let cached = sequences[key] {
            last = cached
        } else {
            let select = try database.statement("SELECT last FROM sequences WHERE uid = ? AND app = ?")
            select.bind(1, Int64(uid))
            select.bind(2, app)
            last = try select.firstRow { UInt64($0.int64(0)) } ?? 0
        }
        let next = last + 1
        sequences[key] = next
        movedSequences.insert(key)
        return next
    }

    /// Stores the counters that moved since the last save (numbers handed out by a request that
    /// was undone stay used: gaps are harmless).
    func storeMovedSequences() throws(StoreError) {
        guard !movedSequences.isEmpty else { return }
        let upsert = try database.statement("""
            INSERT INTO sequences(uid, app, last) VALUES(?, ?, ?)
            ON CONFLICT(uid, app) DO UPDATE SET last = excluded.last
            """)
        for key in movedSequences {
            guard let last = sequences[key] else { continue }
            upsert.reset()
            upsert.bind(1, Int64(key.uid))
            upsert.bind(2, key.app)
            upsert.bind(3, Int64(last))
            try upsert.run()
        }
        movedSequences.removeAll(keepingCapacity: true)
    }

    // MARK: Writes

    /// Adds a new transaction; a second row with its id, or with its payment key in its queue, is
    /// refused. In a unit of work, a row whose id and key are known to be new (an id from
    /// `allocateTransactionID()`, a key that `transaction(uid:app:paymentKey:)` just found in no
    /// row) is held (`HeldRows`) and its INSERT recorded for the commit log: it reaches SQLite
    /// at the next save or at a query that needs it. Any other row is inserted at once.
    public func insert(_ record: TransactionRecord, paymentKey: String? = nil) throws(StoreError) {
        // On a full disk the space left goes to finishing what exists, not to new transactions.
        if let refusal = space.newTransactionRefusal { throw StoreError(.full, path: path, message: refusal) }
        let key = paymentKey.map { StoredPaymentKey(uid: record.uid, app: record.app, key: $0) }
        if held.row(id: record.id) != nil || key.flatMap({ held.row(key: $0) }) != nil {
            throw StoreError(.other(SQLITE_CONSTRAINT | (8 << 8)), path: path,   // SQLITE_CONSTRAINT_UNIQUE
                             message: "transaction \(record.id) or its payment key is taken already")
        }
        let keyKnownNew = key.map { $0 == absentPaymentKey } ?? true
        let knownNew = keyKnownNew && record.id >= unusedIDsFrom && record.id > highestInsertedID
        let values = Self.insertValues(record, paymentKey: paymentKey)
        if inTransaction && knownNew {
            try database.recordWithoutRunning(Self.insertSQL, values)
            held.add(HeldRows.Row(record: record.storedForm, key: key, heldSince: DiskSpaceGuard.monotonicMilliseconds()))
        } else {
            let insert = try database.statement(Self.insertSQL)
            insert.bind(values)
            try insert.run()
        }
        highestInsertedID = max(highestInsertedID, record.id)
        if !record.finished { unfinishedCounts[QueueKey(uid: record.uid, app: record.app)]? += 1 }
        if let key {
            absentPaymentKey = nil
            noteKeyInserted(key)
        }
    }

    // MARK: The payment-key filter

    /// Starts building, on a thread with its own read connection, a filter of the payment keys that
    /// proves most new keys new without an index lookup (PaymentKeyFilter.swift). For the daemon,
    /// after opening. The build needs every acknowledged key committed: while anything is not
    /// (between saves, or units of work lost with SQLite's transaction), it starts after the
    /// next save instead. A build that fails is tried again after `keyFilterRetry` seconds.
    public func startPaymentKeyFilter() {
        keyFilterWanted = true
        startKeyFilterIfReady()
    }

    /// Seconds between attempts to build the filter after one failed.
    static let keyFilterRetry: Int64 = 30

    /// Starts a build if one is wanted, none runs or is due again, and everything is committed
    /// (then the build's reads see every key but those inserted from here on, which
    /// `noteKeyInserted` keeps for it).
    func startKeyFilterIfReady(capacity: Int = 0) {
        guard keyFilterWanted, keyFilterBuild == nil, !sqliteOpen, !needsCatchUp, held.isEmpty else { return }
        let now = DiskSpaceGuard.monotonicMilliseconds()
        if keyFilter == nil, let failed = keyFilterFailedAt, now - failed < Self.keyFilterRetry * 1000 { return }
        keyFilter = nil
        keysDuringBuild.removeAll()
        keyFilterBuild = PaymentKeyFilterBuild(path: path, minimumCapacity: capacity, chunk: keyFilterChunk,
                                               beforeReading: keyFilterBuildHook)
    }

    private func noteKeyInserted(_ key: StoredPaymentKey) {
        if keyFilter != nil {
            keyFilter?.insert(key)
        } else if keyFilterBuild != nil {
            keysDuringBuild.append(key)
        }
    }

    /// The filter, once the build has finished (nil while it runs, or if it failed).
    private func currentKeyFilter() -> PaymentKeyFilter? {
        if let build = keyFilterBuild {
            switch build.take() {
            case .building:
                return nil
            case .built(var filter):
                for key in keysDuringBuild { filter.insert(key) }
                keyFilter = filter
                keyFilterFailedAt = nil
            case .failed, .taken:
                keyFilterFailedAt = DiskSpaceGuard.monotonicMilliseconds()
            }
            keyFilterBuild = nil
            keysDuringBuild = []
        }
        return keyFilter
    }

    /// After a save (nothing uncommitted): a filter too full to be of use is built again, larger;
    /// one that could not start or failed is tried again.
    func keepKeyFilterUseful() {
        _ = currentKeyFilter()
        if let filter = keyFilter {
            if filter.isFull { keyFilter = nil; startKeyFilterIfReady(capacity: 2 * filter.count) }
        } else {
            startKeyFilterIfReady()
        }
    }

    /// Writes the held rows into the SQLite transaction, oldest first.
    func writeHeldRows() throws(StoreError) {
        guard !held.isEmpty else { return }
        try write(held.allIDs)
    }

    /// Writes the rows held `age` ms or longer into the SQLite transaction, between units of
    /// work: spread over the loop's turns, not all at the next save (which would stall the
    /// requests that arrive meanwhile). A purchase is mostly finished by then, and written once.
    public func writeRows(heldLongerThan age: Int64, now: Int64) throws(StoreError) {
        precondition(!inTransaction, "rows written inside a unit of work")
        noticeLostTransaction()
        guard !held.isEmpty else { return }
        let ids = held.takeIDs(heldSince: now - age)
        if !ids.isEmpty { try write(ids) }
    }

    /// Not recorded: these changes are in the units of work that made them.
    private func write(_ ids: [UInt64]) throws(StoreError) {
        try database.requireTransaction()
        try database.unrecorded { () throws(StoreError) in
            let insert = try database.statement(Self.insertSQL)
            for id in ids {
                guard let row = held.row(id: id) else { continue }
                insert.reset()   // every parameter is bound again
                insert.bind(Self.insertValues(row.record, paymentKey: row.key?.text))
                try insert.run()
                held.noteWritten(id: id)
            }
        }
    }

    private static let insertSQL = """
        INSERT INTO transactions(id, original_id, uid, app, product, quantity, state, sequence, date, finished,
            error_code, error_message, revocation_date, revocation_reason, app_username, expires_date, payment_key)
        VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """

    /// The parameters of `insertSQL` for `record`.
    private static func insertValues(_ record: TransactionRecord, paymentKey: String?) -> [SQLiteDatabase.BoundValue] {
        [.integer(Int64(record.id)), .init(record.originalID.map { Int64($0) }), .integer(Int64(record.uid)),
         .text(record.app), .text(record.productID), .integer(Int64(record.quantity)),
         .integer(Int64(record.state.rawValue)), .integer(Int64(record.sequence)), .integer(record.date),
         .integer(record.finished ? 1 : 0), .init(record.errorCode.map { Int64($0) }), .init(record.errorMessage),
         .init(record.revocationDate), .init(record.revocationReason.map { Int64($0) }),
         .init(record.applicationUsername), .init(record.expiresDate), .init(paymentKey)]
    }

    /// Moves `id` from `from` to `to` if it is still in `from` and unfinished; false when it was not.
    /// `expiresDate` and `originalID`, when given, are set too (an approved subscription purchase).
    public func transition(
        id: UInt64, from: TransactionState, to: TransactionState, sequence: UInt64, date: Int64,
        errorCode: Int32? = nil, errorMessage: String? = nil, expiresDate: Int64? = nil, originalID: UInt64? = nil
    ) throws(StoreError) -> Bool {
        precondition(from.canMove(to: to), "illegal transition \(from) → \(to)")
        try writeHeldRows()
        let update = try database.statement("""
            UPDATE transactions SET state = ?1, sequence = ?2, date = ?3, error_code = ?4, error_message = ?5,
                expires_date = coalesce(?8, expires_date), original_id = coalesce(?9, original_id)
            WHERE id = ?6 AND state = ?7 AND finished = 0
            """)
        update.bind(1, Int64(to.rawValue))
        update.bind(2, Int64(sequence))
        update.bind(3, date)
        update.bind(4, errorCode.map { Int64($0) })
        update.bind(5, errorMessage)
        update.bind(6, Int64(id))
        update.bind(7, Int64(from.rawValue))
        update.bind(8, expiresDate)
        update.bind(9, originalID.map { Int64($0) })
        try update.run()
        return database.changes == 1
    }

    /// Marks a finishable transaction finished; false when it is not in a finishable, unfinished state.
    /// `queue`: the transaction's queue, to keep its unfinished count (nil: counts are dropped).
    public func markFinished(id: UInt64, sequence: UInt64, of queue: QueueKey? = nil) throws(StoreError) -> Bool {
        let finished = try markFinishedRow(id: id, sequence: sequence)
        if finished {
            if let queue { unfinishedCounts[queue]? -= 1 } else { unfinishedCounts.removeAll() }
        }
        return finished
    }

    private func markFinishedRow(id: UInt64, sequence: UInt64) throws(StoreError) -> Bool {
        let sql = """
            UPDATE transactions SET finished = 1, sequence = ?
            WHERE id = ? AND finished = 0 AND state IN (1, 2, 3)
            """
        let values: [SQLiteDatabase.BoundValue] = [.integer(Int64(sequence)), .integer(Int64(id))]
        if let row = held.row(id: id) {
            guard !row.record.finished, row.record.state.isFinishable else { return false }
            try database.recordWithoutRunning(sql, values)
            held.update(id: id) { record in
                record.finished = true
                record.sequence = sequence
            }
            return true
        }
        let update = try database.statement(sql)
        update.bind(values)
        try update.run()
        return database.changes == 1
    }

    public func setRevocation(id: UInt64, date: Int64, reason: Int32, sequence: UInt64) throws(StoreError) -> Bool {
        try writeHeldRows()
        let update = try database.statement("""
            UPDATE transactions SET revocation_date = ?, revocation_reason = ?, sequence = ?
            WHERE id = ? AND revocation_date IS NULL
            """)
        update.bind(1, date)
        update.bind(2, Int64(reason))
        update.bind(3, Int64(sequence))
        update.bind(4, Int64(id))
        try update.run()
        return database.changes == 1
    }

    // MARK: Reads

    static let columns = """
        id, original_id, uid, app, product, quantity, state, sequence, date, finished, error_code, error_message,
        revocation_date, revocation_reason, app_username, expires_date
        """

    private func record(_ row: Statement) -> TransactionRecord {
        TransactionRecord(
            id: UInt64(row.int64(0)), originalID: row.optionalInt64(1).map { UInt64($0) },
            uid: UInt32(truncatingIfNeeded: row.int64(2)), app: row.text(3), productID: row.text(4),
            quantity: Int32(truncatingIfNeeded: row.int64(5)),
            state: TransactionState(rawValue: UInt8(truncatingIfNeeded: row.int64(6))) ?? .failed,
            sequence: UInt64(row.int64(7)), date: row.int64(8), finished: row.int64(9) != 0,
            errorCode: row.optionalInt64(10).map { Int32(truncatingIfNeeded: $0) }, errorMessage: row.optionalText(11),
            revocationDate: row.optionalInt64(12), revocationReason: row.optionalInt64(13).map { Int32(truncatingIfNeeded: $0) },
            applicationUsername: row.optionalText(14), expiresDate: row.optionalInt64(15))
    }

    private func records(_ statement: Statement) throws(StoreError) -> [TransactionRecord] {
        var result: [TransactionRecord] = []
        defer { statement.reset() }
        while try statement.step() { result.append(record(statement)) }
        return result
    }

    /// Transaction ids are SQLite's signed 64-bit integers: an id above `Int64.max` (from a client
    /// or the command line) names no row. Every id that comes from outside is bound through this.
    static func storedID(_ id: UInt64) -> Int64? { Int64(exactly: id) }

    public func transaction(id: UInt64) throws(StoreError) -> TransactionRecord? {
        if let row = held.row(id: id) { return row.record }
        guard let stored = Self.storedID(id) else { return nil }
        let select = try database.statement("SELECT \(Self.columns) FROM transactions WHERE id = ?")
        select.bind(1, stored)
        return try select.firstRow { record($0) }
    }

    public func transaction(uid: UInt32, app: String, paymentKey: String) throws(StoreError) -> TransactionRecord? {
        let key = StoredPaymentKey(uid: uid, app: app, key: paymentKey)
        if let row = held.row(key: key) { return row.record }
        if let filter = currentKeyFilter(), !filter.mightContain(key) {
            keyLookupsSkipped += 1
            absentPaymentKey = key
            return nil
        }
        let select = try database.statement(
            "SELECT \(Self.columns) FROM transactions WHERE uid = ? AND app = ? AND payment_key = ?")
        select.bind(1, Int64(uid))
        select.bind(2, app)
        select.bind(3, paymentKey)
        let found = try select.firstRow { record($0) }
        absentPaymentKey = found == nil ? key : nil
        return found
    }

    /// Every unfinished transaction of one queue, oldest first.
    public func unfinished(uid: UInt32, app: String) throws(StoreError) -> [TransactionRecord] {
        try writeHeldRows()
        let select = try database.statement(
            "SELECT \(Self.columns) FROM transactions WHERE uid = ? AND app = ? AND finished = 0 ORDER BY id")
        select.bind(1, Int64(uid))
        select.bind(2, app)
        return try records(select)
    }

    /// Every transaction of one queue, oldest first (history).
    public func all(uid: UInt32, app: String) throws(StoreError) -> [TransactionRecord] {
        try writeHeldRows()
        let select = try database.statement(
            "SELECT \(Self.columns) FROM transactions WHERE uid = ? AND app = ? ORDER BY id")
        select.bind(1, Int64(uid))
        select.bind(2, app)
        return try records(select)
    }

    /// Transactions filtered by uid, app and finished-ness, oldest first, at most `limit`.
    public func list(uid: UInt32?, app: String?, unfinishedOnly: Bool, limit: Int = 10_000) throws(StoreError) -> [TransactionRecord] {
        try writeHeldRows()
        let select = try database.statement("""
            SELECT \(Self.columns) FROM transactions
            WHERE (?1 IS NULL OR uid = ?1) AND (?2 IS NULL OR app = ?2) AND (?3 = 0 OR finished = 0)
            ORDER BY id LIMIT ?4
            """)
        select.bind(1, uid.map { Int64($0) })
        select.bind(2, app)
        select.bind(3, unfinishedOnly ? 1 : 0)
        select.bind(4, Int64(limit))
        return try records(select)
    }

    /// Unfinished transactions of one queue (for `MaxUnfinishedPerQueue=`): counted once, then kept.
    public func unfinishedCount(of queue: QueueKey) throws(StoreError) -> Int {
        if let count = unfinishedCounts[queue] { return count }
        try writeHeldRows()
        let select = try database.statement("SELECT count(*) FROM transactions WHERE uid = ? AND app = ? AND finished = 0")
        select.bind(1, Int64(queue.uid))
        select.bind(2, queue.app)
        let count = Int(try select.firstRow { $0.int64(0) } ?? 0)
        unfinishedCounts[queue] = count
        return count
    }

    public func unfinishedCount() throws(StoreError) -> Int {
        try writeHeldRows()
        return Int(try database.scalarInt("SELECT count(*) FROM transactions WHERE finished = 0") ?? 0)
    }

    // MARK: Settings (virtual clock, test switches)

    public func setting(_ key: String) throws(StoreError) -> String? {
        let select = try database.statement("SELECT value FROM settings WHERE key = ?")
        select.bind(1, key)
        return try select.firstRow { $0.text(0) }
    }

    public func setSetting(_ key: String, _ value: String?) throws(StoreError) {
        if let value {
            let upsert = try database.statement(
                "INSERT INTO settings(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            upsert.bind(1, key)
            upsert.bind(2, value)
            try upsert.run()
        } else {
            let delete = try database.statement("DELETE FROM settings WHERE key = ?")
            delete.bind(1, key)
            try delete.run()
        }
    }
}

// MARK: - The simulated store's schedule (schema v2)

extension TransactionStore {
    /// One buyer's auto-renewable subscription in one subscription group.
    ///
    /// `originalID` is the original transaction of the chain: every purchase, renewal, upgrade and
    /// resubscription in the group links to it. `due` is when the next scheduled event (renewal or
    /// expiry, end of grace period, end of billing retry) fires on the store clock; nil: none.
    public struct Subscription: Sendable, Equatable {
        public enum Status: Int, Sendable, CaseIterable {
            /// Renews (or expires, with auto-renew off) at `expiresDate`.
            case active = 0
            /// Ended: auto-renew was off, billing retry gave up, or it was expired on demand.
            case expired = 1
            /// A renewal failed; still retried until `billingRetryEnd`, no access meanwhile.
            case billingRetry = 2
            /// A renewal failed; access continues until `gracePeriodEnd`, then billing retry.
            case gracePeriod = 3
            /// Refunded or revoked: never renews again.
            case revoked = 4

            /// StoreKit 2's `Product.SubscriptionInfo.RenewalState` names.
            public var name: String {
                switch self {
                case .active: "subscribed"
                case .expired: "expired"
                case .billingRetry: "inBillingRetryPeriod"
                case .gracePeriod: "inGracePeriod"
                case .revoked: "revoked"
                }
            }

            /// Whether the buyer is entitled to the subscription's content in this state.
            public var isEntitled: Bool { self == .active || self == .gracePeriod }

            /// Whether the subscription is still alive (can renew or recover).
            public var isLive: Bool { self == .active || self == .gracePeriod || self == .billingRetry }
        }

        public var originalID: UInt64
        public var uid: UInt32
        public var app: String
        public var groupID: String
        public var productID: String
        public var quantity: Int32
        public var applicationUsername: String?
        public var status: Status
        public var periodStart: Int64
        public var expiresDate: Int64
        public var autoRenew: Bool
        /// A downgrade or crossgrade that takes effect at the next renewal.
        public var nextProductID: String?
        /// Pay-as-you-go introductory periods still to come after the current one.
        public var offerPeriodsLeft: Int
        public var gracePeriodEnd: Int64?
        public var billingRetryEnd: Int64?
        public var due: Int64?
        public var lastTransactionID: UInt64
        public var renewals: Int

        public init(
            originalID: UInt64, uid: UInt32, app: String, groupID: String, productID: String, quantity: Int32,
            applicationUsername: String? = nil, status: Status = .active, periodStart: Int64, expiresDate: Int64,
            autoRenew: Bool = true, nextProductID: String? = nil, offerPeriodsLeft: Int = 0,
            gracePeriodEnd: Int64? = nil, billingRetryEnd: Int64? = nil, due: Int64?, lastTransactionID: UInt64,
            renewals: Int = 0
        ) {
            self.originalID = originalID
            self.uid = uid
            self.app = app
            self.groupID = groupID
            self.productID = productID
            self.quantity = quantity
            self.applicationUsername = applicationUsername
            self.status = status
            self.periodStart = periodStart
            self.expiresDate = expiresDate
            self.autoRenew = autoRenew
            self.nextProductID = nextProductID
            self.offerPeriodsLeft = offerPeriodsLeft
            self.gracePeriodEnd = gracePeriodEnd
            self.billingRetryEnd = billingRetryEnd
            self.due = due
            self.lastTransactionID = lastTransactionID
            self.renewals = renewals
        }
    }

    /// A purchase waiting for someone other than the app: a parent (Ask to Buy) or the buyer
    /// resolving an issue (interrupted purchase). Its transaction is `deferred` or `failed`.
    public struct PurchaseRequest: Sendable, Equatable {
        public enum Kind: Int, Sendable {
            case askToBuy = 0
            case interrupted = 1
        }

        public var transactionID: UInt64
        public var kind: Kind
        public var uid: UInt32
        public var app: String
        public var productID: String
        public var created: Int64
        /// When an Ask to Buy request lapses (store clock); nil for interrupted purchases.
        public var expires: Int64?

        public init(transactionID: UInt64, kind: Kind, uid: UInt32, app: String, productID: String, created: Int64, expires: Int64?) {
            self.transactionID = transactionID
            self.kind = kind
            self.uid = uid
            self.app = app
            self.productID = productID
            self.created = created
            self.expires = expires
        }
    }

    // MARK: Subscriptions

    static let subscriptionColumns = """
        original_id, uid, app, group_id, product, quantity, app_username, status, period_start, expires_date,
        auto_renew, next_product, offer_periods_left, grace_end, retry_end, due, last_transaction, renewals
        """

    private func subscription(_ row: Statement) -> Subscription {
        Subscription(
            originalID: UInt64(row.int64(0)), uid: UInt32(truncatingIfNeeded: row.int64(1)), app: row.text(2),
            groupID: row.text(3), productID: row.text(4), quantity: Int32(truncatingIfNeeded: row.int64(5)),
            applicationUsername: row.optionalText(6),
            status: Subscription.Status(rawValue: Int(row.int64(7))) ?? .expired,
            periodStart: row.int64(8), expiresDate: row.int64(9), autoRenew: row.int64(10) != 0,
            nextProductID: row.optionalText(11), offerPeriodsLeft: Int(row.int64(12)),
            gracePeriodEnd: row.optionalInt64(13), billingRetryEnd: row.optionalInt64(14), due: row.optionalInt64(15),
            lastTransactionID: UInt64(row.int64(16)), renewals: Int(row.int64(17)))
    }

    private func subscriptions(_ statement: Statement) throws(StoreError) -> [Subscription] {
        var result: [Subscription] = []
        defer { statement.reset() }
        while try statement.step() { result.append(subscription(statement)) }
        return result
    }

    /// Inserts or replaces the row of `subscription.originalID`.
    public func save(_ subscription: Subscription) throws(StoreError) {
        precondition(inTransaction, "subscription saved outside a unit of work")
        let upsert = try database.statement("""
            INSERT INTO subscriptions(\(Self.subscriptionColumns))
            VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)
            ON CONFLICT(original_id) DO UPDATE SET
                uid = ?2, app = ?3, group_id = ?4, product = ?5, quantity = ?6, app_username = ?7, status = ?8,
                period_start = ?9, expires_date = ?10, auto_renew = ?11, next_product = ?12,
                offer_periods_left = ?13, grace_end = ?14, retry_end = ?15, due = ?16, last_transaction = ?17,
                renewals = ?18
            """)
        upsert.bind(1, Int64(subscription.originalID))
        upsert.bind(2, Int64(subscription.uid))
        upsert.bind(3, subscription.app)
        upsert.bind(4, subscription.groupID)
        upsert.bind(5, subscription.productID)
        upsert.bind(6, Int64(subscription.quantity))
        upsert.bind(7, subscription.applicationUsername)
        upsert.bind(8, Int64(subscription.status.rawValue))
        upsert.bind(9, subscription.periodStart)
        upsert.bind(10, subscription.expiresDate)
        upsert.bind(11, subscription.autoRenew ? 1 : 0)
        upsert.bind(12, subscription.nextProductID)
        upsert.bind(13, Int64(subscription.offerPeriodsLeft))
        upsert.bind(14, subscription.gracePeriodEnd)
        upsert.bind(15, subscription.billingRetryEnd)
        upsert.bind(16, subscription.due)
        upsert.bind(17, Int64(subscription.lastTransactionID))
        upsert.bind(18, Int64(subscription.renewals))
        try upsert.run()
    }

    public func subscription(originalID: UInt64) throws(StoreError) -> Subscription? {
        guard let stored = Self.storedID(originalID) else { return nil }
        let select = try database.statement("SELECT \(Self.subscriptionColumns) FROM subscriptions WHERE original_id = ?")
        select.bind(1, stored)
        return try select.firstRow { subscription($0) }
    }

    public func subscription(uid: UInt32, app: String, groupID: String) throws(StoreError) -> Subscription? {
        let select = try database.statement(
            "SELECT \(Self.subscriptionColumns) FROM subscriptions WHERE uid = ? AND app = ? AND group_id = ?")
        select.bind(1, Int64(uid))
        select.bind(2, app)
        select.bind(3, groupID)
        return try select.firstRow { subscription($0) }
    }

    /// Subscriptions filtered by uid and app, oldest chain first.
    public func subscriptions(uid: UInt32?, app: String?) throws(StoreError) -> [Subscription] {
        let select = try database.statement("""
            SELECT \(Self.subscriptionColumns) FROM subscriptions
            WHERE (?1 IS NULL OR uid = ?1) AND (?2 IS NULL OR app = ?2) ORDER BY original_id
            """)
        select.bind(1, uid.map { Int64($0) })
        select.bind(2, app)
        return try subscriptions(select)
    }

    /// Subscriptions whose next event is due at `time` or earlier, earliest first.
    public func dueSubscriptions(at time: Int64, limit: Int) throws(StoreError) -> [Subscription] {
        let select = try database.statement("""
            SELECT \(Self.subscriptionColumns) FROM subscriptions WHERE due IS NOT NULL AND due <= ?
            ORDER BY due, original_id LIMIT ?
            """)
        select.bind(1, time)
        select.bind(2, Int64(limit))
        return try subscriptions(select)
    }

    // MARK: Purchase requests (Ask to Buy, interrupted purchases)

    private func purchaseRequest(_ row: Statement) -> PurchaseRequest {
        PurchaseRequest(
            transactionID: UInt64(row.int64(0)),
            kind: PurchaseRequest.Kind(rawValue: Int(row.int64(1))) ?? .askToBuy,
            uid: UInt32(truncatingIfNeeded: row.int64(2)), app: row.text(3), productID: row.text(4),
            created: row.int64(5), expires: row.optionalInt64(6))
    }

    private func purchaseRequests(_ statement: Statement) throws(StoreError) -> [PurchaseRequest] {
        var result: [PurchaseRequest] = []
        defer { statement.reset() }
        while try statement.step() { result.append(purchaseRequest(statement)) }
        return result
    }

    static let requestColumns = "transaction_id, kind, uid, app, product, created, expires"

    public func insert(_ request: PurchaseRequest) throws(StoreError) {
        precondition(inTransaction, "purchase request recorded outside a unit of work")
        let insert = try database.statement(
            "INSERT INTO purchase_requests(\(Self.requestColumns)) VALUES(?, ?, ?, ?, ?, ?, ?)")
        insert.bind(1, Int64(request.transactionID))
        insert.bind(2, Int64(request.kind.rawValue))
        insert.bind(3, Int64(request.uid))
        insert.bind(4, request.app)
        insert.bind(5, request.productID)
        insert.bind(6, request.created)
        insert.bind(7, request.expires)
        try insert.run()
    }

    /// Removes the request of `transactionID`; false when there was none (already answered).
    public func removePurchaseRequest(transactionID: UInt64) throws(StoreError) -> Bool {
        guard let stored = Self.storedID(transactionID) else { return false }
        let delete = try database.statement("DELETE FROM purchase_requests WHERE transaction_id = ?")
        delete.bind(1, stored)
        try delete.run()
        return database.changes == 1
    }

    public func purchaseRequest(transactionID: UInt64) throws(StoreError) -> PurchaseRequest? {
        guard let stored = Self.storedID(transactionID) else { return nil }
        let select = try database.statement(
            "SELECT \(Self.requestColumns) FROM purchase_requests WHERE transaction_id = ?")
        select.bind(1, stored)
        return try select.firstRow { purchaseRequest($0) }
    }

    /// The oldest open request of this kind for the product, if any (Ask to Buy consolidation).
    public func openPurchaseRequest(uid: UInt32, app: String, productID: String, kind: PurchaseRequest.Kind) throws(StoreError) -> PurchaseRequest? {
        let select = try database.statement("""
            SELECT \(Self.requestColumns) FROM purchase_requests
            WHERE uid = ? AND app = ? AND product = ? AND kind = ? ORDER BY transaction_id LIMIT 1
            """)
        select.bind(1, Int64(uid))
        select.bind(2, app)
        select.bind(3, productID)
        select.bind(4, Int64(kind.rawValue))
        return try select.firstRow { purchaseRequest($0) }
    }

    public func purchaseRequests(uid: UInt32?, app: String?) throws(StoreError) -> [PurchaseRequest] {
        let select = try database.statement("""
            SELECT \(Self.requestColumns) FROM purchase_requests
            WHERE (?1 IS NULL OR uid = ?1) AND (?2 IS NULL OR app = ?2) ORDER BY transaction_id
            """)
        select.bind(1, uid.map { Int64($0) })
        select.bind(2, app)
        return try purchaseRequests(select)
    }

    /// Requests that lapse at `time` or earlier, earliest first.
    public func duePurchaseRequests(at time: Int64, limit: Int) throws(StoreError) -> [PurchaseRequest] {
        let select = try database.statement("""
            SELECT \(Self.requestColumns) FROM purchase_requests WHERE expires IS NOT NULL AND expires <= ?
            ORDER BY expires, transaction_id LIMIT ?
            """)
        select.bind(1, time)
        select.bind(2, Int64(limit))
        return try purchaseRequests(select)
    }

    /// The earliest scheduled event of the whole store (subscriptions and lapsing requests).
    public func nextDueTime() throws(StoreError) -> Int64? {
        try database.scalarInt("""
            SELECT min(t) FROM (
                SELECT min(due) AS t FROM subscriptions WHERE due IS NOT NULL
                UNION ALL SELECT min(expires) FROM purchase_requests WHERE expires IS NOT NULL)
            """)
    }

    // MARK: Transaction changes of the simulated store

    /// Gives a transaction a new sequence number without changing it otherwise (a re-delivered
    /// Ask to Buy request); false when it does not exist.
    public func touch(id: UInt64, sequence: UInt64) throws(StoreError) -> Bool {
        try writeHeldRows()
        let update = try database.statement("UPDATE transactions SET sequence = ? WHERE id = ?")
        update.bind(1, Int64(sequence))
        update.bind(2, Int64(id))
        try update.run()
        return database.changes == 1
    }

    /// Deletes every transaction, subscription and purchase request of the matching queues
    /// (`storekitctl clear`) and returns the transactions that were still unfinished. Sequence
    /// counters are kept: they never go back.
    public func deleteHistory(uid: UInt32?, app: String?) throws(StoreError) -> (deleted: Int, unfinished: [TransactionRecord]) {
        precondition(inTransaction, "history deleted outside a unit of work")
        // The counters of the queues emptied here must not come back lower after a replay
        // (which recomputes them from the rows): store them in this unit of work.
        try storeMovedSequences()
        try writeHeldRows()
        let select = try database.statement("""
            SELECT \(Self.columns) FROM transactions
            WHERE (?1 IS NULL OR uid = ?1) AND (?2 IS NULL OR app = ?2) AND finished = 0 ORDER BY id
            """)
        select.bind(1, uid.map { Int64($0) })
        select.bind(2, app)
        let unfinished = try records(select)
        try setSetting("transactions.lastID", String(max(nextID, Self.firstTransactionID) - 1))
        var deleted = 0
        for table in ["transactions", "subscriptions", "purchase_requests"] {
            let delete = try database.statement(
                "DELETE FROM \(table) WHERE (?1 IS NULL OR uid = ?1) AND (?2 IS NULL OR app = ?2)")
            delete.bind(1, uid.map { Int64($0) })
            delete.bind(2, app)
            try delete.run()
            if table == "transactions" { deleted = database.changes }
        }
        unfinishedCounts.removeAll()
        return (deleted, unfinished)
    }

    /// Every setting whose key starts with `prefix`, sorted by key.
    public func settings(prefix: String) throws(StoreError) -> [(key: String, value: String)] {
        let select = try database.statement("SELECT key, value FROM settings WHERE substr(key, 1, length(?1)) = ?1 ORDER BY key")
        select.bind(1, prefix)
        var result: [(key: String, value: String)] = []
        defer { select.reset() }
        while try select.step() { result.append((select.text(0), select.text(1))) }
        return result
    }
}
