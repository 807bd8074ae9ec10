import StoreKitLedger
import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

// The fleet: notifications from other hosts and reading what they changed, by sequence.

extension PostgresLedger {
    /// Records what another daemon's notification named; false for this daemon's own.
    public func noteNotification(_ payload: String) -> Bool {
        let lines = payload.split(separator: "\n", omittingEmptySubsequences: false)
        guard let host = lines.first, host != member.host else { return false }
        for line in lines.dropFirst() {
            if line == "*" {
                // More than transactions changed (settings, the schedule): the engine reloads them.
                catchUpAll = true
                externalGeneration &+= 1
            } else {
                notifiedQueues.insert(String(line))
            }
        }
        return true
    }

    /// After the listener lost its connection: notifications may have been missed.
    public func noteMissedNotifications() {
        catchUpAll = true
        externalGeneration &+= 1
    }

    /// Whether another daemon may have changed a watched queue since `changesElsewhere` last ran.
    public var hasChangesElsewhere: Bool { catchUpAll || !notifiedQueues.isEmpty }

    /// The transactions of `queues` that other daemons changed since this ledger last looked (or
    /// since the queue was first read), as this host sees them, in commit order; each at most
    /// once per change. Queues no longer asked for are forgotten (read afresh when watched again).
    public func changesElsewhere(of queues: Set<QueueKey>) throws(LedgerError) -> ChangesElsewhere {
        precondition(isInTransaction, "changes read outside a unit of work")
        var watched: [String: (account: String, app: String)] = [:]
        for queue in queues {
            let account = accounts.account(of: queue.uid)
            watched[Self.queueName(account, queue.app)] = (account, queue.app)
        }
        // Changed only once everything was read: a failure leaves all as it was.
        var seen = watermarks.filter { watched[$0.key] != nil }
        var changed: [TransactionRecord] = []
        for (name, queue) in watched.sorted(by: { $0.key < $1.key }) {
            guard catchUpAll || notifiedQueues.contains(name), let last = seen[name] else { continue }
            let found = try rows("""
                SELECT \(Self.columns(finished: Self.finishedInList)) FROM \(Self.view)
                WHERE t.account = $2 AND t.app = $3 AND t.sequence > $4 ORDER BY t.sequence
                """, [member.host, queue.account, queue.app, String(last)])
            guard let newest = found.last else { continue }
            seen[name] = newest.record.sequence
            changed += found.filter { row in
                // Another host finishing its own transaction changes nothing this host tells.
                let finishedThere = row.host == row.changedBy && row.host != member.host && row.finishedThere
                    && row.record.revocationDate == nil
                return row.changedBy != member.host && isSeenHere(row) && !finishedThere
            }.map(\.record)
        }
        // Queues with no observer here that were named, with work waiting in this host's queue.
        var waiting: [QueueKey] = []
        if catchUpAll || notifiedQueues.contains(where: { watched[$0] == nil }) {
            let rows = try connection.execute("""
                SELECT account, app FROM transactions WHERE host = $1 AND finished = 0
                UNION SELECT t.account, t.app FROM deliveries d JOIN transactions t ON t.id = d.transaction_id
                WHERE d.host = $1 AND d.finished = 0
                """, [member.host]).rows
            for row in rows {
                let (account, app) = (row[0] ?? "", row[1] ?? "")
                let name = Self.queueName(account, app)
                guard watched[name] == nil, catchUpAll || notifiedQueues.contains(name) else { continue }
                waiting.append(QueueKey(uid: accounts.uid(of: account), app: app))
            }
        }
        watermarks = seen
        catchUpAll = false
        notifiedQueues.removeAll()
        return ChangesElsewhere(transactions: changed, waiting: waiting)
    }
}
