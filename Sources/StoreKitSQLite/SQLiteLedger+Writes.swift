import CSQLite
import StoreKitLedger
import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

// Writes of transactions: ids and sequence numbers, inserts (held in memory when known new),
// guarded transitions, finishing and refunds.

extension SQLiteLedger {
    // MARK: Allocation

    /// A new transaction id: above every id this database gave, and at least the clock's id, so
    /// that a database created later (a reinstall, another `--state-dir`, a restore into a fresh
    /// directory) never gives an id an earlier one gave: apps key what they granted by it.
    public func allocateTransactionID() -> UInt64 {
        precondition(inTransaction, "id allocated outside a unit of work")
        let id = max(nextID, TransactionIDs.fromClock())
        nextID = id + 1
        return id
    }


    /// The next per-(uid, app) sequence number (stored at the next `save()`; after a crash,
    /// recomputed from the rows that carry it).
    public func lastSequence(uid: UInt32, app: String) throws(LedgerError) -> UInt64 {
        if let cached = sequences[QueueKey(uid: uid, app: app)] { return cached }
        let select = try database.statement("SELECT last FROM sequences WHERE uid = ? AND app = ?")
        select.bind(1, Int64(uid))
        select.bind(2, app)
        return try select.firstRow { UInt64($0.int64(0)) } ?? 0
    }

    public func nextSequence(uid: UInt32, app: String) throws(LedgerError) -> UInt64 {
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
    func storeMovedSequences() throws(LedgerError) {
        guard !movedSequences.isEmpty else { return }
        let upsert = try database.statement(Self.sequenceUpsertSQL)
        for values in movedSequenceValues() {
            upsert.reset()
            upsert.bind(values)
            try upsert.run()
        }
        movedSequences.removeAll(keepingCapacity: true)
    }

    static let sequenceUpsertSQL = """
        INSERT INTO sequences(uid, app, last) VALUES(?, ?, ?)
        ON CONFLICT(uid, app) DO UPDATE SET last = excluded.last
        """

    /// The parameters of `sequenceUpsertSQL` for each counter that moved.
    func movedSequenceValues() -> [[SQLiteDatabase.BoundValue]] {
        movedSequences.compactMap { key in
            sequences[key].map { [.integer(Int64(key.uid)), .text(key.app), .integer(Int64($0))] }
        }
    }

    // MARK: Writes

    /// Adds a new transaction; a second row with its id, or with its payment key in its queue, is
    /// refused. In a unit of work, a row whose id and key are known to be new (an id from
    /// `allocateTransactionID()`, a key that `transaction(uid:app:paymentKey:)` just found in no
    /// row) is held (`HeldRows`) and its INSERT recorded for the commit log: it reaches SQLite
    /// at the next save or at a query that needs it. Any other row is inserted at once.
    public func insert(_ record: TransactionRecord, paymentKey: String? = nil) throws(LedgerError) {
        // On a full disk the space left goes to finishing what exists, not to new transactions.
        if let refusal = space.newTransactionRefusal { throw LedgerError(.full, path: path, message: refusal) }
        let key = paymentKey.map { StoredPaymentKey(uid: record.uid, app: record.app, key: $0) }
        if held.row(id: record.id) != nil || key.flatMap({ held.row(key: $0) }) != nil {
            throw LedgerError(.other(SQLITE_CONSTRAINT | (8 << 8)), path: path,   // SQLITE_CONSTRAINT_UNIQUE
                             message: "transaction \(record.id) or its payment key is taken already")
        }
        let keyKnownNew = key.map { $0 == absentPaymentKey } ?? true
        let knownNew = keyKnownNew && record.id >= unusedIDsFrom && record.id > highestInsertedID
        let values = Self.insertValues(record, paymentKey: paymentKey)
        if inTransaction && knownNew {
            try database.recordWithoutRunning(Self.insertSQL, values)
            held.add(HeldRows.Row(record: record.storedForm, key: key, heldSince: heldRowClock()))
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

    func writeHeldRows() throws(LedgerError) {
        guard !held.isEmpty else { return }
        try write(held.allIDs)
    }

    /// Before a statement changes `id` (nil: any row) in SQLite itself: the waiting rows are
    /// written, and the kept copy of what it changes is forgotten, so that no read answers from
    /// a copy older than SQLite's row.
    func prepareToChangeInSQLite(_ id: UInt64?) throws(LedgerError) {
        try writeHeldRows()
        held.forgetWritten(id: id)
    }

    /// Writes the rows held `age` ms or longer into the SQLite transaction, between units of
    /// work: spread over the loop's turns, not all at the next save (which would stall the
    /// requests that arrive meanwhile). A purchase is mostly finished by then, and written once.
    /// Forgets the written rows kept longer than `HeldRows.keepWritten`.
    public func writeRows(heldLongerThan age: Int64, now: Int64) throws(LedgerError) {
        precondition(!inTransaction, "rows written inside a unit of work")
        noticeLostTransaction()
        held.forgetWritten(before: now - HeldRows.keepWritten)
        // Not while a save's COMMIT has the connection: the rows wait for the next turn.
        guard !held.isEmpty, !needsCatchUp, database.takeBackIfDone() else { return }
        let ids = held.takeIDs(heldSince: now - age)
        if !ids.isEmpty { try write(ids) }
    }

    /// Not recorded: these changes are in the units of work that made them. A new row is
    /// inserted, a changed one updated; both are then kept as written.
    func write(_ ids: [UInt64]) throws(LedgerError) {
        if inTransaction { try database.prepareForUse() } else { try openSQLiteTransaction() }
        try database.requireTransaction()
        let now = heldRowClock()
        try database.unrecorded { () throws(LedgerError) in
            for id in ids {
                guard let row = held.row(id: id), !row.isWritten else { continue }
                let (sql, values) = Self.writeStatement(for: row)
                let write = try database.statement(sql)
                write.bind(values)
                try write.run()
                held.noteWritten(id: id, at: now)
            }
        }
    }

    /// For a save (`prepareSave`): the statements that write every held row not yet written,
    /// gathered into `writes` to run before its `COMMIT`. Returns the rows' ids, for the save to
    /// keep them as written once everything it writes is gathered (not before: a row noted
    /// written whose statement never runs would be lost from SQLite).
    func gatherHeldRows(into writes: inout SQLiteDatabase.Writes) throws(LedgerError) -> [UInt64] {
        var gathered: [UInt64] = []
        for id in held.allIDs {
            guard let row = held.row(id: id), !row.isWritten else { continue }
            let (sql, values) = Self.writeStatement(for: row)
            try database.add(sql, values, to: &writes)
            gathered.append(id)
        }
        return gathered
    }

    /// A new row is inserted, a changed one written again.
    static func writeStatement(for row: HeldRows.Row) -> (String, [SQLiteDatabase.BoundValue]) {
        row.state == .changed ? (rewriteSQL, rewriteValues(row.record))
            : (insertSQL, insertValues(row.record, paymentKey: row.key?.text))
    }

    /// A changed row written again: every column a held row's change may touch.
    static let rewriteSQL = """
        UPDATE transactions SET original_id = ?2, state = ?3, sequence = ?4, date = ?5, finished = ?6, error_code = ?7,
            error_message = ?8, revocation_date = ?9, revocation_reason = ?10, expires_date = ?11
        WHERE id = ?1
        """

    static func rewriteValues(_ record: TransactionRecord) -> [SQLiteDatabase.BoundValue] {
        [.integer(Int64(record.id)), .init(record.originalID.map { Int64($0) }), .integer(Int64(record.state.rawValue)),
         .integer(Int64(record.sequence)), .integer(record.date), .integer(record.finished ? 1 : 0),
         .init(record.errorCode.map { Int64($0) }), .init(record.errorMessage), .init(record.revocationDate),
         .init(record.revocationReason.map { Int64($0) }), .init(record.expiresDate)]
    }

    static let insertSQL = """
        INSERT INTO transactions(id, original_id, uid, app, product, quantity, state, sequence, date, finished,
            error_code, error_message, revocation_date, revocation_reason, app_username, expires_date, payment_key)
        VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """

    /// The parameters of `insertSQL` for `record`.
    static func insertValues(_ record: TransactionRecord, paymentKey: String?) -> [SQLiteDatabase.BoundValue] {
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
    ) throws(LedgerError) -> Bool {
        precondition(from.canMove(to: to), "illegal transition \(from) → \(to)")
        try prepareToChangeInSQLite(id)
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
    public func markFinished(id: UInt64, sequence: UInt64, of queue: QueueKey? = nil) throws(LedgerError) -> Bool {
        let finished = try markFinishedRow(id: id, sequence: sequence)
        if finished {
            if let queue { unfinishedCounts[queue]? -= 1 } else { unfinishedCounts.removeAll() }
        }
        return finished
    }

    func markFinishedRow(id: UInt64, sequence: UInt64) throws(LedgerError) -> Bool {
        let sql = """
            UPDATE transactions SET finished = 1, sequence = ?
            WHERE id = ? AND finished = 0 AND state IN (1, 2, 3)
            """
        let values: [SQLiteDatabase.BoundValue] = [.integer(Int64(sequence)), .integer(Int64(id))]
        if let row = held.row(id: id) {
            guard !row.record.finished, row.record.state.isFinishable else { return false }
            try database.recordWithoutRunning(sql, values)
            held.update(id: id, at: heldRowClock()) { record in
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

    public func setRevocation(id: UInt64, date: Int64, reason: Int32, sequence: UInt64) throws(LedgerError) -> Bool {
        try prepareToChangeInSQLite(id)
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
}
