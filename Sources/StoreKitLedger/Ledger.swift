// The storage seam: what the engine and the serving loop ask of a ledger, whichever database
// holds it. `SQLiteLedger` (StoreKitSQLite: one SQLite file, the default) and `PostgresLedger`
// (StoreKitPostgres: a PostgreSQL database a fleet may share) conform, side by side; neither
// imports the other, and nothing above this module knows which one it runs on.
//
// The rules both keep:
// - every mutating call runs inside a unit of work (`begin()` … `commit()`/`rollback()`), and
//   nothing of it may be told to a client before the unit is durable (`durablePosition`);
// - request savepoints (`savepoint()` …) undo one request inside a unit of work;
// - transitions are guarded (`WHERE state = ?`) and report whether they happened;
// - a payment key names at most one transaction per (uid, app);
// - `generation` grows whenever changes are undone, so that cached reads can be dropped.

import StoreKitWire

public protocol Ledger: AnyObject {
    // MARK: What it is
    /// Where the ledger lives, for messages (a file path, or a PostgreSQL database without its password).
    var path: String { get }
    /// Grows at every rollback (see `SQLiteLedger.generation`).
    var generation: UInt64 { get }
    var isInTransaction: Bool { get }

    // MARK: Units of work and savepoints
    func begin() throws(LedgerError)
    func commit() throws(LedgerError)
    /// `commit()`; `deferringSync`: the caller has other work, so the unit may be made durable
    /// by a thread of the ledger's own instead of before this returns (`durablePosition` says
    /// when it is).
    func commit(deferringSync: Bool) throws(LedgerError)
    func rollback()
    func savepoint() throws(LedgerError)
    func releaseSavepoint() throws(LedgerError)
    func rollbackToSavepoint()
    /// Whether `begin(readingAhead:)` reads anything: a database server's ledger, where each read is a
    /// round trip, does; a file's, read in memory, does not (and is not asked).
    var readsAhead: Bool { get }
    /// `begin()`, for a unit whose requests will ask what `plan` says: the ledger reads it all
    /// at once, with the `BEGIN`, and answers those requests' reads from what it read, holding
    /// the rows they will write until the unit ends.
    func begin(readingAhead plan: ReadAhead) throws(LedgerError)
    /// Sends the writes the ledger deferred and reports the first that failed, while the unit of
    /// work can still be undone and run again request by request (before `commit()`).
    func flushWrites() throws(LedgerError)

    // MARK: Transactions
    func allocateTransactionID() throws(LedgerError) -> UInt64
    func nextSequence(uid: UInt32, app: String) throws(LedgerError) -> UInt64
    /// The last sequence number given out in the queue (0 before the first): every change of
    /// one of its transactions takes a new one, so what was made from the queue stays good
    /// while this stays the same.
    func lastSequence(uid: UInt32, app: String) throws(LedgerError) -> UInt64
    func insert(_ record: TransactionRecord, paymentKey: String?) throws(LedgerError)
    func transition(id: UInt64, from: TransactionState, to: TransactionState, sequence: UInt64, date: Int64,
                    errorCode: Int32?, errorMessage: String?, expiresDate: Int64?, originalID: UInt64?) throws(LedgerError) -> Bool
    func markFinished(id: UInt64, sequence: UInt64, of queue: QueueKey?) throws(LedgerError) -> Bool
    func setRevocation(id: UInt64, date: Int64, reason: Int32, sequence: UInt64) throws(LedgerError) -> Bool
    func touch(id: UInt64, sequence: UInt64) throws(LedgerError) -> Bool
    func deleteHistory(uid: UInt32?, app: String?) throws(LedgerError) -> (deleted: Int, unfinished: [TransactionRecord])
    /// Deletes one transaction (`SKTestSession.deleteTransaction(identifier:)`), with its open
    /// request and renewal mark; returns it as it was, nil when there is none. Its subscription,
    /// if any, stays as it is.
    func deleteTransaction(id: UInt64) throws(LedgerError) -> TransactionRecord?

    func transaction(id: UInt64) throws(LedgerError) -> TransactionRecord?
    func transaction(uid: UInt32, app: String, paymentKey: String) throws(LedgerError) -> TransactionRecord?
    func unfinished(uid: UInt32, app: String) throws(LedgerError) -> [TransactionRecord]
    func all(uid: UInt32, app: String) throws(LedgerError) -> [TransactionRecord]
    /// The transactions of `all(uid:app:)` changed since the queue's sequence number was
    /// `afterSequence` (each change of a transaction gives it the queue's next one), oldest first:
    /// what a list kept from the queue needs to follow it.
    func changed(uid: UInt32, app: String, afterSequence: UInt64) throws(LedgerError) -> [TransactionRecord]
    /// The `restored` transactions that restore `originalID`, of every queue (in a fleet, of
    /// every host): what a refund of the original takes back with it.
    func restoredCopies(of originalID: UInt64) throws(LedgerError) -> [TransactionRecord]
    /// Transactions filtered by uid, app and finished-ness, with ids above `afterID`, oldest
    /// first, at most `limit`: a page of a history costs its page, not the history before it.
    func list(uid: UInt32?, app: String?, unfinishedOnly: Bool, afterID: UInt64, limit: Int) throws(LedgerError) -> [TransactionRecord]
    func unfinishedCount(of queue: QueueKey) throws(LedgerError) -> Int
    func unfinishedCount() throws(LedgerError) -> Int

    // MARK: Settings
    func setting(_ key: String) throws(LedgerError) -> String?
    func setSetting(_ key: String, _ value: String?) throws(LedgerError)
    func settings(prefix: String) throws(LedgerError) -> [(key: String, value: String)]
    /// The settings under `keys` that exist, read at once (PostgreSQL: one round trip).
    func settings(keys: [String]) throws(LedgerError) -> [String: String]

    // MARK: The simulated store's schedule
    func upsert(_ subscription: Subscription) throws(LedgerError)
    func markRenewal(transactionID id: UInt64) throws(LedgerError)
    func isRenewal(transactionID id: UInt64) throws(LedgerError) -> Bool
    func subscription(originalID: UInt64) throws(LedgerError) -> Subscription?
    func subscription(uid: UInt32, app: String, groupID: String) throws(LedgerError) -> Subscription?
    func subscriptions(uid: UInt32?, app: String?) throws(LedgerError) -> [Subscription]
    func dueSubscriptions(at time: Int64, limit: Int) throws(LedgerError) -> [Subscription]
    func insert(_ request: PurchaseRequest) throws(LedgerError)
    func removePurchaseRequest(transactionID: UInt64) throws(LedgerError) -> Bool
    func purchaseRequest(transactionID: UInt64) throws(LedgerError) -> PurchaseRequest?
    func openPurchaseRequest(uid: UInt32, app: String, productID: String,
                             kind: PurchaseRequest.Kind) throws(LedgerError) -> PurchaseRequest?
    func purchaseRequests(uid: UInt32?, app: String?) throws(LedgerError) -> [PurchaseRequest]
    func duePurchaseRequests(at time: Int64, limit: Int) throws(LedgerError) -> [PurchaseRequest]
    func nextDueTime() throws(LedgerError) -> Int64?

    // MARK: Durability
    /// The position of the last committed unit of work: units are numbered as they commit.
    var committedPosition: UInt64 { get }
    /// Every unit of work up to this position is durable (PostgreSQL: committed; SQLite: its
    /// commit-log record synced).
    var durablePosition: UInt64 { get }
    /// Why units of work can no longer be made durable (the commit log's sync failed); nil while
    /// they can. The daemon stops: nothing written since the last good sync may be acknowledged.
    var durabilityFailure: String? { get }
    /// Where units are made durable, for messages (the commit log; the database).
    var durableLogPath: String { get }
    /// Blocks until every committed unit of work is durable (at shutdown).
    func waitUntilDurable()
    /// Whether the ledger is a database server's: its I/O failures are the server being
    /// unreachable (an outage that ends), not a disk's.
    var isDatabaseServer: Bool { get }

    // MARK: Saving (a ledger whose database holds committed units some time after they are durable)
    /// Committed units of work are not in the database yet (they are durable in the commit log).
    var hasUnsavedChanges: Bool { get }
    /// The unsaved changes are old enough to be saved even while the caller is busy.
    func saveIsDue(now: Int64) -> Bool
    /// Saves now; done when it returns.
    func save() throws(LedgerError)
    /// Starts a save whose slow part runs on the ledger's own thread; how it ended comes back
    /// through `takeSaveOutcome()` after the wake-up given to `startBackgroundWork`.
    func startSave() throws(LedgerError)
    /// Takes the database connection back from a finished save, if any.
    func takeBackConnection()
    /// How the last save started with `startSave()` ended, once (nil: none ended since).
    func takeSaveOutcome() -> Result<Void, LedgerError>?
    /// Writes new rows kept in memory longer than `age` ms into the database's open transaction.
    func writeRows(heldLongerThan age: Int64, now: Int64) throws(LedgerError)
    /// What saving off the caller's thread let it do, for the journal at stop (nil: nothing to say).
    var saveSummary: String? { get }

    // MARK: Running beside the caller
    /// Starts the ledger's own threads (syncs, saves, checkpoints); each calls `wakeup` when it
    /// has something for the caller.
    func startBackgroundWork(wakeup: @escaping @Sendable () -> Void)
    /// Stops them, in the reverse order.
    func stopBackgroundWork()
    /// Closes the database (nothing may be called after).
    func close()
    /// A full check of the database's pages, to run on a thread of its own: a description of
    /// what is wrong, nil when nothing is. Nil when the database checks itself (PostgreSQL).
    var integrityCheck: (@Sendable () throws -> String?)? { get }

    // MARK: What it says about itself
    /// What opening found, for the recovery log line; what it found wrong and could not mend
    /// (error-level); what it found that is expected after a restore (one notice).
    var openReport: String { get }
    var openProblems: [String] { get }
    var openNotice: String? { get }
    /// Why the file system holding it counts as nearly full; nil when it does not (or no file).
    var lowSpaceReason: String? { get }
    /// `handler(low, message)` is called when the file system becomes nearly full and again when
    /// it no longer is.
    func onLowSpaceChange(_ handler: @escaping (_ low: Bool, _ message: String) -> Void)
    /// In a fleet: this host's name and how uids become accounts; nil for a ledger of one host.
    var fleetIdentity: (host: String, accountFrom: String)? { get }
    /// Which products' transactions the other hosts of an account see (a fleet's ledger asks).
    func shareAcrossHosts(_ shares: @escaping (_ app: String, _ productID: String) -> Bool)

    // MARK: Copies
    /// A consistent copy of the committed ledger in a new file at the absolute path `path`,
    /// checked. A ledger that cannot (a database server's: its own tools back it up) throws
    /// `.unsupported`.
    func backup(to path: String) throws(LedgerError) -> BackupReport
    /// Reads every table of `LedgerRows.tables` from one snapshot of what is committed to the
    /// database, `pageSize` rows at a time (`storekitctl migrate`): `.unsupported` where the
    /// ledger is not copied this way.
    func export(pageSize: Int, _ body: (LedgerRows.Table, [[LedgerRows.Value]]) throws(LedgerError) -> Void) throws(LedgerError)

    // MARK: Other writers (a fleet sharing one database)
    /// Grows when someone else changed the ledger (settings, the schedule): the engine reloads.
    var externalGeneration: UInt64 { get }
    /// Whether `changesElsewhere` may find something.
    var hasChangesElsewhere: Bool { get }
    /// What others changed since the ledger last looked (see `PostgresLedger.changesElsewhere`).
    /// Inside a unit of work.
    func changesElsewhere(of queues: Set<QueueKey>) throws(LedgerError) -> ChangesElsewhere
}

/// What the other daemons of a fleet changed, as this host sees it.
public struct ChangesElsewhere: Sendable, Equatable {
    /// Transactions of the queues asked for, in commit order.
    public var transactions: [TransactionRecord]
    /// Queues not asked for (no observer here) that others changed and that hold unfinished
    /// transactions here: their apps' observers may be started to process them.
    public var waiting: [QueueKey]

    public init(transactions: [TransactionRecord] = [], waiting: [QueueKey] = []) {
        self.transactions = transactions
        self.waiting = waiting
    }
}

/// The defaults of the requirements above (protocol requirements cannot declare them): a ledger
/// whose commit is durable when it returns, with nothing to save, no thread of its own and no file.
extension Ledger {
    public func settings(keys: [String]) throws(LedgerError) -> [String: String] {
        var found: [String: String] = [:]
        for key in keys { if let value = try setting(key) { found[key] = value } }
        return found
    }
    public func commit(deferringSync: Bool) throws(LedgerError) { try commit() }
    public var readsAhead: Bool { false }
    public func begin(readingAhead plan: ReadAhead) throws(LedgerError) { try begin() }
    public func flushWrites() throws(LedgerError) {}
    public var durabilityFailure: String? { nil }
    public var durableLogPath: String { path }
    public func waitUntilDurable() {}
    public var hasUnsavedChanges: Bool { false }
    public func saveIsDue(now: Int64) -> Bool { false }
    public func save() throws(LedgerError) {}
    public func startSave() throws(LedgerError) {}
    public func takeBackConnection() {}
    public func takeSaveOutcome() -> Result<Void, LedgerError>? { nil }
    public func writeRows(heldLongerThan age: Int64, now: Int64) throws(LedgerError) {}
    public var saveSummary: String? { nil }
    public func startBackgroundWork(wakeup: @escaping @Sendable () -> Void) {}
    public func stopBackgroundWork() {}
    public var integrityCheck: (@Sendable () throws -> String?)? { nil }
    public var openProblems: [String] { [] }
    public var openNotice: String? { nil }
    public var lowSpaceReason: String? { nil }
    public func onLowSpaceChange(_ handler: @escaping (_ low: Bool, _ message: String) -> Void) {}
    public var fleetIdentity: (host: String, accountFrom: String)? { nil }
    public func shareAcrossHosts(_ shares: @escaping (_ app: String, _ productID: String) -> Bool) {}

    public func export(pageSize: Int,
                       _ body: (LedgerRows.Table, [[LedgerRows.Value]]) throws(LedgerError) -> Void) throws(LedgerError) {
        throw LedgerError(.unsupported, path: path, message: "\(path) is not copied row by row")
    }

    public func export(_ body: (LedgerRows.Table, [[LedgerRows.Value]]) throws(LedgerError) -> Void) throws(LedgerError) {
        try export(pageSize: 500, body)
    }

    public func insert(_ record: TransactionRecord) throws(LedgerError) {
        try insert(record, paymentKey: nil)
    }

    public func markFinished(id: UInt64, sequence: UInt64) throws(LedgerError) -> Bool {
        try markFinished(id: id, sequence: sequence, of: nil)
    }

    public func list(uid: UInt32?, app: String?, unfinishedOnly: Bool) throws(LedgerError) -> [TransactionRecord] {
        try list(uid: uid, app: app, unfinishedOnly: unfinishedOnly, afterID: 0, limit: 10_000)
    }

    public func list(uid: UInt32?, app: String?, unfinishedOnly: Bool, limit: Int) throws(LedgerError) -> [TransactionRecord] {
        try list(uid: uid, app: app, unfinishedOnly: unfinishedOnly, afterID: 0, limit: limit)
    }
}

