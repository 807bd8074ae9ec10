import CSQLite
import StoreKitLedger
import StoreKitPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A thin owner of one sqlite3 connection and its cached prepared statements.
/// Not thread-safe: the daemon uses it from its serving loop only, and lends it to a thread for
/// one job at a time (`lend(to:_:)`): until the job is done, the loop does not touch the
/// connection. Every call into SQLite goes through `handle`, which waits for a loan to end.
public final class SQLiteDatabase {
    public let path: String
    let connection: OpaquePointer   // use `handle`, which waits for a loan to end
    private var statements: [StatementKey: OpaquePointer] = [:]
    /// Each cached statement's SQL and parameter count, kept here so that recording a statement
    /// that does not run (`recordWithoutRunning`) needs no call into SQLite, which may be lent.
    var statementInfo: [OpaquePointer: (sql: String, parameters: Int32)] = [:]
    /// The job the connection is lent to, until it is taken back.
    var loan: Loan?
    /// Runs on the loop when a loan ends, with the job's outcome.
    var onLoanReturned: ((CommitOutcome) -> Void)?
    /// Runs before the connection is used for a statement (not re-entered from within): the
    /// store opens its unit of work's savepoints there, lazily.
    var willUse: (() throws(LedgerError) -> Void)?
    var inWillUse = false
    /// Called whenever SQLite reports that the file system is full (the store's low-space mode).
    var fullHandler: (() -> Void)?
    /// While recording (a unit of work, SQLiteLedger+CommitLog.swift): every statement run
    /// through `Statement` that changes data, with the parameters bound to it. Running them again
    /// in order on the same database state makes the same changes: every statement is
    /// deterministic and binds only integers, NULL and NUL-free text. Encoding, one entry after
    /// another: `01` u32 n, n bytes — the SQL of a statement (the record's next template);
    /// `02` u16 template, u16 n, then n × (u8 parameter, u8 type 0 NULL | 1 i64 | 2 text, value) —
    /// a run of that template (text: u32 n, n bytes); `03` u32 n, n bytes — SQL with its
    /// parameters inlined, for a statement whose bindings were not seen.
    var recording = false
    var recorded: [UInt8] = []
    /// Set when a change could not be recorded; the unit of work must then be rolled back.
    var recordingFailed = false
    var templateIndex: [OpaquePointer: UInt16] = [:]
    var templateOrder: [OpaquePointer] = []
    /// The statement last taken from the cache while recording (nil whenever not recording), and
    /// what was bound to it since.
    var boundHandle: OpaquePointer?
    var boundValues: [(index: Int32, value: BoundValue)] = []

    enum BoundValue {
        case null
        case integer(Int64)
        case text(String)

        init(_ number: Int64?) { self = number.map { .integer($0) } ?? .null }
        init(_ text: String?) { self = text.map { .text($0) } ?? .null }
    }

    static let busyTimeoutMilliseconds: Int32 = 5000

    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    public init(path: String, readOnly: Bool = false) throws(LedgerError) {
        self.path = path
        // NOFOLLOW: a symlink in place of the database is refused, never followed.
        let flags = (readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | SQLITE_OPEN_NOFOLLOW
        // A writer's files go to the disk in flushed steps (PacedWrites.swift).
        let vfs = readOnly || !PacedWrites.isRegistered ? nil : PacedWrites.name
        connection = try Self.open(path, flags: flags, path: path, vfs: vfs)
        sqlite3_busy_timeout(connection, Self.busyTimeoutMilliseconds)
    }

    /// `sqlite3_open_v2` of `filename` (a path or a URI), with extended result codes; errors name `path`.
    private static func open(_ filename: String, flags: Int32, path: String, vfs: String? = nil) throws(LedgerError) -> OpaquePointer {
        var handle: OpaquePointer?
        let status = sqlite3_open_v2(filename, &handle, flags | SQLITE_OPEN_NOMUTEX, vfs)
        guard status == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(handle)
            throw LedgerError(Self.code(for: status), path: path, message: message)
        }
        sqlite3_extended_result_codes(handle, 1)
        return handle
    }

    /// A read-only view of the file exactly as it is on disk: no locks, no -wal or -shm files
    /// (SQLite's `immutable`). Right only for a database whose WAL is absent or empty; it reads
    /// without leaving a trace, which is how a file the store refuses is identified.
    init(immutablePath path: String) throws(LedgerError) {
        self.path = path
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/-_.~".utf8)
        var uri = "file:"
        for byte in path.utf8 {
            if allowed.contains(byte) {
                uri.append(Character(Unicode.Scalar(byte)))
            } else {
                uri += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            }
        }
        uri += "?mode=ro&immutable=1"
        connection = try Self.open(uri, flags: SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, path: path)
    }

    deinit {
        _ = loan?.wait()
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(connection)
    }

    static func code(for status: Int32) -> LedgerError.Code {
        switch status & 0xff {
        case SQLITE_FULL: .full
        case SQLITE_CORRUPT: .corrupt
        case SQLITE_NOTADB: .notADatabase
        case SQLITE_READONLY: .readOnly
        case SQLITE_IOERR: .io
        case SQLITE_BUSY, SQLITE_LOCKED: .busy
        default: .other(status)
        }
    }

    func error(_ status: Int32, _ context: String) -> LedgerError {
        error(status, "\(context): \(String(cString: sqlite3_errmsg(handle)))", systemErrno: sqlite3_system_errno(handle))
    }

    /// The error of a failed call whose message and errno were taken on the thread that made it.
    func error(_ status: Int32, _ message: String, systemErrno: Int32) -> LedgerError {
        var code = Self.code(for: status)
        // Some writes (growing the -shm file, truncating) report a full disk as an I/O error.
        if code == .io, [ENOSPC, EDQUOT].contains(systemErrno) { code = .full }
        if code == .full { fullHandler?() }
        return LedgerError(code, path: path, message: message)
    }

    /// Runs `body` with another busy timeout (0: never wait for other connections).
    func withBusyTimeout<T>(_ milliseconds: Int32, _ body: () -> T) -> T {
        sqlite3_busy_timeout(handle, milliseconds)
        defer { sqlite3_busy_timeout(handle, Self.busyTimeoutMilliseconds) }
        return body()
    }

    public func execute(_ sql: String) throws(LedgerError) {
        try prepareForUse()
        let status = sqlite3_exec(handle, sql, nil, nil, nil)
        guard status == SQLITE_OK else { throw error(status, "\(sql.prefix(60))") }
    }

    /// A cached prepared statement, reset and with bindings cleared.
    func statement(_ sql: String) throws(LedgerError) -> Statement {
        try prepareForUse()
        let statement = try cachedHandle(sql)
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
        if recording {
            boundHandle = statement
            boundValues.removeAll(keepingCapacity: true)
        }
        return Statement(handle: statement, database: self)
    }

    /// The prepared statement for `sql`, as it was left (prepared on first use).
    func cachedHandle(_ sql: String) throws(LedgerError) -> OpaquePointer {
        let key = StatementKey(sql: sql)
        if let cached = statements[key] { return cached }
        try prepareForUse()
        var prepared: OpaquePointer?
        let status = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, nil)
        guard status == SQLITE_OK, let prepared else { throw error(status, "prepare") }
        statements[key] = prepared
        statementInfo[prepared] = (sql, sqlite3_bind_parameter_count(prepared))
        return prepared
    }

    /// Runs `body` in one SQLite transaction (`BEGIN IMMEDIATE` … `COMMIT`), rolled back when
    /// anything in it throws.
    func immediateTransaction(_ body: () throws(LedgerError) -> Void) throws(LedgerError) {
        try execute("BEGIN IMMEDIATE")
        do {
            try body()
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    public var changes: Int { Int(sqlite3_changes(handle)) }

    /// A passive checkpoint that waits for no one: the WAL's frames and how many of them are now
    /// in the database file (nil when it failed).
    func checkpointPassive() -> (frames: Int, checkpointed: Int)? {
        Self.checkpointPassive(handle)
    }

    static func checkpointPassive(_ connection: OpaquePointer) -> (frames: Int, checkpointed: Int)? {
        var logFrames: Int32 = 0
        var checkpointed: Int32 = 0
        sqlite3_busy_timeout(connection, 0)
        let status = sqlite3_wal_checkpoint_v2(connection, nil, SQLITE_CHECKPOINT_PASSIVE, &logFrames, &checkpointed)
        sqlite3_busy_timeout(connection, busyTimeoutMilliseconds)
        return status == SQLITE_OK ? (Int(logFrames), Int(checkpointed)) : nil
    }

    /// Frames in the WAL after the last commit on this connection; nil unless `watchWAL()`.
    var walFrames: Int? { walCounter.map { $0.frames.load(ordering: .relaxed) } }
    /// Set by the WAL hook, on whichever thread commits.
    private(set) var walCounter: WALCounter?

    final class WALCounter: Sendable {
        let frames = Atomic<Int>(0)
    }

    /// Counts the WAL's frames after every commit. Replaces SQLite's automatic checkpoints, which
    /// use the same hook: only for a connection whose checkpoints run elsewhere.
    func watchWAL() {
        let counter = walCounter ?? WALCounter()
        walCounter = counter
        sqlite3_wal_hook(handle, { context, _, _, frames in
            guard let context else { return SQLITE_OK }
            Unmanaged<WALCounter>.fromOpaque(context).takeUnretainedValue().frames.store(Int(frames), ordering: .relaxed)
            return SQLITE_OK
        }, Unmanaged.passUnretained(counter).toOpaque())
    }

    /// Runs a single-value query such as a PRAGMA and returns its text.
    public func scalarText(_ sql: String) throws(LedgerError) -> String? {
        let statement = try statement(sql)
        return try statement.firstRow { $0.text(0) }
    }

    public func scalarInt(_ sql: String) throws(LedgerError) -> Int64? {
        let statement = try statement(sql)
        return try statement.firstRow { $0.optionalInt64(0) } ?? nil
    }
}

/// The statement cache's key: the SQL, compared byte for byte but hashed by its length and its
/// first and last 16 bytes. Hashing whole statements at every lookup was 6% of the serving
/// thread's instructions at 100 clients; the cached statements differ in length or at either end.
private struct StatementKey: Hashable {
    let sql: String

    static func == (lhs: StatementKey, rhs: StatementKey) -> Bool {
        var (left, right) = (lhs.sql, rhs.sql)
        return left.withUTF8 { a in
            right.withUTF8 { b in a.count == b.count && (a.isEmpty || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0) }
        }
    }

    func hash(into hasher: inout Hasher) {
        var sql = sql   // withUTF8 makes a bridged string contiguous first: hence a copy
        sql.withUTF8 { bytes in
            let raw = UnsafeRawBufferPointer(bytes)
            hasher.combine(raw.count)
            hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: raw.prefix(16)))
            hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: raw.suffix(16)))
        }
    }
}
