import CSQLite
import StoreKitLedger
import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

// MARK: - The simulated store's schedule (schema v2)

extension SQLiteLedger {
    // MARK: Subscriptions

    static let subscriptionColumns = """
        original_id, uid, app, group_id, product, quantity, app_username, status, period_start, expires_date,
        auto_renew, next_product, offer_periods_left, grace_end, retry_end, due, last_transaction, renewals
        """

    func subscription(_ row: Statement) -> Subscription {
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

    func subscriptions(_ statement: Statement) throws(LedgerError) -> [Subscription] {
        var result: [Subscription] = []
        defer { statement.reset() }
        while try statement.step() { result.append(subscription(statement)) }
        return result
    }

    /// Inserts or replaces the row of `subscription.originalID`.
    public func upsert(_ subscription: Subscription) throws(LedgerError) {
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

    /// Records that the store made transaction `id` by renewing a subscription.
    public func markRenewal(transactionID id: UInt64) throws(LedgerError) {
        precondition(inTransaction, "renewal recorded outside a unit of work")
        let insert = try database.statement("INSERT OR IGNORE INTO renewals(transaction_id) VALUES(?)")
        insert.bind(1, Int64(id))
        try insert.run()
    }

    /// Whether the store made transaction `id` by renewing a subscription.
    public func isRenewal(transactionID id: UInt64) throws(LedgerError) -> Bool {
        guard let stored = Self.storedID(id) else { return false }
        let select = try database.statement("SELECT 1 FROM renewals WHERE transaction_id = ?")
        select.bind(1, stored)
        return try select.firstRow { _ in true } ?? false
    }

    public func subscription(originalID: UInt64) throws(LedgerError) -> Subscription? {
        guard let stored = Self.storedID(originalID) else { return nil }
        let select = try database.statement("SELECT \(Self.subscriptionColumns) FROM subscriptions WHERE original_id = ?")
        select.bind(1, stored)
        return try select.firstRow { subscription($0) }
    }

    public func subscription(uid: UInt32, app: String, groupID: String) throws(LedgerError) -> Subscription? {
        let select = try database.statement(
            "SELECT \(Self.subscriptionColumns) FROM subscriptions WHERE uid = ? AND app = ? AND group_id = ?")
        select.bind(1, Int64(uid))
        select.bind(2, app)
        select.bind(3, groupID)
        return try select.firstRow { subscription($0) }
    }

    /// Subscriptions filtered by uid and app, oldest chain first.
    public func subscriptions(uid: UInt32?, app: String?) throws(LedgerError) -> [Subscription] {
        let select = try database.statement("""
            SELECT \(Self.subscriptionColumns) FROM subscriptions
            WHERE (?1 IS NULL OR uid = ?1) AND (?2 IS NULL OR app = ?2) ORDER BY original_id
            """)
        select.bind(1, uid.map { Int64($0) })
        select.bind(2, app)
        return try subscriptions(select)
    }

    /// Subscriptions whose next event is due at `time` or earlier, earliest first.
    public func dueSubscriptions(at time: Int64, limit: Int) throws(LedgerError) -> [Subscription] {
        let select = try database.statement("""
            SELECT \(Self.subscriptionColumns) FROM subscriptions WHERE due IS NOT NULL AND due <= ?
            ORDER BY due, original_id LIMIT ?
            """)
        select.bind(1, time)
        select.bind(2, Int64(limit))
        return try subscriptions(select)
    }

    // MARK: Purchase requests (Ask to Buy, interrupted purchases)

    func purchaseRequest(_ row: Statement) -> PurchaseRequest {
        PurchaseRequest(
            transactionID: UInt64(row.int64(0)),
            kind: PurchaseRequest.Kind(rawValue: Int(row.int64(1))) ?? .askToBuy,
            uid: UInt32(truncatingIfNeeded: row.int64(2)), app: row.text(3), productID: row.text(4),
            created: row.int64(5), expires: row.optionalInt64(6))
    }

    func purchaseRequests(_ statement: Statement) throws(LedgerError) -> [PurchaseRequest] {
        var result: [PurchaseRequest] = []
        defer { statement.reset() }
        while try statement.step() { result.append(purchaseRequest(statement)) }
        return result
    }

    static let requestColumns = "transaction_id, kind, uid, app, product, created, expires"

    public func insert(_ request: PurchaseRequest) throws(LedgerError) {
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
    public func removePurchaseRequest(transactionID: UInt64) throws(LedgerError) -> Bool {
        guard let stored = Self.storedID(transactionID) else { return false }
        let delete = try database.statement("DELETE FROM purchase_requests WHERE transaction_id = ?")
        delete.bind(1, stored)
        try delete.run()
        return database.changes == 1
    }

    public func purchaseRequest(transactionID: UInt64) throws(LedgerError) -> PurchaseRequest? {
        guard let stored = Self.storedID(transactionID) else { return nil }
        let select = try database.statement(
            "SELECT \(Self.requestColumns) FROM purchase_requests WHERE transaction_id = ?")
        select.bind(1, stored)
        return try select.firstRow { purchaseRequest($0) }
    }

    /// The oldest open request of this kind for the product, if any (Ask to Buy consolidation).
    public func openPurchaseRequest(uid: UInt32, app: String, productID: String, kind: PurchaseRequest.Kind) throws(LedgerError) -> PurchaseRequest? {
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

    public func purchaseRequests(uid: UInt32?, app: String?) throws(LedgerError) -> [PurchaseRequest] {
        let select = try database.statement("""
            SELECT \(Self.requestColumns) FROM purchase_requests
            WHERE (?1 IS NULL OR uid = ?1) AND (?2 IS NULL OR app = ?2) ORDER BY transaction_id
            """)
        select.bind(1, uid.map { Int64($0) })
        select.bind(2, app)
        return try purchaseRequests(select)
    }

    /// Requests that lapse at `time` or earlier, earliest first.
    public func duePurchaseRequests(at time: Int64, limit: Int) throws(LedgerError) -> [PurchaseRequest] {
        let select = try database.statement("""
            SELECT \(Self.requestColumns) FROM purchase_requests WHERE expires IS NOT NULL AND expires <= ?
            ORDER BY expires, transaction_id LIMIT ?
            """)
        select.bind(1, time)
        select.bind(2, Int64(limit))
        return try purchaseRequests(select)
    }

    /// The earliest scheduled event of the whole store (subscriptions and lapsing requests).
    public func nextDueTime() throws(LedgerError) -> Int64? {
        try database.scalarInt("""
            SELECT min(t) FROM (
                SELECT min(due) AS t FROM subscriptions WHERE due IS NOT NULL
                UNION ALL SELECT min(expires) FROM purchase_requests WHERE expires IS NOT NULL)
            """)
    }

    // MARK: Transaction changes of the simulated store

    /// Gives a transaction a new sequence number without changing it otherwise (a re-delivered
    /// Ask to Buy request); false when it does not exist.
    public func touch(id: UInt64, sequence: UInt64) throws(LedgerError) -> Bool {
        try prepareToChangeInSQLite(id)
        let update = try database.statement("UPDATE transactions SET sequence = ? WHERE id = ?")
        update.bind(1, Int64(sequence))
        update.bind(2, Int64(id))
        try update.run()
        return database.changes == 1
    }

    /// Deletes every transaction, subscription and purchase request of the matching queues
    /// (`storekitctl clear`) and returns the transactions that were still unfinished. Sequence
    /// counters are kept: they never go back.
    public func deleteHistory(uid: UInt32?, app: String?) throws(LedgerError) -> (deleted: Int, unfinished: [TransactionRecord]) {
        precondition(inTransaction, "history deleted outside a unit of work")
        // The counters of the queues emptied here must not come back lower after a replay
        // (which recomputes them from the rows): store them in this unit of work.
        try storeMovedSequences()
        try prepareToChangeInSQLite(nil)
        let select = try database.statement("""
            SELECT \(Self.columns) FROM transactions
            WHERE (?1 IS NULL OR uid = ?1) AND (?2 IS NULL OR app = ?2) AND finished = 0 ORDER BY id
            """)
        select.bind(1, uid.map { Int64($0) })
        select.bind(2, app)
        let unfinished = try records(select)
        try setSetting("transactions.lastID", String(max(nextID, TransactionIDs.first) - 1))
        var deleted = 0
        let renewals = try database.statement("""
            DELETE FROM renewals WHERE transaction_id IN
                (SELECT id FROM transactions WHERE (?1 IS NULL OR uid = ?1) AND (?2 IS NULL OR app = ?2))
            """)
        renewals.bind(1, uid.map { Int64($0) })
        renewals.bind(2, app)
        try renewals.run()
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

    public func deleteTransaction(id: UInt64) throws(LedgerError) -> TransactionRecord? {
        precondition(inTransaction, "a transaction deleted outside a unit of work")
        guard let record = try transaction(id: id), let stored = Self.storedID(id) else { return nil }
        // As for a history: the queue's counter must not come back lower after a replay.
        try storeMovedSequences()
        try prepareToChangeInSQLite(nil)
        for sql in ["DELETE FROM renewals WHERE transaction_id = ?1", "DELETE FROM purchase_requests WHERE transaction_id = ?1",
                    "DELETE FROM transactions WHERE id = ?1"] {
            let delete = try database.statement(sql)
            delete.bind(1, stored)
            try delete.run()
        }
        unfinishedCounts.removeAll()
        return record
    }

    /// Every setting whose key starts with `prefix`, sorted by key.
    public func settings(prefix: String) throws(LedgerError) -> [(key: String, value: String)] {
        let select = try database.statement("SELECT key, value FROM settings WHERE substr(key, 1, length(?1)) = ?1 ORDER BY key")
        select.bind(1, prefix)
        var result: [(key: String, value: String)] = []
        defer { select.reset() }
        while try select.step() { result.append((select.text(0), select.text(1))) }
        return result
    }
}
