import StoreKitLedger
import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

// Reading the ledger: rows into records, a host's view of finished-ness, pages, counts.

extension PostgresLedger {
    /// A transaction row with its delivery to this host (`$1` is always this host).
    static let view = "transactions t LEFT JOIN deliveries d ON d.transaction_id = t.id AND d.host = $1"
    /// Rows of one account and app, either of them nil for all: `$2` the account, `$3` the app.
    static let inScope = "($2::text IS NULL OR t.account = $2) AND ($3::text IS NULL OR t.app = $3)"
    /// Whether the transaction is finished in this host's queue, for one named by id: its
    /// delivery here, else its own state (a host may answer another's Ask to Buy request).
    static let finishedByID = "CASE WHEN d.host IS NOT NULL THEN d.finished ELSE t.finished END"
    /// The same for lists of a queue: another host's transaction is not in this queue (finished).
    static let finishedInList = "CASE WHEN d.host IS NOT NULL THEN d.finished WHEN t.host = $1 THEN t.finished ELSE 1 END"

    static func columns(finished: String) -> String {
        """
        t.id, t.original_id, t.account, t.app, t.product, t.quantity, t.state, t.sequence, t.date, \(finished),
        t.error_code, t.error_message, t.revocation_date, t.revocation_reason, t.app_username, t.expires_date,
        t.host, d.host IS NOT NULL, t.changed_by, t.finished
        """
    }

    /// A row as the engine sees it, and where it came from.
    struct Row {
        var record: TransactionRecord
        /// The host whose queue it is in ('' for a renewal).
        var host: String
        var deliveredHere: Bool
        var changedBy: String
        /// Finished in the queue of the host that made it (whatever this host sees).
        var finishedThere: Bool
    }

    func rows(_ sql: String, _ parameters: [String?]) throws(LedgerError) -> [Row] {
        try connection.execute(sql, parameters).rows.map(row)
    }

    /// A row of `columns(finished:)` (columns after those are not read).
    func row(_ row: [String?]) -> Row {
        let int = { (index: Int) -> Int64? in row[index].flatMap { Int64($0) } }
        let record = TransactionRecord(
            id: UInt64(int(0) ?? 0), originalID: int(1).map { UInt64($0) },
            uid: accounts.uid(of: row[2] ?? ""), app: row[3] ?? "", productID: row[4] ?? "",
            quantity: Int32(truncatingIfNeeded: int(5) ?? 0),
            state: TransactionState(rawValue: UInt8(truncatingIfNeeded: int(6) ?? 0)) ?? .failed,
            sequence: UInt64(int(7) ?? 0), date: int(8) ?? 0, finished: int(9) != 0,
            errorCode: int(10).map { Int32(truncatingIfNeeded: $0) }, errorMessage: row[11],
            revocationDate: int(12), revocationReason: int(13).map { Int32(truncatingIfNeeded: $0) },
            applicationUsername: row[14], expiresDate: int(15))
        return Row(record: record, host: row[16] ?? "", deliveredHere: row[17] == "t", changedBy: row[18] ?? "",
                   finishedThere: row[19] == "1")
    }

    func records(_ sql: String, _ parameters: [String?]) throws(LedgerError) -> [TransactionRecord] {
        try rows(sql, parameters).map(\.record)
    }

    /// Whether a row of the account's history is seen from this host: its own, a renewal, or
    /// another host's purchase of a product the hosts share (a restore there is that host's own).
    func isSeenHere(_ row: Row) -> Bool {
        row.host == member.host || row.host.isEmpty || row.deliveredHere
            || (row.record.state == .purchased && sharesAcrossHosts(row.record.app, row.record.productID))
    }

    /// `$1` this host, `$2` the account of `uid`, `$3` the app.
    func scope(uid: UInt32?, app: String?) -> [String?] {
        [member.host, uid.map { accounts.account(of: $0) }, app]
    }

    /// Ids are bigint: an id above `Int64.max` (from a client or the command line) names no row.
    static func storedID(_ id: UInt64) -> String? { Int64(exactly: id).map { String($0) } }

    public func transaction(id: UInt64) throws(LedgerError) -> TransactionRecord? {
        if let row = unitReads.byID[id] { return row.record }
        guard let stored = Self.storedID(id) else { return nil }
        return try records("SELECT \(Self.columns(finished: Self.finishedByID)) FROM \(Self.view) WHERE t.id = $2",
                           [member.host, stored]).first
    }

    public func transaction(uid: UInt32, app: String, paymentKey: String) throws(LedgerError) -> TransactionRecord? {
        if let read = unitReads.byKey[UnitReads.keyName(accounts.account(of: uid), app, paymentKey)] { return read }
        return try records("""
            SELECT \(Self.columns(finished: Self.finishedByID)) FROM \(Self.view)
            WHERE t.account = $2 AND t.app = $3 AND t.payment_key = $4
            """, scope(uid: uid, app: app) + [paymentKey]).first
    }

    /// This host's queue of (account, app): its own unfinished transactions and the renewals
    /// delivered here and not finished here. Reading it starts watching the queue: the changes
    /// other daemons make to it from now on are read by `changesElsewhere`.
    public func unfinished(uid: UInt32, app: String) throws(LedgerError) -> [TransactionRecord] {
        let account = accounts.account(of: uid)
        try register(account: account, app: app)
        let name = Self.queueName(account, app)
        if watermarks[name] == nil {
            queueSequenceWrites()
            // Read before the queue: a change committed in between is in both (told twice, never missed).
            watermarks[name] = UInt64(try connection.execute("SELECT last FROM sequences WHERE account = $1 AND app = $2",
                                                             [account, app]).firstInt ?? 0)
        }
        // Two index scans (this host's unfinished rows; its unfinished deliveries), not an OR
        // across the join, which would read the queue's whole history.
        return try records("""
            SELECT \(Self.columns(finished: "0")) FROM \(Self.view)
            WHERE t.host = $1 AND t.account = $2 AND t.app = $3 AND t.finished = 0
            UNION ALL
            SELECT \(Self.columns(finished: "0")) FROM transactions t
                JOIN deliveries d ON d.transaction_id = t.id AND d.host = $1 AND d.finished = 0
            WHERE t.account = $2 AND t.app = $3
            ORDER BY 1
            """, scope(uid: uid, app: app))
    }

    public func all(uid: UInt32, app: String) throws(LedgerError) -> [TransactionRecord] {
        try rows("""
            SELECT \(Self.columns(finished: Self.finishedInList)) FROM \(Self.view)
            WHERE t.account = $2 AND t.app = $3 ORDER BY t.id
            """, scope(uid: uid, app: app)).filter(isSeenHere).map(\.record)
    }

    public func changed(uid: UInt32, app: String, afterSequence: UInt64) throws(LedgerError) -> [TransactionRecord] {
        guard let after = Int64(exactly: afterSequence) else { return [] }
        return try rows("""
            SELECT \(Self.columns(finished: Self.finishedInList)) FROM \(Self.view)
            WHERE t.account = $2 AND t.app = $3 AND t.sequence > $4 ORDER BY t.id
            """, scope(uid: uid, app: app) + [String(after)]).filter(isSeenHere).map(\.record)
    }

    /// Every host's restored copies: a refund on one host takes them back on all.
    public func restoredCopies(of originalID: UInt64) throws(LedgerError) -> [TransactionRecord] {
        guard let stored = Self.storedID(originalID) else { return [] }
        return try records("""
            SELECT \(Self.columns(finished: Self.finishedByID)) FROM \(Self.view)
            WHERE t.original_id = $2 AND t.state = $3 AND t.id != t.original_id ORDER BY t.id
            """, [member.host, stored, String(TransactionState.restored.rawValue)])
    }

    /// An account's history as this host sees it; with no uid, every account's.
    public func list(uid: UInt32?, app: String?, unfinishedOnly: Bool, afterID: UInt64, limit: Int) throws(LedgerError) -> [TransactionRecord] {
        guard let first = Int64(exactly: afterID) else { return [] }
        var found: [TransactionRecord] = []
        var after: Int64 = afterID == 0 ? -1 : first
        // Rows of other hosts that this host does not see are skipped: read in pages until `limit`.
        while found.count < limit {
            let page = try rows("""
                SELECT \(Self.columns(finished: Self.finishedInList)) FROM \(Self.view)
                WHERE \(Self.inScope) AND t.id > $4 ORDER BY t.id LIMIT $5
                """, scope(uid: uid, app: app) + [String(after), String(limit)])
            for row in page where (uid == nil || isSeenHere(row)) && (!unfinishedOnly || !row.record.finished) {
                found.append(row.record)
            }
            guard page.count == limit, let last = page.last else { break }
            after = Int64(last.record.id)
        }
        return Array(found.prefix(limit))
    }

    public func unfinishedCount(of queue: QueueKey) throws(LedgerError) -> Int {
        if let count = unitReads.unfinishedCounts[Self.queueName(accounts.account(of: queue.uid), queue.app)] { return count }
        // Counted in two index scans, as `unfinished` reads them.
        return Int(try connection.execute("""
            SELECT (SELECT count(*) FROM transactions WHERE host = $1 AND account = $2 AND app = $3 AND finished = 0)
                 + (SELECT count(*) FROM deliveries d JOIN transactions t ON t.id = d.transaction_id
                    WHERE d.host = $1 AND d.finished = 0 AND t.account = $2 AND t.app = $3)
            """, scope(uid: queue.uid, app: queue.app)).firstInt ?? 0)
    }

    /// Unfinished transactions in this host's queues.
    public func unfinishedCount() throws(LedgerError) -> Int {
        Int(try connection.execute("""
            SELECT (SELECT count(*) FROM transactions WHERE host = $1 AND finished = 0)
                 + (SELECT count(*) FROM deliveries WHERE host = $1 AND finished = 0)
            """, [member.host]).firstInt ?? 0)
    }
}
