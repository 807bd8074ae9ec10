import StoreKitStore
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

/// The ledger in a PostgreSQL database (`[Store] Database=` a libpq connection string): the same
/// tables and semantics as the SQLite file's (TransactionStore+Schema.swift), over libpq.
///
/// A unit of work is one PostgreSQL transaction (`BEGIN` … `COMMIT`), a request savepoint a
/// `SAVEPOINT`; `commit()` returns once PostgreSQL committed, which with `synchronous_commit` on
/// (the default, and what `commit()` asks for) means the commit record is flushed to its WAL:
/// the unit of work is durable when `commit()` returns. Nothing is held in memory between
/// units of work, so another connection sees every acknowledged change.
///
/// A lost connection (PostgreSQL stopped or restarted) fails the statement and the unit of work
/// that ran it; the next `begin()` reconnects, at most every `reconnectInterval` ms.
/// A `COMMIT` whose answer was lost may or may not have committed: the client is told it failed,
/// and a retry with the same payment key finds the committed row instead of making a second one.
public final class PostgresLedger: LedgerStorage {
    public static let schemaVersion = 1

    let connection: PostgresConnection
    public var path: String { connection.description }
    public private(set) var generation: UInt64 = 0
    public private(set) var isInTransaction = false
    /// Transaction ids are taken as in the SQLite ledger (above every id given, at least the
    /// clock's); one host at a time per database until the fleet's id allocation exists.
    var nextID: UInt64
    /// Open request savepoints.
    var savepoints = 0
    /// When the last reconnection was tried (monotonic ms).
    var lastReconnect: Int64 = .min / 2
    static let reconnectInterval: Int64 = 250
    /// What opening found, for the recovery log line.
    public private(set) var openReport = ""

    /// Connects, creates or migrates the schema (refusing a newer one), and reads the highest id.
    public init(conninfo: String) throws(StoreError) {
        if let problem = PostgresConnection.problem(with: conninfo) {
            throw StoreError(.io, path: PostgresConnection.describe(conninfo), message: "bad connection string: \(problem)")
        }
        connection = try PostgresConnection(conninfo: conninfo)
        nextID = TransactionStore.firstTransactionID
        openReport = try migrate()
        nextID = try highestAllocatedID() + 1
    }

    /// Why `conninfo` is no libpq connection string; nil when it is one (for the config loader).
    public static func problem(with conninfo: String) -> String? { PostgresConnection.problem(with: conninfo) }

    /// The database `conninfo` names, for messages (never its password).
    public static func describe(_ conninfo: String) -> String { PostgresConnection.describe(conninfo) }

    public func close() { connection.close() }

    func highestAllocatedID() throws(StoreError) -> UInt64 {
        let highest = try connection.execute("""
            SELECT greatest(coalesce((SELECT max(id) FROM transactions), 0),
                            coalesce((SELECT value::bigint FROM settings WHERE key = 'transactions.lastID'), 0),
                            $1::bigint - 1)
            """, [String(TransactionStore.firstTransactionID)]).firstInt
        return UInt64(highest ?? 0)
    }

    // MARK: Units of work

    public func begin() throws(StoreError) {
        precondition(!isInTransaction, "nested store transaction")
        if connection.isBroken {
            let now = DiskSpaceGuard.monotonicMilliseconds()
            guard now - lastReconnect >= Self.reconnectInterval else {
                throw StoreError(.io, path: path, message: "PostgreSQL is unreachable (reconnecting every \(Self.reconnectInterval) ms)")
            }
            lastReconnect = now
            try connection.reconnect()
        }
        // synchronous_commit on: COMMIT returns after the commit record is flushed (and, with
        // synchronous standbys configured, after they have it). Set per transaction, so that a
        // server or role default of `off` cannot make an acknowledged purchase losable.
        try connection.execute("BEGIN")
        isInTransaction = true
        savepoints = 0
        do throws(StoreError) {
            try connection.execute("SET LOCAL synchronous_commit = on")
        } catch {
            rollback()
            throw error
        }
    }

    public func commit() throws(StoreError) {
        precondition(isInTransaction, "commit without begin")
        do throws(StoreError) {
            try connection.execute("COMMIT")
            isInTransaction = false
        } catch {
            rollback()
            throw error
        }
    }

    public func rollback() {
        if isInTransaction { _ = try? connection.execute("ROLLBACK") }
        isInTransaction = false
        savepoints = 0
        generation &+= 1
    }

    public func savepoint() throws(StoreError) {
        precondition(isInTransaction, "savepoint outside a unit of work")
        try connection.execute("SAVEPOINT request")
        savepoints += 1
    }

    public func releaseSavepoint() throws(StoreError) {
        try connection.execute("RELEASE SAVEPOINT request")
        savepoints -= 1
    }

    public func rollbackToSavepoint() {
        _ = try? connection.execute("ROLLBACK TO SAVEPOINT request")
        _ = try? connection.execute("RELEASE SAVEPOINT request")
        savepoints = max(savepoints - 1, 0)
        generation &+= 1
    }

    // MARK: Transactions

    public func allocateTransactionID() -> UInt64 {
        precondition(isInTransaction, "id allocated outside a unit of work")
        let id = max(nextID, TransactionStore.clockTransactionID())
        nextID = id + 1
        return id
    }

    /// The per-(uid, app) counter, moved in the unit of work: its row stays locked until the
    /// commit, so two daemons on one database hand out increasing numbers in commit order.
    public func nextSequence(uid: UInt32, app: String) throws(StoreError) -> UInt64 {
        precondition(isInTransaction, "sequence allocated outside a unit of work")
        let next = try connection.execute("""
            INSERT INTO sequences(uid, app, last) VALUES($1, $2, 1)
            ON CONFLICT (uid, app) DO UPDATE SET last = sequences.last + 1 RETURNING last
            """, [String(uid), app]).firstInt
        return UInt64(next ?? 0)
    }

    public func insert(_ record: TransactionRecord, paymentKey: String?) throws(StoreError) {
        try connection.execute("""
            INSERT INTO transactions(id, original_id, uid, app, product, quantity, state, sequence, date, finished,
                error_code, error_message, revocation_date, revocation_reason, app_username, expires_date, payment_key)
            VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
            """, [String(record.id), record.originalID.map { String($0) }, String(record.uid), record.app, record.productID,
                  String(record.quantity), String(record.state.rawValue), String(record.sequence), String(record.date),
                  record.finished ? "1" : "0", record.errorCode.map { String($0) }, record.errorMessage,
                  record.revocationDate.map { String($0) }, record.revocationReason.map { String($0) },
                  record.applicationUsername, record.expiresDate.map { String($0) }, paymentKey])
    }

    public func transition(id: UInt64, from: TransactionState, to: TransactionState, sequence: UInt64, date: Int64,
                           errorCode: Int32?, errorMessage: String?, expiresDate: Int64?, originalID: UInt64?) throws(StoreError) -> Bool {
        precondition(from.canMove(to: to), "illegal transition \(from) → \(to)")
        guard let stored = Self.storedID(id) else { return false }
        return try connection.execute("""
            UPDATE transactions SET state = $1, sequence = $2, date = $3, error_code = $4, error_message = $5,
                expires_date = coalesce($8::bigint, expires_date), original_id = coalesce($9::bigint, original_id)
            WHERE id = $6 AND state = $7 AND finished = 0
            """, [String(to.rawValue), String(sequence), String(date), errorCode.map { String($0) }, errorMessage,
                  stored, String(from.rawValue), expiresDate.map { String($0) }, originalID.map { String($0) }]).changed == 1
    }

    public func markFinished(id: UInt64, sequence: UInt64, of queue: TransactionStore.QueueKey?) throws(StoreError) -> Bool {
        guard let stored = Self.storedID(id) else { return false }
        return try connection.execute("""
            UPDATE transactions SET finished = 1, sequence = $1 WHERE id = $2 AND finished = 0 AND state IN (1, 2, 3)
            """, [String(sequence), stored]).changed == 1
    }

    public func setRevocation(id: UInt64, date: Int64, reason: Int32, sequence: UInt64) throws(StoreError) -> Bool {
        guard let stored = Self.storedID(id) else { return false }
        return try connection.execute("""
            UPDATE transactions SET revocation_date = $1, revocation_reason = $2, sequence = $3
            WHERE id = $4 AND revocation_date IS NULL
            """, [String(date), String(reason), String(sequence), stored]).changed == 1
    }

    public func touch(id: UInt64, sequence: UInt64) throws(StoreError) -> Bool {
        guard let stored = Self.storedID(id) else { return false }
        return try connection.execute("UPDATE transactions SET sequence = $1 WHERE id = $2",
                                      [String(sequence), stored]).changed == 1
    }

    public func deleteHistory(uid: UInt32?, app: String?) throws(StoreError) -> (deleted: Int, unfinished: [TransactionRecord]) {
        precondition(isInTransaction, "history deleted outside a unit of work")
        let scope: [String?] = [uid.map { String($0) }, app]
        let unfinished = try records("""
            SELECT \(Self.columns) FROM transactions
            WHERE \(Self.inScope) AND finished = 0 ORDER BY id
            """, scope)
        try setSetting("transactions.lastID", String(max(nextID, TransactionStore.firstTransactionID) - 1))
        try connection.execute("""
            DELETE FROM renewals WHERE transaction_id IN
                (SELECT id FROM transactions WHERE \(Self.inScope))
            """, scope)
        var deleted = 0
        for table in ["transactions", "subscriptions", "purchase_requests"] {
            // The table name is one of the three above, never a value.
            let result = try connection.execute(
                "DELETE FROM \(table) WHERE \(Self.inScope)", scope)
            if table == "transactions" { deleted = result.changed }
        }
        return (deleted, unfinished)
    }

    // MARK: Reads

    /// Rows of one uid and app, either of them nil for all: `$1` the uid, `$2` the app.
    static let inScope = "($1::bigint IS NULL OR uid = $1) AND ($2::text IS NULL OR app = $2)"

    static let columns = """
        id, original_id, uid, app, product, quantity, state, sequence, date, finished, error_code, error_message,
        revocation_date, revocation_reason, app_username, expires_date
        """

    func records(_ sql: String, _ parameters: [String?]) throws(StoreError) -> [TransactionRecord] {
        try connection.execute(sql, parameters).rows.map(Self.record)
    }

    static func record(_ row: [String?]) -> TransactionRecord {
        let int = { (index: Int) -> Int64? in row[index].flatMap { Int64($0) } }
        return TransactionRecord(
            id: UInt64(int(0) ?? 0), originalID: int(1).map { UInt64($0) },
            uid: UInt32(truncatingIfNeeded: int(2) ?? 0), app: row[3] ?? "", productID: row[4] ?? "",
            quantity: Int32(truncatingIfNeeded: int(5) ?? 0),
            state: TransactionState(rawValue: UInt8(truncatingIfNeeded: int(6) ?? 0)) ?? .failed,
            sequence: UInt64(int(7) ?? 0), date: int(8) ?? 0, finished: int(9) != 0,
            errorCode: int(10).map { Int32(truncatingIfNeeded: $0) }, errorMessage: row[11],
            revocationDate: int(12), revocationReason: int(13).map { Int32(truncatingIfNeeded: $0) },
            applicationUsername: row[14], expiresDate: int(15))
    }

    /// Ids are bigint: an id above `Int64.max` (from a client or the command line) names no row.
    static func storedID(_ id: UInt64) -> String? { Int64(exactly: id).map { String($0) } }

    public func transaction(id: UInt64) throws(StoreError) -> TransactionRecord? {
        guard let stored = Self.storedID(id) else { return nil }
        return try records("SELECT \(Self.columns) FROM transactions WHERE id = $1", [stored]).first
    }

    public func transaction(uid: UInt32, app: String, paymentKey: String) throws(StoreError) -> TransactionRecord? {
        try records("SELECT \(Self.columns) FROM transactions WHERE uid = $1 AND app = $2 AND payment_key = $3",
                    [String(uid), app, paymentKey]).first
    }

    public func unfinished(uid: UInt32, app: String) throws(StoreError) -> [TransactionRecord] {
        try records("SELECT \(Self.columns) FROM transactions WHERE uid = $1 AND app = $2 AND finished = 0 ORDER BY id",
                    [String(uid), app])
    }

    public func all(uid: UInt32, app: String) throws(StoreError) -> [TransactionRecord] {
        try records("SELECT \(Self.columns) FROM transactions WHERE uid = $1 AND app = $2 ORDER BY id", [String(uid), app])
    }

    public func list(uid: UInt32?, app: String?, unfinishedOnly: Bool, limit: Int) throws(StoreError) -> [TransactionRecord] {
        try records("""
            SELECT \(Self.columns) FROM transactions
            WHERE \(Self.inScope) AND ($3::int = 0 OR finished = 0)
            ORDER BY id LIMIT $4
            """, [uid.map { String($0) }, app, unfinishedOnly ? "1" : "0", String(limit)])
    }

    public func unfinishedCount(of queue: TransactionStore.QueueKey) throws(StoreError) -> Int {
        Int(try connection.execute("SELECT count(*) FROM transactions WHERE uid = $1 AND app = $2 AND finished = 0",
                                   [String(queue.uid), queue.app]).firstInt ?? 0)
    }

    public func unfinishedCount() throws(StoreError) -> Int {
        Int(try connection.execute("SELECT count(*) FROM transactions WHERE finished = 0").firstInt ?? 0)
    }

    // MARK: Settings

    public func setting(_ key: String) throws(StoreError) -> String? {
        try connection.execute("SELECT value FROM settings WHERE key = $1", [key]).rows.first?.first ?? nil
    }

    public func setSetting(_ key: String, _ value: String?) throws(StoreError) {
        if let value {
            try connection.execute(
                "INSERT INTO settings(key, value) VALUES($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [key, value])
        } else {
            try connection.execute("DELETE FROM settings WHERE key = $1", [key])
        }
    }

    public func settings(prefix: String) throws(StoreError) -> [(key: String, value: String)] {
        try connection.execute("SELECT key, value FROM settings WHERE left(key, length($1)) = $1 ORDER BY key COLLATE \"C\"",
                               [prefix]).rows.map { ($0[0] ?? "", $0[1] ?? "") }
    }
}
