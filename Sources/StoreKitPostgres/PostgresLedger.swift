import StoreKitLedger
import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

/// The ledger in a PostgreSQL database (`[Store] Database=` a libpq connection string): the same
/// tables and semantics as the SQLite file's (SQLiteLedger+Schema.swift), over libpq, shared
/// by every daemon of a fleet (docs/fleet.md).
///
/// A unit of work is one PostgreSQL transaction (`BEGIN` … `COMMIT`), a request savepoint a
/// `SAVEPOINT`; `commit()` returns once PostgreSQL committed, which with `synchronous_commit` on
/// (the default, and what `commit()` asks for) means the commit record is flushed to its WAL:
/// the unit of work is durable when `commit()` returns. Nothing is held in memory between
/// units of work, so another connection sees every acknowledged change.
///
/// **The fleet.** The engine speaks of uids; this ledger stores accounts (`FleetMember`): a uid
/// becomes its account on the way in and an account its local uid on the way out. A transaction
/// is in the queue of the host that made it; a renewal (host '') in the queue of every host where
/// the account uses the app, finished per host (`deliveries`). Reads of an account's history see
/// the other hosts' purchases of products they share (`sharesAcrossHosts`: not consumables), as
/// finished (they are not in this queue). Every unit of work that changed something ends with a
/// `NOTIFY` naming the queues it changed; `FleetListener` hears it on the other daemons, which
/// then read the rows changed since the last sequence they saw (`changesElsewhere`).
///
/// A lost connection (PostgreSQL stopped or restarted) fails the statement and the unit of work
/// that ran it; the next `begin()` reconnects, backing off from `reconnectInterval` ms to
/// `longestReconnectInterval` ms while it keeps failing.
/// A `COMMIT` whose answer was lost may or may not have committed: the client is told it failed,
/// and a retry with the same payment key finds the committed row instead of making a second one.
public final class PostgresLedger: Ledger {
    public static let schemaVersion = 2
    /// Transaction ids taken from `transaction_ids` at a time.
    static let idBlock = 64
    /// The channel of the fleet's wake-ups: one per schema (fleets may share a database, each in
    /// its schema), `storekit_fleet_` and 12 hex digits of the schema name's MD5 (a plain identifier).
    public private(set) var channel = "storekit_fleet"
    static let channelQuery = "SELECT 'storekit_fleet_' || left(md5(current_schema()), 12)"

    let connection: PostgresConnection
    public let member: FleetMember
    let accounts: AccountDirectory
    public var path: String { connection.description }
    public private(set) var generation: UInt64 = 0
    /// Grows when another daemon of the fleet changed more than transactions (settings, the
    /// schedule), or may have while nobody listened: the engine reloads the clock, the switches
    /// and the schedule.
    public internal(set) var externalGeneration: UInt64 = 0 {
        didSet { ownUnfinished.removeAll() }   // another host deleted or changed more than transactions
    }
    public private(set) var isInTransaction = false
    /// Units of work committed: with `synchronous_commit` on, each is durable when its `COMMIT`
    /// returns, so this is both the committed and the durable position.
    public private(set) var committedUnits: UInt64 = 0
    /// Whether a product's transactions are seen on the account's other hosts (set by the daemon
    /// from the catalogues: everything but consumables).
    public var sharesAcrossHosts: (_ app: String, _ productID: String) -> Bool = { _, _ in true }
    /// The unused rest of the block of ids taken from `transaction_ids`.
    var ids: Range<UInt64> = 0..<0
    /// Open request savepoints.
    var savepoints = 0
    /// When the next reconnection may be tried (monotonic ms), and the wait after a failed one.
    var nextReconnect: Int64 = .min / 2
    var reconnectWait: Int64 = reconnectInterval
    static let reconnectInterval: Int64 = 250
    static let longestReconnectInterval: Int64 = 8_000
    /// What opening found, for the recovery log line.
    public private(set) var openReport = ""

    /// Queues (account, app) this unit of work changed, and whether it changed more than
    /// transactions (settings, the schedule): told to the fleet at commit.
    var changedQueues = Set<String>()
    var changedOther = false
    /// The last sequence seen of each watched queue, by `queueName`; as they were at `begin()`.
    var watermarks: [String: UInt64] = [:]
    var atBegin: (watermarks: [String: UInt64], notified: Set<String>, catchUpAll: Bool) = ([:], [], false)
    /// Queues another daemon named since they were last read; all of them when `catchUpAll`.
    var notifiedQueues = Set<String>()
    var catchUpAll = true
    /// Queues registered in `fleet_queues` (this host uses this app for this account).
    var registeredQueues = Set<String>()
    /// What the unit of work read ahead (PostgresLedger+ReadAhead.swift).
    var unitReads = UnitReads()
    /// How long a unit of work waits for a row another transaction holds, in milliseconds.
    var lockTimeout = 5_000
    /// What was read ahead, as it was at each open request savepoint.
    var unitReadsAtSavepoints: [UnitReads] = []
    /// This host's own unfinished transactions per queue (by queue name), as committed: only this
    /// host makes or finishes its own rows, so the count read once follows this host's units
    /// (`UnitReads.ownChanges`) instead of being counted again for each payment; counting walks
    /// the finished rows' dead index entries until a vacuum. Forgotten when another host deleted
    /// or changed more than transactions.
    var ownUnfinished: [String: Int] = [:]

    /// A ledger empty at open is analyzed once it holds this many more transactions: until then
    /// PostgreSQL has no statistics, and reads a payment key through the whole queue's index
    /// instead of the key's (a millisecond a payment after a few thousand), until autovacuum
    /// gets to it (up to a minute, and only as the table grows by a tenth).
    static let insertsBeforeFirstAnalyze = 1_000
    var insertsBeforeAnalyzing: Int?

    /// Fresh statistics for the planner. Only the tables' owner may; anyone else leaves it to autovacuum.
    func analyze() {
        _ = try? connection.execute("ANALYZE transactions, deliveries, sequences, subscriptions, purchase_requests")
    }

    /// Connects, creates or migrates the schema (refusing a newer one).
    public convenience init(conninfo: String, member: FleetMember? = nil) throws(LedgerError) {
        try self.init(conninfo: conninfo, member: member, schemaVersion: Self.schemaVersion)
    }

    /// Opening at an older `schemaVersion` is for the migration tests.
    init(conninfo: String, member: FleetMember?, schemaVersion: Int) throws(LedgerError) {
        _ = try LibPQ.loaded()
        if let problem = PostgresConnection.problem(with: conninfo) {
            throw LedgerError(.io, path: PostgresConnection.describe(conninfo), message: "bad connection string: \(problem)")
        }
        self.member = member ?? FleetMember(host: FleetMember.defaultHost)
        accounts = AccountDirectory(source: self.member.accountFrom)
        connection = try PostgresConnection(conninfo: conninfo)
        openReport = try migrate(to: schemaVersion)
        channel = try Self.channel(on: connection)
        // Fresh statistics for the planner (a just-moved ledger has none until autovacuum gets to
        // it, and a payment-key lookup would scan the queue meanwhile). Only the tables' owner
        // may; anyone else leaves it to autovacuum. Not of an empty ledger: statistics saying
        // "empty" make PostgreSQL scan whole tables for key lookups while they grow (until
        // autovacuum analyzes them again), where a table never analyzed is estimated from its size.
        if (try? connection.execute("SELECT EXISTS (SELECT 1 FROM transactions)").rows.first?.first) == "t" {
            analyze()
        } else {
            insertsBeforeAnalyzing = Self.insertsBeforeFirstAnalyze
        }
    }

    /// The fleet's channel for the schema `connection` uses.
    static func channel(on connection: PostgresConnection) throws(LedgerError) -> String {
        try connection.execute(channelQuery).rows.first?.first.flatMap { $0 } ?? "storekit_fleet"
    }

    public func close() { connection.close() }

    // MARK: The ledger of a database server

    public var committedPosition: UInt64 { committedUnits }
    public var durablePosition: UInt64 { committedUnits }
    public var isDatabaseServer: Bool { true }
    public var fleetIdentity: (host: String, accountFrom: String)? { (member.host, member.accountFrom.rawValue) }

    public func shareAcrossHosts(_ shares: @escaping (_ app: String, _ productID: String) -> Bool) {
        sharesAcrossHosts = shares
    }

    /// PostgreSQL's own tools back it up (pg_dump, base backups), not the daemon.
    public func backup(to path: String) throws(LedgerError) -> BackupReport {
        throw LedgerError(.unsupported, path: self.path, message: "backup copies the SQLite ledger; \(self.path) is backed up by "
                          + "PostgreSQL's own tools (pg_dump, base backups)")
    }

    /// The account `uid` stands for in the fleet.
    public func account(of uid: UInt32) -> String { accounts.account(of: uid) }

    /// "account\tapp": a queue's name in watermarks and notifications.
    static func queueName(_ account: String, _ app: String) -> String { account + "\t" + app }

    // MARK: Units of work

    public func begin() throws(LedgerError) {
        try begin(deferred: false)
    }

    /// `deferred`: the `BEGIN` goes with the unit's first statements (a read ahead), in their
    /// round trip, which finds a connection that died while idle as the `BEGIN` would.
    func begin(deferred: Bool) throws(LedgerError) {
        precondition(!isInTransaction, "nested store transaction")
        try reconnectIfBroken()
        // synchronous_commit on: COMMIT returns after the commit record is flushed (and, with
        // synchronous standbys configured, after they have it). Set per transaction, so that a
        // server or role default of `off` cannot make an acknowledged purchase losable.
        // BEGIN waits for its answer, so that a connection that died while idle is found here,
        // where the unit of work notes PostgreSQL unreachable; the setting goes with the unit's
        // first statement (PostgresConnection.executeLater): should it fail, that statement
        // fails, and the unit of work rolls back.
        if deferred {
            connection.executeLater("BEGIN")
        } else {
            try connection.execute("BEGIN")
        }
        // The unit's own settings (`SET LOCAL`): synchronous_commit on (above); a row lock held
        // elsewhere (another host's long unit, a person's open transaction in psql) fails the
        // unit after `lockTimeout` instead of stopping the serving loop, and every other client
        // with it, for as long as it is held (past WatchdogSec=, systemd would kill the daemon).
        connection.executeLater("SELECT set_config('synchronous_commit', 'on', true), set_config('lock_timeout', $1, true)",
                                ["\(lockTimeout)ms"])
        isInTransaction = true
        savepoints = 0
        unitReads = UnitReads()
        unitReadsAtSavepoints.removeAll()
        changedQueues.removeAll()
        changedOther = false
        atBegin = (watermarks, notifiedQueues, catchUpAll)
    }

    /// Opens the connection again if it broke, backing off while that fails; listens to the
    /// fleet again on the new one (`listen()`).
    func reconnectIfBroken() throws(LedgerError) {
        guard connection.isBroken else { return }
        let now = Monotonic.milliseconds()
        guard now >= nextReconnect else {
            throw LedgerError(.io, path: path, message: "PostgreSQL is unreachable (trying again in \(nextReconnect - now) ms)")
        }
        do {
            try connection.reconnect()
            if isListening { try connection.execute("LISTEN \(channel)") }
            reconnectWait = Self.reconnectInterval
        } catch {
            connection.close()
            nextReconnect = now + reconnectWait
            reconnectWait = min(reconnectWait * 2, Self.longestReconnectInterval)
            throw error
        }
        // What other daemons did meanwhile is read again (their notifications may be lost).
        catchUpAll = true
        externalGeneration &+= 1
    }

    /// Whether this connection `LISTEN`s on the fleet's channel (`FleetListener`).
    private(set) var isListening = false

    /// Listens on the fleet's channel on the ledger's own connection (and again after every
    /// reconnection). One connection for the units of work and the notifications: PostgreSQL
    /// hands a session its own notifications with its `COMMIT`'s answer, where a listening
    /// connection of its own was woken (another backend, another wake-up of the loop) by every
    /// unit this host committed: a third of the cycles of one client (docs/performance.md).
    func listen() throws(LedgerError) {
        precondition(!isInTransaction, "LISTEN inside a unit of work would end with it")
        try connection.execute("LISTEN \(channel)")
        isListening = true
    }

    public func commit() throws(LedgerError) {
        precondition(isInTransaction, "commit without begin")
        do throws(LedgerError) {
            queueSequenceWrites()
            if !changedQueues.isEmpty || changedOther {
                // Delivered with the commit, never without it: the other daemons read the rows.
                // Sent in one round trip with the COMMIT, which does not run if it fails.
                connection.executeLater("SELECT pg_notify($1, $2)", [channel, notification()])
            }
            // PostgreSQL answers COMMIT in a transaction aborted by an earlier error with the tag
            // ROLLBACK, not an error: that is a failed unit of work, never a committed one.
            let tag = try connection.execute("COMMIT").tag
            guard tag == "COMMIT" else {
                throw LedgerError(.other(0), path: path, message: "PostgreSQL rolled the transaction back at COMMIT (\(tag))")
            }
            isInTransaction = false
            unitReads.ownChanges.apply(to: &ownUnfinished)
            unitReads = UnitReads()
            committedUnits += 1
            if let left = insertsBeforeAnalyzing, left <= 0 {
                insertsBeforeAnalyzing = nil
                analyze()
            }
        } catch {
            rollback()
            throw error
        }
    }

    /// "host\nqueue\nqueue…", or "host\n*" when the queues would not fit (PostgreSQL's payloads
    /// are below 8,000 bytes) or more than transactions changed.
    func notification() -> String {
        let queues = changedQueues.sorted().joined(separator: "\n")
        guard !changedOther, member.host.utf8.count + queues.utf8.count < 7_000 else { return member.host + "\n*" }
        return member.host + "\n" + queues
    }

    public func rollback() {
        if isInTransaction { _ = try? connection.execute("ROLLBACK") }
        isInTransaction = false
        savepoints = 0
        unitReads = UnitReads()
        unitReadsAtSavepoints.removeAll()
        generation &+= 1
        // What this unit of work read of the others' changes is read again by the next one.
        watermarks = atBegin.watermarks
        notifiedQueues.formUnion(atBegin.notified)
        catchUpAll = catchUpAll || atBegin.catchUpAll
        registeredQueues.removeAll()
    }

    public func savepoint() throws(LedgerError) {
        precondition(isInTransaction, "savepoint outside a unit of work")
        // With the request's first statement, or the COMMIT (as is the release).
        connection.executeLater("SAVEPOINT request")
        savepoints += 1
        unitReadsAtSavepoints.append(unitReads)
    }

    public func releaseSavepoint() throws(LedgerError) {
        queueSequenceWrites()
        connection.executeLater("RELEASE SAVEPOINT request")
        // The request's deferred writes are answered now, so that one that fails is this
        // request's failure, undone in its savepoint (still there: the release did not run),
        // not the next request's.
        if unitReads.isActive { try connection.flush() }
        savepoints -= 1
        unitReadsAtSavepoints.removeLast()
    }

    public func rollbackToSavepoint() {
        _ = try? connection.execute("ROLLBACK TO SAVEPOINT request")
        _ = try? connection.execute("RELEASE SAVEPOINT request")
        savepoints = max(savepoints - 1, 0)
        // What was read, as the savepoint found it: what the request wrote is undone.
        if let reads = unitReadsAtSavepoints.popLast() { unitReads = reads }
        generation &+= 1
        registeredQueues.removeAll()
    }

    // MARK: Transactions

    /// From the fleet's `transaction_ids`, a block of `idBlock` at a time: unique across every
    /// daemon sharing the database (a block taken by a unit of work that rolled back is skipped).
    public func allocateTransactionID() throws(LedgerError) -> UInt64 {
        precondition(isInTransaction, "id allocated outside a unit of work")
        if ids.isEmpty {
            let start = UInt64(try connection.execute("SELECT nextval('transaction_ids')").firstInt ?? 0)
            ids = start..<(start + UInt64(Self.idBlock))
        }
        return ids.popFirst()!
    }

    /// The per-(account, app) counter, moved in the unit of work: its row stays locked until the
    /// commit, so the daemons of a fleet hand out increasing numbers in commit order, and
    /// "changed since sequence N" misses nothing committed (`changesElsewhere`).
    /// The account's (every host changes it: a change made elsewhere moves it too).
    public func lastSequence(uid: UInt32, app: String) throws(LedgerError) -> UInt64 {
        if let last = unitReads.sequences[Self.queueName(accounts.account(of: uid), app)] { return last }
        let last = try connection.execute("SELECT last FROM sequences WHERE account = $1 AND app = $2",
                                          [accounts.account(of: uid), app]).firstInt
        return UInt64(last ?? 0)
    }

    public func nextSequence(uid: UInt32, app: String) throws(LedgerError) -> UInt64 {
        precondition(isInTransaction, "sequence allocated outside a unit of work")
        let account = accounts.account(of: uid)
        changedQueues.insert(Self.queueName(account, app))
        if let next = nextSequenceReadAhead(account: account, app: app) { return next }
        let next = try connection.execute("""
            INSERT INTO sequences(account, app, last) VALUES($1, $2, 1)
            ON CONFLICT (account, app) DO UPDATE SET last = sequences.last + 1 RETURNING last
            """, [account, app]).firstInt
        return UInt64(next ?? 0)
    }

    /// Records that this host uses `app` for `account` (renewals are delivered here from now on).
    func register(account: String, app: String) throws(LedgerError) {
        let name = Self.queueName(account, app)
        guard isInTransaction, !registeredQueues.contains(name) else { return }
        // Its result is not read: it goes with the next statement.
        connection.executeLater("""
            INSERT INTO fleet_queues(host, account, app, since)
            VALUES($1, $2, $3, (extract(epoch FROM clock_timestamp()) * 1000)::bigint) ON CONFLICT DO NOTHING
            """, [member.host, account, app])
        registeredQueues.insert(name)
    }

    public func insert(_ record: TransactionRecord, paymentKey: String?) throws(LedgerError) {
        let account = accounts.account(of: record.uid)
        // A purchase linked to an original (a renewal, possibly fired by a host that does not use
        // the app, or an interrupted purchase completed, whose original registered) registers nothing.
        if record.originalID == nil || record.state != .purchased { try register(account: account, app: record.app) }
        let parameters: [String?] = [
            String(record.id), record.originalID.map { String($0) }, String(record.uid), record.app, record.productID,
            String(record.quantity), String(record.state.rawValue), String(record.sequence), String(record.date),
            record.finished ? "1" : "0", record.errorCode.map { String($0) }, record.errorMessage,
            record.revocationDate.map { String($0) }, record.revocationReason.map { String($0) },
            record.applicationUsername, record.expiresDate.map { String($0) }, paymentKey, account, member.host]
        // In a unit that read ahead, the row goes with the next round trip (its failure, a
        // payment key another host took meanwhile, with the unit's `flushWrites()`).
        if unitReads.isActive {
            connection.executeLater(Self.insertTransaction, parameters)
            noteInserted(record, account: account, paymentKey: paymentKey)
        } else {
            try connection.execute(Self.insertTransaction, parameters)
        }
        if let left = insertsBeforeAnalyzing { insertsBeforeAnalyzing = left - 1 }
        // Every row is inserted as this host's own (a renewal leaves with `markRenewal`).
        if !record.finished { unitReads.ownChanges.add(1, to: Self.queueName(account, record.app)) }
    }

    static let insertTransaction = """
        INSERT INTO transactions(id, original_id, uid, app, product, quantity, state, sequence, date, finished,
            error_code, error_message, revocation_date, revocation_reason, app_username, expires_date, payment_key,
            account, host, changed_by)
        VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $19)
        """

    public func transition(id: UInt64, from: TransactionState, to: TransactionState, sequence: UInt64, date: Int64,
                           errorCode: Int32?, errorMessage: String?, expiresDate: Int64?, originalID: UInt64?) throws(LedgerError) -> Bool {
        precondition(from.canMove(to: to), "illegal transition \(from) → \(to)")
        guard let stored = Self.storedID(id) else { return false }
        unitReads.forget(id: id)
        return try connection.execute("""
            UPDATE transactions SET state = $1, sequence = $2, date = $3, error_code = $4, error_message = $5,
                expires_date = coalesce($8::bigint, expires_date), original_id = coalesce($9::bigint, original_id),
                changed_by = $10
            WHERE id = $6 AND state = $7 AND finished = 0
            """, [String(to.rawValue), String(sequence), String(date), errorCode.map { String($0) }, errorMessage,
                  stored, String(from.rawValue), expiresDate.map { String($0) }, originalID.map { String($0) },
                  member.host]).changed == 1
    }

    /// Finishes the transaction in this host's queue: the row itself when this host made it, its
    /// delivery here when it is a renewal (the other hosts finish theirs).
    public func markFinished(id: UInt64, sequence: UInt64, of queue: QueueKey?) throws(LedgerError) -> Bool {
        if let finished = markFinishedReadAhead(id: id, sequence: sequence) { return finished }
        guard let stored = Self.storedID(id) else { return false }
        unitReads.forget(id: id)
        if let queue {
            let name = Self.queueName(accounts.account(of: queue.uid), queue.app)
            unitReads.unfinishedCounts[name] = nil
            unitReads.ownChanges.forget(name)   // its own row or its delivery: counted again
        } else {
            unitReads.unfinishedCounts.removeAll()
            unitReads.ownChanges.forgetAll()
        }
        let delivered = try connection.execute("""
            UPDATE deliveries SET finished = 1 WHERE transaction_id = $1 AND host = $2 AND finished = 0
                AND EXISTS (SELECT 1 FROM transactions WHERE id = $1 AND state IN (1, 2, 3))
            """, [stored, member.host]).changed == 1
        if delivered { return true }
        // With the queue, the partial index of unfinished rows is read at (host, account, app, id)
        // exactly; by host alone a generic plan walks every finished row's dead entry in it.
        guard let queue else {
            return try connection.execute("""
                UPDATE transactions SET finished = 1, sequence = $1, changed_by = $3
                WHERE id = $2 AND host = $3 AND finished = 0 AND state IN (1, 2, 3)
                """, [String(sequence), stored, member.host]).changed == 1
        }
        return try connection.execute("""
            UPDATE transactions SET finished = 1, sequence = $1, changed_by = $3
            WHERE id = $2 AND host = $3 AND account = $4 AND app = $5 AND finished = 0 AND state IN (1, 2, 3)
            """, [String(sequence), stored, member.host, accounts.account(of: queue.uid), queue.app]).changed == 1
    }

    public func setRevocation(id: UInt64, date: Int64, reason: Int32, sequence: UInt64) throws(LedgerError) -> Bool {
        guard let stored = Self.storedID(id) else { return false }
        unitReads.forget(id: id)
        return try connection.execute("""
            UPDATE transactions SET revocation_date = $1, revocation_reason = $2, sequence = $3, changed_by = $5
            WHERE id = $4 AND revocation_date IS NULL
            """, [String(date), String(reason), String(sequence), stored, member.host]).changed == 1
    }

    public func touch(id: UInt64, sequence: UInt64) throws(LedgerError) -> Bool {
        guard let stored = Self.storedID(id) else { return false }
        unitReads.forget(id: id)
        return try connection.execute("UPDATE transactions SET sequence = $1, changed_by = $3 WHERE id = $2",
                                      [String(sequence), stored, member.host]).changed == 1
    }

    /// Deletes the history of an account (every host's: the store forgets it) or of everyone.
    public func deleteHistory(uid: UInt32?, app: String?) throws(LedgerError) -> (deleted: Int, unfinished: [TransactionRecord]) {
        precondition(isInTransaction, "history deleted outside a unit of work")
        changedOther = true
        queueSequenceWrites()
        unitReads.forgetRows()
        unitReads.ownChanges.forgetAll()
        unitReads.sequences.removeAll()   // moved below
        let scope = scope(uid: uid, app: app)
        let unfinished = try records("""
            SELECT \(Self.columns(finished: Self.finishedInList)) FROM \(Self.view)
            WHERE \(Self.inScope) ORDER BY t.id
            """, scope).filter { !$0.finished }
        try connection.execute("""
            DELETE FROM renewals WHERE $1::text IS NOT NULL AND transaction_id IN
                (SELECT id FROM transactions WHERE ($2::text IS NULL OR account = $2) AND ($3::text IS NULL OR app = $3))
            """, scope)
        var deleted = 0
        for table in ["transactions", "subscriptions", "purchase_requests"] {
            // The table name is one of the three above, never a value; deliveries go with their transactions.
            let result = try connection.execute(
                "DELETE FROM \(table) WHERE $1::text IS NOT NULL AND ($2::text IS NULL OR account = $2) AND ($3::text IS NULL OR app = $3)",
                scope)
            if table == "transactions" { deleted = result.changed }
        }
        // What every host made from these queues (a kept receipt) is stale now: their sequence
        // numbers move, although no transaction remains to carry the new one.
        try connection.execute(
            "UPDATE sequences SET last = last + 1 WHERE $1::text IS NOT NULL AND ($2::text IS NULL OR account = $2) AND ($3::text IS NULL OR app = $3)",
            scope)
        return (deleted, unfinished)
    }

    public func deleteTransaction(id: UInt64) throws(LedgerError) -> TransactionRecord? {
        precondition(isInTransaction, "a transaction deleted outside a unit of work")
        guard let record = try transaction(id: id), let stored = Self.storedID(id) else { return nil }
        changedOther = true
        queueSequenceWrites()
        unitReads.forgetRows()
        unitReads.ownChanges.forgetAll()
        unitReads.sequences.removeAll()   // moved below
        for sql in ["DELETE FROM renewals WHERE transaction_id = $1::bigint", "DELETE FROM purchase_requests WHERE transaction_id = $1::bigint",
                    "DELETE FROM transactions WHERE id = $1::bigint"] {
            try connection.execute(sql, [stored])
        }
        // Receipts every host made from this queue are stale now (as for a history deleted).
        try connection.execute("UPDATE sequences SET last = last + 1 WHERE account = $1 AND app = $2",
                               [accounts.account(of: record.uid), record.app])
        return record
    }

    // MARK: Settings

    public func setting(_ key: String) throws(LedgerError) -> String? {
        try connection.execute("SELECT value FROM settings WHERE key = $1", [key]).rows.first?.first ?? nil
    }

    public func setSetting(_ key: String, _ value: String?) throws(LedgerError) {
        changedOther = true
        if let value {
            try connection.execute(
                "INSERT INTO settings(key, value) VALUES($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [key, value])
        } else {
            try connection.execute("DELETE FROM settings WHERE key = $1", [key])
        }
    }

    /// One statement for all of `keys` (an array parameter), not a round trip each.
    public func settings(keys: [String]) throws(LedgerError) -> [String: String] {
        guard !keys.isEmpty else { return [:] }
        // A text[] literal: each element quoted, `\` and `"` escaped.
        var literal = "{"
        for (index, key) in keys.enumerated() {
            if index > 0 { literal += "," }
            literal += "\""
            // By scalar: a quote or backslash followed by a combining mark is one Character.
            for scalar in key.unicodeScalars {
                if scalar == "\\" || scalar == "\"" { literal += "\\" }
                literal.unicodeScalars.append(scalar)
            }
            literal += "\""
        }
        literal += "}"
        var found: [String: String] = [:]
        for row in try connection.execute("SELECT key, value FROM settings WHERE key = ANY($1::text[])", [literal]).rows {
            if let key = row[0], let value = row[1] { found[key] = value }
        }
        return found
    }

    public func settings(prefix: String) throws(LedgerError) -> [(key: String, value: String)] {
        try connection.execute("SELECT key, value FROM settings WHERE left(key, length($1)) = $1 ORDER BY key COLLATE \"C\"",
                               [prefix]).rows.map { ($0[0] ?? "", $0[1] ?? "") }
    }
}
