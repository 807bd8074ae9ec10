import StoreKitLedger

// The simulated store's schedule in PostgreSQL: subscriptions, renewals, purchase requests, due
// events (as SQLiteLedger+Schedule.swift does in SQLite).

extension PostgresLedger {

    static let subscriptionColumns = """
        original_id, account, app, group_id, product, quantity, app_username, status, period_start, expires_date,
        auto_renew, next_product, offer_periods_left, grace_end, retry_end, due, last_transaction, renewals
        """

    func subscription(_ row: [String?]) -> Subscription {
        let int = { (index: Int) -> Int64? in row[index].flatMap { Int64($0) } }
        return Subscription(
            originalID: UInt64(int(0) ?? 0), uid: accounts.uid(of: row[1] ?? ""), app: row[2] ?? "",
            groupID: row[3] ?? "", productID: row[4] ?? "", quantity: Int32(truncatingIfNeeded: int(5) ?? 0),
            applicationUsername: row[6], status: Subscription.Status(rawValue: Int(int(7) ?? 1)) ?? .expired,
            periodStart: int(8) ?? 0, expiresDate: int(9) ?? 0, autoRenew: int(10) != 0, nextProductID: row[11],
            offerPeriodsLeft: Int(int(12) ?? 0), gracePeriodEnd: int(13), billingRetryEnd: int(14), due: int(15),
            lastTransactionID: UInt64(int(16) ?? 0), renewals: Int(int(17) ?? 0))
    }

    func subscriptions(_ sql: String, _ parameters: [String?]) throws(LedgerError) -> [Subscription] {
        try connection.execute(sql, parameters).rows.map(subscription)
    }

    public func upsert(_ subscription: Subscription) throws(LedgerError) {
        precondition(isInTransaction, "subscription saved outside a unit of work")
        changedOther = true
        try connection.execute("""
            INSERT INTO subscriptions(\(Self.subscriptionColumns), uid)
            VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
            ON CONFLICT (original_id) DO UPDATE SET
                account = $2, app = $3, group_id = $4, product = $5, quantity = $6, app_username = $7, status = $8,
                period_start = $9, expires_date = $10, auto_renew = $11, next_product = $12,
                offer_periods_left = $13, grace_end = $14, retry_end = $15, due = $16, last_transaction = $17,
                renewals = $18
            """, [String(subscription.originalID), accounts.account(of: subscription.uid), subscription.app, subscription.groupID,
                  subscription.productID, String(subscription.quantity), subscription.applicationUsername,
                  String(subscription.status.rawValue), String(subscription.periodStart), String(subscription.expiresDate),
                  subscription.autoRenew ? "1" : "0", subscription.nextProductID, String(subscription.offerPeriodsLeft),
                  subscription.gracePeriodEnd.map { String($0) }, subscription.billingRetryEnd.map { String($0) },
                  subscription.due.map { String($0) }, String(subscription.lastTransactionID), String(subscription.renewals),
                  String(subscription.uid)])
    }

    /// A renewal belongs to the account, not to a host: it leaves this host's queue (host '') and
    /// is delivered to every host where the account uses the app, each of which finishes its own.
    public func markRenewal(transactionID id: UInt64) throws(LedgerError) {
        precondition(isInTransaction, "renewal recorded outside a unit of work")
        unitReads.forgetRows()   // its deliveries now decide its finishing, and count in queues
        unitReads.ownChanges.forgetAll()   // it is no longer this host's own row
        try connection.execute("INSERT INTO renewals(transaction_id) VALUES($1) ON CONFLICT DO NOTHING", [String(id)])
        try connection.execute("UPDATE transactions SET host = '' WHERE id = $1", [String(id)])
        try connection.execute("""
            INSERT INTO deliveries(transaction_id, host)
            SELECT t.id, q.host FROM transactions t JOIN fleet_queues q ON q.account = t.account AND q.app = t.app
            WHERE t.id = $1 ON CONFLICT DO NOTHING
            """, [String(id)])
    }

    public func isRenewal(transactionID id: UInt64) throws(LedgerError) -> Bool {
        guard let stored = Self.storedID(id) else { return false }
        return try !connection.execute("SELECT 1 FROM renewals WHERE transaction_id = $1", [stored]).rows.isEmpty
    }

    public func subscription(originalID: UInt64) throws(LedgerError) -> Subscription? {
        guard let stored = Self.storedID(originalID) else { return nil }
        return try subscriptions("SELECT \(Self.subscriptionColumns) FROM subscriptions WHERE original_id = $1", [stored]).first
    }

    public func subscription(uid: UInt32, app: String, groupID: String) throws(LedgerError) -> Subscription? {
        try subscriptions("SELECT \(Self.subscriptionColumns) FROM subscriptions WHERE account = $1 AND app = $2 AND group_id = $3",
                          [accounts.account(of: uid), app, groupID]).first
    }

    public func subscriptions(uid: UInt32?, app: String?) throws(LedgerError) -> [Subscription] {
        try subscriptions("""
            SELECT \(Self.subscriptionColumns) FROM subscriptions
            WHERE \(Self.accountScope) ORDER BY original_id
            """, [uid.map { accounts.account(of: $0) }, app])
    }

    /// Due subscriptions, locked until the unit of work ends; those another daemon of the fleet
    /// has locked (it is firing them) are skipped: each event is fired by exactly one daemon, and
    /// by another if that one dies before it commits.
    public func dueSubscriptions(at time: Int64, limit: Int) throws(LedgerError) -> [Subscription] {
        try subscriptions("""
            SELECT \(Self.subscriptionColumns) FROM subscriptions WHERE due IS NOT NULL AND due <= $1
            ORDER BY due, original_id LIMIT $2 FOR UPDATE SKIP LOCKED
            """, [String(time), String(limit)])
    }

    // MARK: Purchase requests

    static let requestColumns = "transaction_id, kind, account, app, product, created, expires"

    /// Rows of one account and app, either of them nil for all: `$1` the account, `$2` the app.
    static let accountScope = "($1::text IS NULL OR account = $1) AND ($2::text IS NULL OR app = $2)"

    func purchaseRequests(_ sql: String, _ parameters: [String?]) throws(LedgerError) -> [PurchaseRequest] {
        try connection.execute(sql, parameters).rows.map { row in
            let int = { (index: Int) -> Int64? in row[index].flatMap { Int64($0) } }
            return PurchaseRequest(
                transactionID: UInt64(int(0) ?? 0), kind: PurchaseRequest.Kind(rawValue: Int(int(1) ?? 0)) ?? .askToBuy,
                uid: accounts.uid(of: row[2] ?? ""), app: row[3] ?? "", productID: row[4] ?? "",
                created: int(5) ?? 0, expires: int(6))
        }
    }

    public func insert(_ request: PurchaseRequest) throws(LedgerError) {
        precondition(isInTransaction, "purchase request recorded outside a unit of work")
        changedOther = true
        try connection.execute(
            "INSERT INTO purchase_requests(\(Self.requestColumns), uid) VALUES($1, $2, $3, $4, $5, $6, $7, $8)",
            [String(request.transactionID), String(request.kind.rawValue), accounts.account(of: request.uid), request.app,
             request.productID, String(request.created), request.expires.map { String($0) }, String(request.uid)])
    }

    public func removePurchaseRequest(transactionID: UInt64) throws(LedgerError) -> Bool {
        guard let stored = Self.storedID(transactionID) else { return false }
        changedOther = true
        return try connection.execute("DELETE FROM purchase_requests WHERE transaction_id = $1", [stored]).changed == 1
    }

    public func purchaseRequest(transactionID: UInt64) throws(LedgerError) -> PurchaseRequest? {
        guard let stored = Self.storedID(transactionID) else { return nil }
        return try purchaseRequests("SELECT \(Self.requestColumns) FROM purchase_requests WHERE transaction_id = $1",
                                    [stored]).first
    }

    public func openPurchaseRequest(uid: UInt32, app: String, productID: String,
                                    kind: PurchaseRequest.Kind) throws(LedgerError) -> PurchaseRequest? {
        try purchaseRequests("""
            SELECT \(Self.requestColumns) FROM purchase_requests
            WHERE account = $1 AND app = $2 AND product = $3 AND kind = $4 ORDER BY transaction_id LIMIT 1
            """, [accounts.account(of: uid), app, productID, String(kind.rawValue)]).first
    }

    public func purchaseRequests(uid: UInt32?, app: String?) throws(LedgerError) -> [PurchaseRequest] {
        try purchaseRequests("""
            SELECT \(Self.requestColumns) FROM purchase_requests
            WHERE \(Self.accountScope) ORDER BY transaction_id
            """, [uid.map { accounts.account(of: $0) }, app])
    }

    public func duePurchaseRequests(at time: Int64, limit: Int) throws(LedgerError) -> [PurchaseRequest] {
        try purchaseRequests("""
            SELECT \(Self.requestColumns) FROM purchase_requests WHERE expires IS NOT NULL AND expires <= $1
            ORDER BY expires, transaction_id LIMIT $2 FOR UPDATE SKIP LOCKED
            """, [String(time), String(limit)])
    }

    public func nextDueTime() throws(LedgerError) -> Int64? {
        try connection.execute("""
            SELECT least((SELECT min(due) FROM subscriptions WHERE due IS NOT NULL),
                         (SELECT min(expires) FROM purchase_requests WHERE expires IS NOT NULL))
            """).firstInt
    }
}
