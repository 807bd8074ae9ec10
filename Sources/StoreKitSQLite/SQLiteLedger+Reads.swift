import CSQLite
import StoreKitLedger
import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

// Reads of transactions (held rows first, then SQLite's open transaction) and settings.

extension SQLiteLedger {
    // MARK: Reads

    static let columns = """
        id, original_id, uid, app, product, quantity, state, sequence, date, finished, error_code, error_message,
        revocation_date, revocation_reason, app_username, expires_date
        """

    func record(_ row: Statement) -> TransactionRecord {
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

    func records(_ statement: Statement) throws(LedgerError) -> [TransactionRecord] {
        var result: [TransactionRecord] = []
        defer { statement.reset() }
        while try statement.step() { result.append(record(statement)) }
        return result
    }

    /// Transaction ids are SQLite's signed 64-bit integers: an id above `Int64.max` (from a client
    /// or the command line) names no row. Every id that comes from outside is bound through this.
    static func storedID(_ id: UInt64) -> Int64? { Int64(exactly: id) }

    public func transaction(id: UInt64) throws(LedgerError) -> TransactionRecord? {
        if let row = held.row(id: id) { return row.record }
        guard let stored = Self.storedID(id) else { return nil }
        let select = try database.statement("SELECT \(Self.columns) FROM transactions WHERE id = ?")
        select.bind(1, stored)
        return try select.firstRow { record($0) }
    }

    public func transaction(uid: UInt32, app: String, paymentKey: String) throws(LedgerError) -> TransactionRecord? {
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
    public func unfinished(uid: UInt32, app: String) throws(LedgerError) -> [TransactionRecord] {
        try writeHeldRows()
        let select = try database.statement(
            "SELECT \(Self.columns) FROM transactions WHERE uid = ? AND app = ? AND finished = 0 ORDER BY id")
        select.bind(1, Int64(uid))
        select.bind(2, app)
        return try records(select)
    }

    /// Every transaction of one queue, oldest first (history).
    public func all(uid: UInt32, app: String) throws(LedgerError) -> [TransactionRecord] {
        try writeHeldRows()
        let select = try database.statement(
            "SELECT \(Self.columns) FROM transactions WHERE uid = ? AND app = ? ORDER BY id")
        select.bind(1, Int64(uid))
        select.bind(2, app)
        return try records(select)
    }

    public func changed(uid: UInt32, app: String, afterSequence: UInt64) throws(LedgerError) -> [TransactionRecord] {
        guard let after = Int64(exactly: afterSequence) else { return [] }
        try writeHeldRows()
        let select = try database.statement(
            "SELECT \(Self.columns) FROM transactions WHERE uid = ? AND app = ? AND sequence > ? ORDER BY id")
        select.bind(1, Int64(uid))
        select.bind(2, app)
        select.bind(3, after)
        return try records(select)
    }

    public func restoredCopies(of originalID: UInt64) throws(LedgerError) -> [TransactionRecord] {
        guard let stored = Self.storedID(originalID) else { return [] }
        try writeHeldRows()
        let select = try database.statement(
            "SELECT \(Self.columns) FROM transactions WHERE original_id = ? AND state = ? AND id != original_id ORDER BY id")
        select.bind(1, stored)
        select.bind(2, Int64(TransactionState.restored.rawValue))
        return try records(select)
    }

    /// Transactions filtered by uid, app and finished-ness, oldest first, at most `limit`.
    public func list(uid: UInt32?, app: String?, unfinishedOnly: Bool, afterID: UInt64, limit: Int) throws(LedgerError) -> [TransactionRecord] {
        // An id past what SQLite holds names no row after it.
        guard let after = Self.storedID(afterID) else { return [] }
        try writeHeldRows()
        let select = try database.statement("""
            SELECT \(Self.columns) FROM transactions
            WHERE (?1 IS NULL OR uid = ?1) AND (?2 IS NULL OR app = ?2) AND (?3 = 0 OR finished = 0) AND id > ?5
            ORDER BY id LIMIT ?4
            """)
        select.bind(1, uid.map { Int64($0) })
        select.bind(2, app)
        select.bind(3, unfinishedOnly ? 1 : 0)
        select.bind(4, Int64(limit))
        select.bind(5, after)
        return try records(select)
    }

    /// Unfinished transactions of one queue (for `MaxUnfinishedPerQueue=`): counted once, then kept.
    public func unfinishedCount(of queue: QueueKey) throws(LedgerError) -> Int {
        if let count = unfinishedCounts[queue] { return count }
        try writeHeldRows()
        let select = try database.statement("SELECT count(*) FROM transactions WHERE uid = ? AND app = ? AND finished = 0")
        select.bind(1, Int64(queue.uid))
        select.bind(2, queue.app)
        let count = Int(try select.firstRow { $0.int64(0) } ?? 0)
        unfinishedCounts[queue] = count
        return count
    }

    public func unfinishedCount() throws(LedgerError) -> Int {
        try writeHeldRows()
        return Int(try database.scalarInt("SELECT count(*) FROM transactions WHERE finished = 0") ?? 0)
    }

    // MARK: Settings (virtual clock, test switches)

    public func setting(_ key: String) throws(LedgerError) -> String? {
        let select = try database.statement("SELECT value FROM settings WHERE key = ?")
        select.bind(1, key)
        return try select.firstRow { $0.text(0) }
    }

    static let settingUpsertSQL = "INSERT INTO settings(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"

    public func setSetting(_ key: String, _ value: String?) throws(LedgerError) {
        if let value {
            let upsert = try database.statement(Self.settingUpsertSQL)
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
