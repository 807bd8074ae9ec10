import CSQLite
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
    private let connection: OpaquePointer
    private var statements: [StatementKey: OpaquePointer] = [:]
    /// Each cached statement's SQL and parameter count, kept here so that recording a statement
    /// that does not run (`recordWithoutRunning`) needs no call into SQLite, which may be lent.
    private var statementInfo: [OpaquePointer: (sql: String, parameters: Int32)] = [:]
    /// The job the connection is lent to, until it is taken back.
    private var loan: Loan?
    /// Runs on the loop when a loan ends, with the job's outcome.
    var onLoanReturned: ((CommitOutcome) -> Void)?
    /// Runs before the connection is used for a statement (not re-entered from within): the
    /// store opens its unit of work's savepoints there, lazily.
    var willUse: (() throws(StoreError) -> Void)?
    private var inWillUse = false
    /// Called whenever SQLite reports that the file system is full (the store's low-space mode).
    var fullHandler: (() -> Void)?
    /// While recording (a unit of work, TransactionStore+CommitLog.swift): every statement run
    /// through `Statement` that changes data, with the parameters bound to it. Running them again
    /// in order on the same database state makes the same changes: every statement is
    /// deterministic and binds only integers, NULL and NUL-free text. Encoding, one entry after
    /// another: `01` u32 n, n bytes — the SQL of a statement (the record's next template);
    /// `02` u16 template, u16 n, then n × (u8 parameter, u8 type 0 NULL | 1 i64 | 2 text, value) —
    /// a run of that template (text: u32 n, n bytes); `03` u32 n, n bytes — SQL with its
    /// parameters inlined, for a statement whose bindings were not seen.
    private(set) var recording = false
    var recorded: [UInt8] = []
    private var templateIndex: [OpaquePointer: UInt16] = [:]
    private var templateOrder: [OpaquePointer] = []
    /// The statement last taken from the cache while recording (nil whenever not recording), and
    /// what was bound to it since.
    fileprivate var boundHandle: OpaquePointer?
    fileprivate var boundValues: [(index: Int32, value: BoundValue)] = []

    enum BoundValue {
        case null
        case integer(Int64)
        case text(String)

        init(_ number: Int64?) { self = number.map { .integer($0) } ?? .null }
        init(_ text: String?) { self = text.map { .text($0) } ?? .null }
    }

    static let busyTimeoutMilliseconds: Int32 = 5000

    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    public init(path: String, readOnly: Bool = false) throws(StoreError) {
        self.path = path
        // NOFOLLOW: a symlink in place of the database is refused, never followed.
        let flags = (readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | SQLITE_OPEN_NOFOLLOW
        // A writer's files go to the disk in flushed steps (PacedWrites.swift).
        let vfs = readOnly || !PacedWrites.isRegistered ? nil : PacedWrites.name
        connection = try Self.open(path, flags: flags, path: path, vfs: vfs)
        sqlite3_busy_timeout(connection, Self.busyTimeoutMilliseconds)
    }

    /// `sqlite3_open_v2` of `filename` (a path or a URI), with extended result codes; errors name `path`.
    private static func open(_ filename: String, flags: Int32, path: String, vfs: String? = nil) throws(StoreError) -> OpaquePointer {
        var handle: OpaquePointer?
        let status = sqlite3_open_v2(filename, &handle, flags | SQLITE_OPEN_NOMUTEX, vfs)
        guard status == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(handle)
            throw StoreError(Self.code(for: status), path: path, message: message)
        }
        sqlite3_extended_result_codes(handle, 1)
        return handle
    }

    /// A read-only view of the file exactly as it is on disk: no locks, no -wal or -shm files
    /// (SQLite's `immutable`). Right only for a database whose WAL is absent or empty; it reads
    /// without leaving a trace, which is how a file the store refuses is identified.
    init(immutablePath path: String) throws(StoreError) {
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

    // MARK: Lending the connection

    /// The connection, once a loan of it has ended (waiting for the job if it has not).
    var handle: OpaquePointer {
        if loan != nil { takeBack() }
        return connection
    }

    /// Rows changed through the connection so far (`sqlite3_total_changes`), read without taking
    /// a lent connection back: safe whenever no job runs on it (tests check what the loop ran).
    var totalChanges: Int32 { sqlite3_total_changes(connection) }

    /// Whether the connection is lent (its job may have ended without being taken back yet).
    var isLent: Bool { loan != nil }

    /// What a job on a lent connection did: `COMMIT`'s result and, after it, the WAL's size and
    /// the checkpoint that restarted it, if one ran (see `commit(_:restartingWALPast:)`).
    struct CommitOutcome: Sendable {
        var status: Int32
        var message: String
        var systemErrno: Int32
        var checkpoint: (frames: Int, checkpointed: Int)?
    }

    /// The connection while it is lent, and the job's outcome once it is done.
    final class Loan: @unchecked Sendable {   // the connection is used by one thread at a time: the lock hands it over
        fileprivate let connection: OpaquePointer
        private let condition = Condition()
        private var outcome: CommitOutcome?   // guarded by `condition`

        fileprivate init(connection: OpaquePointer) { self.connection = connection }

        fileprivate func finish(_ result: CommitOutcome) {
            condition.withLock { outcome = result }
            condition.broadcast()
        }

        var isDone: Bool { condition.withLock { outcome != nil } }

        fileprivate func wait() -> CommitOutcome {
            condition.lock()
            defer { condition.unlock() }
            while outcome == nil { condition.wait() }
            return outcome!
        }
    }

    /// Lends the connection to `thread` for `job`; the loop must not use it until the job is done.
    /// Between statements only: no statement is running and none is started until it is back.
    func lend(to thread: Committer, _ job: @escaping @Sendable (OpaquePointer) -> CommitOutcome) {
        precondition(loan == nil, "the connection is lent already")
        let lent = Loan(connection: connection)
        loan = lent
        thread.run { lent.finish(job(lent.connection)) }
    }

    /// Takes a lent connection back, waiting for its job, and reports the outcome.
    func takeBack() {
        guard let lent = loan else { return }
        let outcome = lent.wait()
        loan = nil
        onLoanReturned?(outcome)
    }

    /// Takes the connection back if its job is done; false while it is still running.
    @discardableResult
    func takeBackIfDone() -> Bool {
        guard let lent = loan else { return true }
        guard lent.isDone else { return false }
        takeBack()
        return true
    }

    /// Before a statement uses the connection: takes it back, then lets the store prepare it.
    func prepareForUse() throws(StoreError) {
        if loan != nil { takeBack() }
        guard let willUse, !inWillUse else { return }
        inWillUse = true
        defer { inWillUse = false }
        try willUse()
    }

    /// A save's `COMMIT`, on whichever thread has the connection; then, past `restartFrames`
    /// frames in the WAL, a passive checkpoint of what the checkpointer did not copy, so that
    /// SQLite starts the WAL over (under steady load the background checkpoint never catches up
    /// with the last commit, and SQLite restarts the WAL only when one has).
    /// `writes` run first, in the transaction: a failed one rolls it back and is the outcome.
    static func commit(
        _ connection: OpaquePointer, writing writes: Writes, restartingWALPast restartFrames: Int, walCounter: WALCounter?
    ) -> CommitOutcome {
        if let failed = run(writes, on: connection) {
            sqlite3_exec(connection, "ROLLBACK", nil, nil, nil)
            return failed
        }
        let status = sqlite3_exec(connection, "COMMIT", nil, nil, nil)
        var outcome = CommitOutcome(status: status, message: "", systemErrno: 0)
        guard status == SQLITE_OK else {
            outcome.message = "COMMIT: " + String(cString: sqlite3_errmsg(connection))
            outcome.systemErrno = sqlite3_system_errno(connection)
            return outcome
        }
        if let frames = walCounter?.frames.load(ordering: .relaxed), frames > restartFrames {
            outcome.checkpoint = checkpointPassive(connection)
        }
        return outcome
    }

    /// Statements gathered on the loop, with their values, to run later in order on whichever
    /// thread has the connection then: what a save writes before its `COMMIT` (`commit(_:writing:…)`).
    struct Writes: @unchecked Sendable {   // the handles are used only by whoever holds the connection
        fileprivate var items: [(handle: OpaquePointer, values: [BoundValue])] = []
    }

    /// Adds a run of `sql` with `values` bound to its parameters 1, 2, … to `writes`.
    func add(_ sql: String, _ values: [BoundValue], to writes: inout Writes) throws(StoreError) {
        writes.items.append((try cachedHandle(sql), values))
    }

    /// Runs `writes` on `connection` in order; the outcome of the first that failed, if one did.
    static func run(_ writes: Writes, on connection: OpaquePointer) -> CommitOutcome? {
        for (handle, values) in writes.items {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
            for (offset, value) in values.enumerated() {
                let index = Int32(offset + 1)
                switch value {
                case .null: sqlite3_bind_null(handle, index)
                case .integer(let number): sqlite3_bind_int64(handle, index, number)
                case .text(let text): sqlite3_bind_text(handle, index, text, -1, transient)
                }
            }
            var status = sqlite3_step(handle)
            while status == SQLITE_ROW { status = sqlite3_step(handle) }
            guard status == SQLITE_DONE else {
                let failed = CommitOutcome(status: status, message: "writing a saved row: " + String(cString: sqlite3_errmsg(connection)),
                                           systemErrno: sqlite3_system_errno(connection))
                sqlite3_reset(handle)
                return failed
            }
            sqlite3_reset(handle)
        }
        return nil
    }

    static func code(for status: Int32) -> StoreError.Code {
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

    func error(_ status: Int32, _ context: String) -> StoreError {
        error(status, "\(context): \(String(cString: sqlite3_errmsg(handle)))", systemErrno: sqlite3_system_errno(handle))
    }

    /// The error of a failed call whose message and errno were taken on the thread that made it.
    func error(_ status: Int32, _ message: String, systemErrno: Int32) -> StoreError {
        var code = Self.code(for: status)
        // Some writes (growing the -shm file, truncating) report a full disk as an I/O error.
        if code == .io, [ENOSPC, EDQUOT].contains(systemErrno) { code = .full }
        if code == .full { fullHandler?() }
        return StoreError(code, path: path, message: message)
    }

    /// Runs `body` with another busy timeout (0: never wait for other connections).
    func withBusyTimeout<T>(_ milliseconds: Int32, _ body: () -> T) -> T {
        sqlite3_busy_timeout(handle, milliseconds)
        defer { sqlite3_busy_timeout(handle, Self.busyTimeoutMilliseconds) }
        return body()
    }

    public func execute(_ sql: String) throws(StoreError) {
        try prepareForUse()
        let status = sqlite3_exec(handle, sql, nil, nil, nil)
        guard status == SQLITE_OK else { throw error(status, "\(sql.prefix(60))") }
    }

    /// A cached prepared statement, reset and with bindings cleared.
    func statement(_ sql: String) throws(StoreError) -> Statement {
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
    private func cachedHandle(_ sql: String) throws(StoreError) -> OpaquePointer {
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

    /// Records a run of `sql` with `values` bound to its parameters 1, 2, … as if it had run,
    /// without binding or running it: for a change applied to the database later (`HeldRows`).
    /// With the statement prepared already, it does not call into SQLite: it may run while the
    /// connection is lent. (The unit of work's `commit()` checks that its transaction is alive.)
    func recordWithoutRunning(_ sql: String, _ values: [BoundValue]) throws(StoreError) {
        guard recording else { return }
        // Only the statement's identity is needed (its template number): it is neither reset nor
        // bound, and a Statement taken from the cache for the same SQL keeps its bindings.
        let statement = try cachedHandle(sql)
        guard recordable(statement, values.count), let template = template(of: statement) else {
            // Past what a record can number: bound and recorded with its values inlined.
            try prepareForUse()
            if boundHandle == statement { boundHandle = nil }   // reset below: what was bound to it is gone
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
            Statement(handle: statement, database: self).bind(values)
            recordExpanded(statement)
            sqlite3_reset(statement)
            return
        }
        Self.appendRun(of: template, values.indices.lazy.map { (Int32($0 + 1), values[$0]) }, to: &recorded)
    }

    /// Runs `body` in one SQLite transaction (`BEGIN IMMEDIATE` … `COMMIT`), rolled back when
    /// anything in it throws.
    func immediateTransaction(_ body: () throws(StoreError) -> Void) throws(StoreError) {
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

    /// Starts recording a unit of work's changes (into an empty `recorded`).
    func startRecording() {
        recorded.removeAll(keepingCapacity: true)
        templateIndex.removeAll(keepingCapacity: true)
        templateOrder.removeAll(keepingCapacity: true)
        boundHandle = nil
        recordingFailed = false
        recording = true
    }

    func stopRecording() {
        recording = false
        boundHandle = nil
    }

    /// Runs `body` without recording what it changes: statements that apply changes recorded
    /// already (held rows written into the transaction).
    func unrecorded<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
        let was = recording
        recording = false
        boundHandle = nil
        defer { recording = was }
        return try body()
    }

    /// Where the recording stands, to undo what a request that is rolled back recorded.
    var recordingMark: (bytes: Int, templates: Int) { (recorded.count, templateOrder.count) }

    func rollBackRecording(to mark: (bytes: Int, templates: Int)) {
        recorded.removeSubrange(mark.bytes...)
        for handle in templateOrder[mark.templates...] { templateIndex[handle] = nil }
        templateOrder.removeSubrange(mark.templates...)
    }

    func record(_ statement: OpaquePointer) {
        guard boundHandle == statement, recordable(statement, boundValues.count), let template = template(of: statement) else {
            recordExpanded(statement)
            return
        }
        Self.appendRun(of: template, boundValues.lazy.map { ($0.index, $0.value) }, to: &recorded)
    }

    /// Whether a run of `statement` with `count` bound values fits a tag-2 entry: parameter
    /// numbers are one byte, the count two.
    private func recordable(_ statement: OpaquePointer, _ count: Int) -> Bool {
        let parameters = statementInfo[statement]?.parameters ?? sqlite3_bind_parameter_count(statement)
        return parameters <= Int32(UInt8.max) && count < Int(UInt16.max)
    }

    /// The record's number for `statement`'s SQL, which is written into the record (tag 1) the
    /// first time; nil when a record has as many templates as it can number.
    private func template(of statement: OpaquePointer) -> UInt16? {
        if let known = templateIndex[statement] { return known }
        guard templateOrder.count < Int(UInt16.max), var sql = statementInfo[statement]?.sql else { return nil }
        let template = UInt16(templateOrder.count)
        templateIndex[statement] = template
        templateOrder.append(statement)
        recorded.append(1)
        sql.withUTF8 { Self.appendBytes(UnsafeRawBufferPointer($0), to: &recorded) }
        return template
    }

    /// One run of a template (tag 2). Written through one `inout` access: a unit of work records
    /// dozens of bytes per statement.
    private static func appendRun<Values: Collection<(Int32, BoundValue)>>(
        of template: UInt16, _ values: Values, to recorded: inout [UInt8]
    ) {
        recorded.append(2)
        append16(template, to: &recorded)
        append16(UInt16(values.count), to: &recorded)
        for (index, value) in values {
            recorded.append(UInt8(truncatingIfNeeded: index))
            switch value {
            case .null:
                recorded.append(0)
            case .integer(let number):
                recorded.append(1)
                withUnsafeBytes(of: number.littleEndian) { recorded.append(contentsOf: $0) }
            case .text(var text):
                recorded.append(2)
                // sqlite3_bind_text(-1) stored the text up to its first NUL: record the same.
                text.withUTF8 { utf8 in
                    let end = utf8.firstIndex(of: 0) ?? utf8.count
                    appendBytes(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(utf8)[..<end]), to: &recorded)
                }
            }
        }
    }

    private func recordExpanded(_ statement: OpaquePointer) {
        guard let sql = sqlite3_expanded_sql(statement) else {
            // Out of memory: an unrecordable change must not be acknowledged.
            recordingFailed = true
            return
        }
        defer { sqlite3_free(sql) }
        recorded.append(3)
        Self.appendBytes(UnsafeRawBufferPointer(start: sql, count: strlen(sql)), to: &recorded)
    }

    private static func appendBytes(_ bytes: UnsafeRawBufferPointer, to recorded: inout [UInt8]) {
        withUnsafeBytes(of: UInt32(bytes.count).littleEndian) { recorded.append(contentsOf: $0) }
        recorded.append(contentsOf: bytes)
    }

    private static func append16(_ value: UInt16, to recorded: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { recorded.append(contentsOf: $0) }
    }

    /// Throws when the connection has no open transaction (SQLite rolled it back by itself).
    func requireTransaction() throws(StoreError) {
        guard sqlite3_get_autocommit(handle) == 0 else {
            throw StoreError(.io, path: path, message: "SQLite rolled the transaction back after an error")
        }
    }

    /// Set when a change could not be recorded; the unit of work must then be rolled back.
    var recordingFailed = false

    /// Runs statements recorded while `recording`, in order.
    func replay(_ recorded: [UInt8]) throws(StoreError) {
        var reader = RecordReader(bytes: recorded)
        var templates: [String] = []
        let malformed = StoreError(.corrupt, path: path, message: "a commit-log record is malformed")
        while !reader.atEnd {
            guard let tag = reader.byte() else { throw malformed }
            switch tag {
            case 1:
                guard let sql = reader.text() else { throw malformed }
                templates.append(sql)
            case 2:
                guard let template = reader.uint16(), Int(template) < templates.count, let count = reader.uint16() else {
                    throw malformed
                }
                let statement = try self.statement(templates[Int(template)])
                for _ in 0..<count {
                    guard let index = reader.byte(), let type = reader.byte() else { throw malformed }
                    switch type {
                    case 0: statement.bind(Int32(index), Optional<Int64>.none)
                    case 1:
                        guard let number = reader.int64() else { throw malformed }
                        statement.bind(Int32(index), number)
                    case 2:
                        guard let text = reader.text() else { throw malformed }
                        statement.bind(Int32(index), text)
                    default: throw malformed
                    }
                }
                try statement.run()
            case 3:
                guard let sql = reader.text() else { throw malformed }
                try execute(sql)
            default:
                throw malformed
            }
        }
    }

    /// A passive checkpoint that waits for no one: the WAL's frames and how many of them are now
    /// in the database file (nil when it failed).
    func checkpointPassive() -> (frames: Int, checkpointed: Int)? {
        Self.checkpointPassive(handle)
    }

    private static func checkpointPassive(_ connection: OpaquePointer) -> (frames: Int, checkpointed: Int)? {
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
    public func scalarText(_ sql: String) throws(StoreError) -> String? {
        let statement = try statement(sql)
        return try statement.firstRow { $0.text(0) }
    }

    public func scalarInt(_ sql: String) throws(StoreError) -> Int64? {
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

/// Reads a recorded unit of work; nil past its end.
struct RecordReader {
    let bytes: [UInt8]
    var offset = 0

    var atEnd: Bool { offset >= bytes.count }

    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func little<T: FixedWidthInteger>(_: T.Type) -> T? {
        let size = MemoryLayout<T>.size
        guard offset + size <= bytes.count else { return nil }
        defer { offset += size }
        return bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
    }

    mutating func uint16() -> UInt16? { little(UInt16.self) }
    mutating func int64() -> Int64? { little(Int64.self) }

    mutating func text() -> String? {
        guard let count = little(UInt32.self).map(Int.init), offset + count <= bytes.count else { return nil }
        defer { offset += count }
        return String(decoding: bytes[offset..<offset + count], as: UTF8.self)
    }
}

/// A prepared statement borrowed from the database's cache.
struct Statement {
    let handle: OpaquePointer
    let database: SQLiteDatabase

    func bind(_ index: Int32, _ value: Int64?) {
        if let value { sqlite3_bind_int64(handle, index, value) } else { sqlite3_bind_null(handle, index) }
        if database.boundHandle == handle {
            database.boundValues.append((index, value.map { .integer($0) } ?? .null))
        }
    }

    func bind(_ index: Int32, _ value: String?) {
        if database.boundHandle == handle {
            database.boundValues.append((index, value.map { .text($0) } ?? .null))
        }
        if let value {
            sqlite3_bind_text(handle, index, value, -1, SQLiteDatabase.transient)
        } else {
            sqlite3_bind_null(handle, index)
        }
    }

    /// Binds `values` to parameters 1, 2, …
    func bind(_ values: [SQLiteDatabase.BoundValue]) {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            switch value {
            case .null: bind(index, Optional<Int64>.none)
            case .integer(let number): bind(index, number)
            case .text(let text): bind(index, text)
            }
        }
    }

    /// Steps once: true when a row is available, false when done.
    func step() throws(StoreError) -> Bool {
        let starting = database.recording && sqlite3_stmt_busy(handle) == 0
        // A unit of work whose transaction SQLite rolled back must not go on in autocommit mode.
        if starting { try database.requireTransaction() }
        let status = sqlite3_step(handle)
        if starting && (status == SQLITE_ROW || status == SQLITE_DONE) && sqlite3_stmt_readonly(handle) == 0 {
            database.record(handle)
        }
        switch status {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let failure = database.error(status, "step")
            sqlite3_reset(handle)
            throw failure
        }
    }

    /// Steps once and maps the row, then resets so that no statement stays open across a COMMIT.
    func firstRow<T>(_ map: (Statement) -> T) throws(StoreError) -> T? {
        defer { sqlite3_reset(handle) }
        return try step() ? map(self) : nil
    }

    func reset() { sqlite3_reset(handle) }

    func run() throws(StoreError) {
        while try step() {}
    }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }
    func optionalInt64(_ column: Int32) -> Int64? { isNull(column) ? nil : int64(column) }

    func text(_ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }
}
