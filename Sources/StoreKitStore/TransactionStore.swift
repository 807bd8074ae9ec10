import CSQLite
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

/// The durable payment queue: every transaction of every (uid, app), in one SQLite file.
///
/// Writes happen inside `begin()` … `commit()`; the daemon groups many clients' requests into one
/// transaction (group commit) and tells no client anything before `commit()` returned.
/// Transitions are guarded in SQL (`WHERE state = ?`) and the changed-row count is checked.
public final class TransactionStore {
    public static let schemaVersion = 1
    /// `PRAGMA application_id`: "SKQD". A database with another id is not ours and is never touched.
    public static let applicationID: Int32 = 0x534B_5144

    public let database: SQLiteDatabase
    public var path: String { database.path }

    private var nextID: UInt64 = 0
    private var sequences: [QueueKey: UInt64] = [:]
    private var inTransaction = false

    /// What was found at open, for the recovery log line.
    public private(set) var openReport = ""

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
    public init(path: String) throws(StoreError) {
        let existed = try Self.checkHeader(path: path)
        database = try SQLiteDatabase(path: path)
        // Identify the file before changing anything about it: a foreign database is never touched
        // (not even switched to WAL, which rewrites its header).
        let applicationID = Int32(truncatingIfNeeded: try database.scalarInt("PRAGMA application_id") ?? 0)
        let version = Int(try database.scalarInt("PRAGMA user_version") ?? 0)
        if existed {
            let tables = try database.scalarInt("SELECT count(*) FROM sqlite_schema") ?? 0
            if applicationID != Self.applicationID && !(applicationID == 0 && tables == 0) {
                throw StoreError(.foreignDatabase, path: path,
                                 message: "not a storekitd database (application_id \(applicationID)); refusing to touch it")
            }
        }
        // WAL: readers never block the writer and a commit is one append + fsync of the log.
        // synchronous=FULL: the WAL is fsynced at every commit, so an acknowledged change survives
        // a power cut, not only a crash of the daemon.
        guard try database.scalarText("PRAGMA journal_mode=WAL")?.lowercased() == "wal" else {
            throw StoreError(.io, path: path, message: "cannot switch to WAL journal mode")
        }
        try database.execute("PRAGMA synchronous=FULL")
        try database.execute("PRAGMA foreign_keys=ON")
        guard version <= Self.schemaVersion else {
            throw StoreError(.unsupportedSchema(found: version, supported: Self.schemaVersion), path: path,
                             message: "schema version \(version) is newer than this storekitd supports (\(Self.schemaVersion))")
        }
        if version < Self.schemaVersion {
            try migrate(from: version)
            openReport = existed ? "migrated schema \(version) → \(Self.schemaVersion)" : "created schema \(Self.schemaVersion)"
        } else {
            openReport = "schema \(version)"
        }
        nextID = UInt64(try database.scalarInt("SELECT max(id) FROM transactions") ?? 0) + 1
        if nextID < Self.firstTransactionID { nextID = Self.firstTransactionID }
    }

    /// Transaction identifiers look like the App Store's: 16 digits.
    public static let firstTransactionID: UInt64 = 2_000_000_000_000_001

    /// Reads the first 16 bytes: an existing non-empty file must be an SQLite 3 database.
    private static func checkHeader(path: String) throws(StoreError) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return false }
            throw StoreError(.io, path: path, message: "cannot open: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var header = [UInt8](repeating: 0, count: 16)
        let count = read(fd, &header, 16)
        if count == 0 { return false }
        let magic = Array("SQLite format 3\0".utf8)
        guard count == 16, header == magic else {
            throw StoreError(.notADatabase, path: path, message: "file is not an SQLite database (bad header); refusing to touch it")
        }
        return true
    }

    private func migrate(from version: Int) throws(StoreError) {
        try database.execute("BEGIN IMMEDIATE")
        do {
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
            try database.execute("PRAGMA application_id=\(Self.applicationID)")
            try database.execute("PRAGMA user_version=\(Self.schemaVersion)")
            try database.execute("COMMIT")
        } catch {
            try? database.execute("ROLLBACK")
            throw error
        }
    }

    // MARK: Transactions (units of work)

    public func begin() throws(StoreError) {
        precondition(!inTransaction, "nested store transaction")
        try database.execute("BEGIN IMMEDIATE")
        inTransaction = true
    }

    /// Makes everything since `begin()` durable (fsync of the WAL). Throws when it could not.
    public func commit() throws(StoreError) {
        precondition(inTransaction, "commit without begin")
        do {
            try database.execute("COMMIT")
            inTransaction = false
        } catch {
            rollback()
            throw error
        }
    }

    /// Abandons the unit of work and forgets cached counters that may include its changes.
    public func rollback() {
        if inTransaction {
            try? database.execute("ROLLBACK")
            inTransaction = false
        }
        sequences.removeAll()
        nextID = UInt64((try? database.scalarInt("SELECT max(id) FROM transactions")) ?? 0) + 1
        if nextID < Self.firstTransactionID { nextID = Self.firstTransactionID }
    }

    public var isInTransaction: Bool { inTransaction }

    // MARK: Allocation

    public func allocateTransactionID() -> UInt64 {
        precondition(inTransaction, "id allocated outside a unit of work")
        defer { nextID += 1 }
        return nextID
    }

    /// The next per-(uid, app) sequence number, persisted in the current unit of work.
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
        let upsert = try database.statement("""
            INSERT INTO sequences(uid, app, last) VALUES(?, ?, ?)
            ON CONFLICT(uid, app) DO UPDATE SET last = excluded.last
            """)
        upsert.bind(1, Int64(uid))
        upsert.bind(2, app)
        upsert.bind(3, Int64(next))
        try upsert.run()
        sequences[key] = next
        return next
    }

    // MARK: Writes

    public func insert(_ record: TransactionRecord, paymentKey: String? = nil) throws(StoreError) {
        let insert = try database.statement("""
            INSERT INTO transactions(id, original_id, uid, app, product, quantity, state, sequence, date, finished,
                error_code, error_message, revocation_date, revocation_reason, app_username, expires_date, payment_key)
            VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        insert.bind(1, Int64(record.id))
        insert.bind(2, record.originalID.map { Int64($0) })
        insert.bind(3, Int64(record.uid))
        insert.bind(4, record.app)
        insert.bind(5, record.productID)
        insert.bind(6, Int64(record.quantity))
        insert.bind(7, Int64(record.state.rawValue))
        insert.bind(8, Int64(record.sequence))
        insert.bind(9, record.date)
        insert.bind(10, record.finished ? 1 : 0)
        insert.bind(11, record.errorCode.map { Int64($0) })
        insert.bind(12, record.errorMessage)
        insert.bind(13, record.revocationDate)
        insert.bind(14, record.revocationReason.map { Int64($0) })
        insert.bind(15, record.applicationUsername)
        insert.bind(16, record.expiresDate)
        insert.bind(17, paymentKey)
        try insert.run()
    }

    /// Moves `id` from `from` to `to` if it is still in `from` and unfinished; false when it was not.
    public func transition(
        id: UInt64, from: TransactionState, to: TransactionState, sequence: UInt64, date: Int64,
        errorCode: Int32? = nil, errorMessage: String? = nil
    ) throws(StoreError) -> Bool {
        precondition(from.canMove(to: to), "illegal transition \(from) → \(to)")
        let update = try database.statement("""
            UPDATE transactions SET state = ?, sequence = ?, date = ?, error_code = ?, error_message = ?
            WHERE id = ? AND state = ? AND finished = 0
            """)
        update.bind(1, Int64(to.rawValue))
        update.bind(2, Int64(sequence))
        update.bind(3, date)
        update.bind(4, errorCode.map { Int64($0) })
        update.bind(5, errorMessage)
        update.bind(6, Int64(id))
        update.bind(7, Int64(from.rawValue))
        try update.run()
        return database.changes == 1
    }

    /// Marks a finishable transaction finished; false when it is not in a finishable, unfinished state.
    public func markFinished(id: UInt64, sequence: UInt64) throws(StoreError) -> Bool {
        let update = try database.statement("""
            UPDATE transactions SET finished = 1, sequence = ?
            WHERE id = ? AND finished = 0 AND state IN (1, 2, 3)
            """)
        update.bind(1, Int64(sequence))
        update.bind(2, Int64(id))
        try update.run()
        return database.changes == 1
    }

    public func setRevocation(id: UInt64, date: Int64, reason: Int32, sequence: UInt64) throws(StoreError) -> Bool {
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

    public func transaction(id: UInt64) throws(StoreError) -> TransactionRecord? {
        let select = try database.statement("SELECT \(Self.columns) FROM transactions WHERE id = ?")
        select.bind(1, Int64(id))
        return try select.firstRow { record($0) }
    }

    public func transaction(uid: UInt32, app: String, paymentKey: String) throws(StoreError) -> TransactionRecord? {
        let select = try database.statement(
            "SELECT \(Self.columns) FROM transactions WHERE uid = ? AND app = ? AND payment_key = ?")
        select.bind(1, Int64(uid))
        select.bind(2, app)
        select.bind(3, paymentKey)
        return try select.firstRow { record($0) }
    }

    /// Every unfinished transaction of one queue, oldest first.
    public func unfinished(uid: UInt32, app: String) throws(StoreError) -> [TransactionRecord] {
        let select = try database.statement(
            "SELECT \(Self.columns) FROM transactions WHERE uid = ? AND app = ? AND finished = 0 ORDER BY id")
        select.bind(1, Int64(uid))
        select.bind(2, app)
        return try records(select)
    }

    /// Every transaction of one queue, oldest first (history).
    public func all(uid: UInt32, app: String) throws(StoreError) -> [TransactionRecord] {
        let select = try database.statement(
            "SELECT \(Self.columns) FROM transactions WHERE uid = ? AND app = ? ORDER BY id")
        select.bind(1, Int64(uid))
        select.bind(2, app)
        return try records(select)
    }

    /// Transactions filtered by uid, app and finished-ness, oldest first, at most `limit`.
    public func list(uid: UInt32?, app: String?, unfinishedOnly: Bool, limit: Int = 10_000) throws(StoreError) -> [TransactionRecord] {
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

    public func unfinishedCount() throws(StoreError) -> Int {
        Int(try database.scalarInt("SELECT count(*) FROM transactions WHERE finished = 0") ?? 0)
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
