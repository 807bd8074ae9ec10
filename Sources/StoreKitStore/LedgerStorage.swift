// The storage seam: what the engine (and the serving loop, for units of work) asks of a ledger,
// whichever database holds it. `TransactionStore` (one SQLite file, the default) and
// `PostgresLedger` (StoreKitPostgres, a PostgreSQL database a fleet may share) conform; the
// engine never knows which one it runs on.
//
// The rules both keep:
// - every mutating call runs inside a unit of work (`begin()` … `commit()`/`rollback()`), and
//   nothing of it may be told to a client before `commit()` returned and the unit is durable;
// - request savepoints (`savepoint()` …) undo one request inside a unit of work;
// - transitions are guarded (`WHERE state = ?`) and report whether they happened;
// - a payment key names at most one transaction per (uid, app);
// - `generation` grows whenever changes are undone, so that cached reads can be dropped.

import StoreKitWire

public protocol LedgerStorage: AnyObject {
    /// Where the ledger lives, for messages (a file path, or a PostgreSQL database without its password).
    var path: String { get }
    /// Grows at every rollback (see `TransactionStore.generation`).
    var generation: UInt64 { get }
    var isInTransaction: Bool { get }

    // MARK: Units of work and savepoints
    func begin() throws(StoreError)
    func commit() throws(StoreError)
    func rollback()
    func savepoint() throws(StoreError)
    func releaseSavepoint() throws(StoreError)
    func rollbackToSavepoint()

    // MARK: Transactions
    func allocateTransactionID() throws(StoreError) -> UInt64
    func nextSequence(uid: UInt32, app: String) throws(StoreError) -> UInt64
    /// The last sequence number given out in the queue (0 before the first): every change of
    /// one of its transactions takes a new one, so what was made from the queue stays good
    /// while this stays the same.
    func lastSequence(uid: UInt32, app: String) throws(StoreError) -> UInt64
    func insert(_ record: TransactionRecord, paymentKey: String?) throws(StoreError)
    func transition(id: UInt64, from: TransactionState, to: TransactionState, sequence: UInt64, date: Int64,
                    errorCode: Int32?, errorMessage: String?, expiresDate: Int64?, originalID: UInt64?) throws(StoreError) -> Bool
    func markFinished(id: UInt64, sequence: UInt64, of queue: TransactionStore.QueueKey?) throws(StoreError) -> Bool
    func setRevocation(id: UInt64, date: Int64, reason: Int32, sequence: UInt64) throws(StoreError) -> Bool
    func touch(id: UInt64, sequence: UInt64) throws(StoreError) -> Bool
    func deleteHistory(uid: UInt32?, app: String?) throws(StoreError) -> (deleted: Int, unfinished: [TransactionRecord])
    /// Deletes one transaction (`SKTestSession.deleteTransaction(identifier:)`), with its open
    /// request and renewal mark; returns it as it was, nil when there is none. Its subscription,
    /// if any, stays as it is.
    func deleteTransaction(id: UInt64) throws(StoreError) -> TransactionRecord?

    func transaction(id: UInt64) throws(StoreError) -> TransactionRecord?
    func transaction(uid: UInt32, app: String, paymentKey: String) throws(StoreError) -> TransactionRecord?
    func unfinished(uid: UInt32, app: String) throws(StoreError) -> [TransactionRecord]
    func all(uid: UInt32, app: String) throws(StoreError) -> [TransactionRecord]
    /// The `restored` transactions that restore `originalID`, of every queue (in a fleet, of
    /// every host): what a refund of the original takes back with it.
    func restoredCopies(of originalID: UInt64) throws(StoreError) -> [TransactionRecord]
    /// Transactions filtered by uid, app and finished-ness, with ids above `afterID`, oldest
    /// first, at most `limit`: a page of a history costs its page, not the history before it.
    func list(uid: UInt32?, app: String?, unfinishedOnly: Bool, afterID: UInt64, limit: Int) throws(StoreError) -> [TransactionRecord]
    func unfinishedCount(of queue: TransactionStore.QueueKey) throws(StoreError) -> Int
    func unfinishedCount() throws(StoreError) -> Int

    // MARK: Settings
    func setting(_ key: String) throws(StoreError) -> String?
    func setSetting(_ key: String, _ value: String?) throws(StoreError)
    func settings(prefix: String) throws(StoreError) -> [(key: String, value: String)]

    // MARK: The simulated store's schedule
    func save(_ subscription: TransactionStore.Subscription) throws(StoreError)
    func markRenewal(transactionID id: UInt64) throws(StoreError)
    func isRenewal(transactionID id: UInt64) throws(StoreError) -> Bool
    func subscription(originalID: UInt64) throws(StoreError) -> TransactionStore.Subscription?
    func subscription(uid: UInt32, app: String, groupID: String) throws(StoreError) -> TransactionStore.Subscription?
    func subscriptions(uid: UInt32?, app: String?) throws(StoreError) -> [TransactionStore.Subscription]
    func dueSubscriptions(at time: Int64, limit: Int) throws(StoreError) -> [TransactionStore.Subscription]
    func insert(_ request: TransactionStore.PurchaseRequest) throws(StoreError)
    func removePurchaseRequest(transactionID: UInt64) throws(StoreError) -> Bool
    func purchaseRequest(transactionID: UInt64) throws(StoreError) -> TransactionStore.PurchaseRequest?
    func openPurchaseRequest(uid: UInt32, app: String, productID: String,
                             kind: TransactionStore.PurchaseRequest.Kind) throws(StoreError) -> TransactionStore.PurchaseRequest?
    func purchaseRequests(uid: UInt32?, app: String?) throws(StoreError) -> [TransactionStore.PurchaseRequest]
    func duePurchaseRequests(at time: Int64, limit: Int) throws(StoreError) -> [TransactionStore.PurchaseRequest]
    func nextDueTime() throws(StoreError) -> Int64?

    // MARK: Other writers (a fleet sharing one database)
    /// Grows when someone else changed the ledger (settings, the schedule): the engine reloads.
    var externalGeneration: UInt64 { get }
    /// Whether `changesElsewhere` may find something.
    var hasChangesElsewhere: Bool { get }
    /// What others changed since the ledger last looked (see `PostgresLedger.changesElsewhere`).
    /// Inside a unit of work.
    func changesElsewhere(of queues: Set<TransactionStore.QueueKey>) throws(StoreError) -> ChangesElsewhere
}

/// What the other daemons of a fleet changed, as this host sees it.
public struct ChangesElsewhere: Sendable, Equatable {
    /// Transactions of the queues asked for, in commit order.
    public var transactions: [TransactionRecord]
    /// Queues not asked for (no observer here) that others changed and that hold unfinished
    /// transactions here: their apps' observers may be started to process them.
    public var waiting: [TransactionStore.QueueKey]

    public init(transactions: [TransactionRecord] = [], waiting: [TransactionStore.QueueKey] = []) {
        self.transactions = transactions
        self.waiting = waiting
    }
}

/// The defaults of the requirements above (protocol requirements cannot declare them).
extension LedgerStorage {
    public func insert(_ record: TransactionRecord) throws(StoreError) {
        try insert(record, paymentKey: nil)
    }

    public func markFinished(id: UInt64, sequence: UInt64) throws(StoreError) -> Bool {
        try markFinished(id: id, sequence: sequence, of: nil)
    }

    public func list(uid: UInt32?, app: String?, unfinishedOnly: Bool) throws(StoreError) -> [TransactionRecord] {
        try list(uid: uid, app: app, unfinishedOnly: unfinishedOnly, afterID: 0, limit: 10_000)
    }

    public func list(uid: UInt32?, app: String?, unfinishedOnly: Bool, limit: Int) throws(StoreError) -> [TransactionRecord] {
        try list(uid: uid, app: app, unfinishedOnly: unfinishedOnly, afterID: 0, limit: limit)
    }
}

/// The SQLite file has one writer: this daemon.
extension TransactionStore: LedgerStorage {
    public var externalGeneration: UInt64 { 0 }
    public var hasChangesElsewhere: Bool { false }
    public func changesElsewhere(of queues: Set<QueueKey>) throws(StoreError) -> ChangesElsewhere { ChangesElsewhere() }
}
