import StoreKitLedger
import StoreKitWire

// A unit of work in three round trips, whatever it holds: what its payments and finishes will read
// is read with the `BEGIN` (`begin(readingAhead:)`), their writes go with the next round trip
// (`executeLater`), and `flushWrites()` and the `COMMIT` end it. Without it each request waited
// for four or five round trips of its own (a payment key looked up, the queue counted, a
// sequence number moved, the row inserted), one after the other, on the serving loop.
//
// What is read stays true until the unit ends because the unit holds it: the queues' `sequences`
// rows and the transactions to finish are read `FOR UPDATE` (nobody else moves them until the
// `COMMIT`), and every write of this unit keeps `unitReads` in step or forgets what it touched.
// Payment keys and unfinished counts are read as any read is under READ COMMITTED: another host's
// purchase with the same key, committed meanwhile, fails this unit's insert (the unique key), and
// the unit runs again request by request, reading it.

extension PostgresLedger {
    /// What `begin(readingAhead:)` read for the unit of work in progress, as the unit's own
    /// writes left it (empty outside a unit, or when it read nothing ahead).
    struct UnitReads {
        /// The transaction each (queue, payment key) names, nil when none does (`keyName`).
        var byKey: [String: TransactionRecord?] = [:]
        /// The transactions to finish, locked.
        var byID: [UInt64: Row] = [:]
        /// This host's unfinished counts, by queue name.
        var unfinishedCounts: [String: Int] = [:]
        /// The last sequence number of each queue whose row is locked, by queue name.
        var sequences: [String: UInt64] = [:]
        /// Those not written to `sequences` yet (`queueSequenceWrites`), by queue name.
        var unwrittenSequences: [String: (account: String, app: String)] = [:]
        /// Whether the unit read ahead: its writes may be deferred.
        var isActive = false
        /// How this unit changed this host's own unfinished counts (every unit's, read ahead or not).
        var ownChanges = OwnChanges()

        static func keyName(_ account: String, _ app: String, _ key: String) -> String {
            PostgresLedger.queueName(account, app) + "\t" + key
        }

        /// After a write these reads cannot follow (a history deleted, a renewal delivered, a
        /// request undone): they are read again, one by one. The locks stay.
        mutating func forgetRows() {
            byKey.removeAll()
            byID.removeAll()
            unfinishedCounts.removeAll()
        }

        /// After a write of transaction `id` whose outcome is not known here.
        mutating func forget(id: UInt64) {
            byID[id] = nil
            byKey = byKey.filter { $0.value?.id != id }
        }
    }

    /// This unit's changes of `ownUnfinished`, applied when it commits.
    struct OwnChanges {
        var deltas: [String: Int] = [:]
        var forgotten = Set<String>()
        var allForgotten = false

        mutating func add(_ delta: Int, to name: String) { deltas[name, default: 0] += delta }
        /// A change this host cannot follow (a delivery or its own row finished): counted again.
        mutating func forget(_ name: String) { forgotten.insert(name) }
        mutating func forgetAll() { allForgotten = true }

        func apply(to counts: inout [String: Int]) {
            guard !allForgotten else { return counts.removeAll() }
            for name in forgotten { counts[name] = nil }
            for (name, delta) in deltas where counts[name] != nil { counts[name]! += delta }
        }
    }

    public var readsAhead: Bool { true }

    public func begin(readingAhead plan: ReadAhead) throws(LedgerError) {
        guard !plan.isEmpty else { return try begin() }
        try begin(deferred: true)
        var queues: [String: (account: String, app: String)] = [:]
        var counted = Set<String>()
        var keys: [(account: String, app: String, key: String)] = []
        for payment in plan.payments {
            let account = accounts.account(of: payment.queue.uid)
            let name = Self.queueName(account, payment.queue.app)
            queues[name] = (account, payment.queue.app)
            counted.insert(name)
            if let key = payment.key { keys.append((account, payment.queue.app, key)) }
        }
        var ids: [String] = []
        for finish in plan.finishes {
            let account = accounts.account(of: finish.queue.uid)
            queues[Self.queueName(account, finish.queue.app)] = (account, finish.queue.app)
            if let stored = Self.storedID(finish.transactionID) { ids.append(stored) }
        }
        // In one order (by queue name, then by id), so that units of several daemons taking
        // the same rows wait for each other instead of deadlocking.
        let lockedQueues = queues.sorted { $0.key < $1.key }.map(\.value)
        let countedQueues = lockedQueues.filter { counted.contains(Self.queueName($0.account, $0.app)) }
        // Planned once (a generic plan), not at each unit: left to choose, PostgreSQL plans these
        // afresh every time (the arrays' lengths make a custom plan look cheaper), which was a
        // third of a unit's time at one client. Each is a lookup by key: by index, also while a
        // young ledger's statistics make a table scan look cheaper (a plan made then is kept, and
        // the scan grows with the ledger until autovacuum analyzes it).
        var statements: [(sql: String, parameters: [String?])] = [
            ("SET LOCAL plan_cache_mode = force_generic_plan", []),
            ("SET LOCAL enable_seqscan = off", []),
            ("""
             SELECT s.account, s.app, s.last FROM sequences s
             JOIN unnest($1::text[], $2::text[]) AS q(account, app) ON s.account = q.account AND s.app = q.app
             ORDER BY s.account, s.app FOR UPDATE OF s
             """, [Self.arrayLiteral(lockedQueues.map(\.account)), Self.arrayLiteral(lockedQueues.map(\.app))]),
        ]
        if !keys.isEmpty {
            statements.append(("""
                SELECT \(Self.columns(finished: Self.finishedByID)), t.payment_key FROM \(Self.view)
                JOIN unnest($2::text[], $3::text[], $4::text[]) AS k(account, app, key)
                    ON t.account = k.account AND t.app = k.app AND t.payment_key = k.key
                """, [member.host, Self.arrayLiteral(keys.map(\.account)), Self.arrayLiteral(keys.map(\.app)),
                      Self.arrayLiteral(keys.map(\.key))]))
        }
        if !ids.isEmpty {
            statements.append(("""
                SELECT \(Self.columns(finished: Self.finishedByID)) FROM \(Self.view)
                WHERE t.id = ANY($2::bigint[]) ORDER BY t.id FOR UPDATE OF t
                """, [member.host, "{" + ids.joined(separator: ",") + "}"]))
        }
        if !countedQueues.isEmpty {
            // This host's own count once per queue (then `ownUnfinished`), its deliveries each time
            // (other hosts' renewals add to them).
            statements.append(("""
                SELECT q.account, q.app,
                    CASE WHEN q.known THEN NULL ELSE
                        (SELECT count(*) FROM transactions WHERE host = $1 AND account = q.account AND app = q.app AND finished = 0) END,
                    (SELECT count(*) FROM deliveries d JOIN transactions t ON t.id = d.transaction_id
                     WHERE d.host = $1 AND d.finished = 0 AND t.account = q.account AND t.app = q.app)
                FROM unnest($2::text[], $3::text[], $4::boolean[]) AS q(account, app, known)
                """, [member.host, Self.arrayLiteral(countedQueues.map(\.account)), Self.arrayLiteral(countedQueues.map(\.app)),
                      "{" + countedQueues.map { ownUnfinished[Self.queueName($0.account, $0.app)] == nil ? "f" : "t" }.joined(separator: ",") + "}"]))
        }
        statements.append(("RESET plan_cache_mode", []))
        statements.append(("RESET enable_seqscan", []))
        var results = try connection.execute(all: statements).dropFirst(2)
        var reads = UnitReads(isActive: true, ownChanges: unitReads.ownChanges)
        for row in results.removeFirst().rows {
            reads.sequences[Self.queueName(row[0] ?? "", row[1] ?? "")] = UInt64(row[2].flatMap { Int64($0) } ?? 0)
        }
        if !keys.isEmpty {
            for key in keys { reads.byKey[UnitReads.keyName(key.account, key.app, key.key)] = .some(nil) }
            for values in results.removeFirst().rows {
                let found = row(values)
                reads.byKey[UnitReads.keyName(values[2] ?? "", found.record.app, values[20] ?? "")] = found.record
            }
        }
        if !ids.isEmpty {
            for values in results.removeFirst().rows {
                let found = row(values)
                reads.byID[found.record.id] = found
            }
        }
        if !countedQueues.isEmpty {
            for row in results.removeFirst().rows {
                let name = Self.queueName(row[0] ?? "", row[1] ?? "")
                if let own = row[2].flatMap({ Int($0) }) { ownUnfinished[name] = own }
                reads.unfinishedCounts[name] = (ownUnfinished[name] ?? 0) + (row[3].flatMap { Int($0) } ?? 0)
            }
        }
        unitReads = reads
    }

    /// The deferred writes, sent and answered (in a unit that read ahead; otherwise nothing
    /// waits: each write was answered as it was made).
    public func flushWrites() throws(LedgerError) {
        queueSequenceWrites()
        try connection.flush()
    }

    /// Finishes a transaction read ahead (and so locked) in this host's own queue, with no round
    /// trip: whether the `UPDATE` changes the row is known from the row. Nil when the row was not
    /// read ahead, or is a renewal (its deliveries decide).
    func markFinishedReadAhead(id: UInt64, sequence: UInt64) -> Bool? {
        guard unitReads.isActive, var row = unitReads.byID[id], row.host == member.host, !row.deliveredHere,
              let stored = Self.storedID(id) else { return nil }
        guard !row.finishedThere, [.purchased, .failed, .restored].contains(row.record.state) else { return false }
        // By id alone: the row is locked and was checked above. (With `host = … AND finished = 0`
        // PostgreSQL's generic plan walks the partial index of unfinished rows by host, through
        // every finished row's dead entry until a vacuum: a millisecond and growing.)
        connection.executeLater("UPDATE transactions SET finished = 1, sequence = $1, changed_by = $3 WHERE id = $2",
                                [String(sequence), stored, member.host])
        row.finishedThere = true
        row.record.finished = true
        row.record.sequence = sequence
        unitReads.byID[id] = row
        unitReads.byKey = unitReads.byKey.mapValues { read in read?.id == id ? row.record : read }
        let name = Self.queueName(accounts.account(of: row.record.uid), row.record.app)
        if let count = unitReads.unfinishedCounts[name] { unitReads.unfinishedCounts[name] = count - 1 }
        unitReads.ownChanges.add(-1, to: name)
        return true
    }

    /// The next sequence number of a queue whose row was read ahead (and so locked); its `UPDATE`
    /// goes with the next round trip. Nil when the row was not read ahead.
    func nextSequenceReadAhead(account: String, app: String) -> UInt64? {
        let name = Self.queueName(account, app)
        guard unitReads.isActive, let last = unitReads.sequences[name] else { return nil }
        let next = last + 1
        unitReads.sequences[name] = next
        unitReads.unwrittenSequences[name] = (account, app)
        return next
    }

    /// Queues the write of the sequence numbers given out since the last one, all queues in one
    /// statement, to go with the next round trip: before anything reads or moves `sequences`,
    /// before a request's savepoint is released, and before the `COMMIT`.
    func queueSequenceWrites() {
        guard !unitReads.unwrittenSequences.isEmpty else { return }
        let queues = unitReads.unwrittenSequences.sorted { $0.key < $1.key }
        connection.executeLater("""
            UPDATE sequences s SET last = v.last FROM unnest($1::text[], $2::text[], $3::bigint[]) AS v(account, app, last)
            WHERE s.account = v.account AND s.app = v.app
            """, [Self.arrayLiteral(queues.map(\.value.account)), Self.arrayLiteral(queues.map(\.value.app)),
                  "{" + queues.map { String(unitReads.sequences[$0.key] ?? 0) }.joined(separator: ",") + "}"])
        unitReads.unwrittenSequences.removeAll()
    }

    /// What the unit's insert of `record` changes of what was read ahead.
    func noteInserted(_ record: TransactionRecord, account: String, paymentKey: String?) {
        let name = Self.queueName(account, record.app)
        unitReads.forget(id: record.id)
        if let paymentKey { unitReads.byKey[UnitReads.keyName(account, record.app, paymentKey)] = record }
        // A new purchase in this host's queue counts; anything else is counted again.
        if !record.finished && record.originalID == nil, let count = unitReads.unfinishedCounts[name] {
            unitReads.unfinishedCounts[name] = count + 1
        } else {
            unitReads.unfinishedCounts[name] = nil
        }
    }

    /// A PostgreSQL array literal of texts (`{"a","b"}`), quoted and escaped: passed as a
    /// parameter, never spliced into SQL.
    static func arrayLiteral(_ values: [String]) -> String {
        "{" + values.map { value in
            var quoted = "\""
            for character in value.unicodeScalars {
                if character == "\"" || character == "\\" { quoted.unicodeScalars.append("\\") }
                quoted.unicodeScalars.append(character)
            }
            return quoted + "\""
        }.joined(separator: ",") + "}"
    }
}
