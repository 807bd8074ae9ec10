import CPostgres
import StoreKitLedger

// `storekitctl migrate CONNINFO` (docs/fleet.md, "Moving over"): a host's SQLite ledger copied
// into this database in ONE PostgreSQL transaction, so that a failure anywhere leaves nothing.
//
// The rows are first staged in temporary tables shaped like their targets (`LIKE`), each with
// its canonical text made in Swift from the SQLite values; then, all in SQL: rows whose key is
// already there with other content are refused (a conflict, named by its id), new rows are
// inserted (`ON CONFLICT DO NOTHING`: a second run copies nothing), and the copy is verified —
// per table, the count and the SHA-256 of the canonical texts sent equal the count and the
// SHA-256 of the same canonical form computed by PostgreSQL over the rows now in the table.
//
// As in the schema's version 2 migration, rows made before the fleet belong to the account of
// their uid (as this host maps it) and to this host's queues; renewals stay in this host's queue
// (host = this host, no deliveries), where they were. Sequences take the larger counter of both.
// Settings already in the database are the fleet's and are kept (reported when they differ).

extension PostgresLedger {
    /// What a copy did, per table.
    public struct ImportReport: Sendable {
        public struct Table: Sendable {
            public let name: String
            /// Rows read from the SQLite file (for `fleet_queues`: the queues they use).
            public let rows: Int
            public let copied: Int
            /// Already there: the same row (or for `sequences` a counter as high, for `settings` the key).
            public let present: Int
            /// SHA-256 (hex) of the rows' canonical text, for the tables whose rows are copied as they are.
            public let checksum: String?
        }

        public let tables: [Table]
        /// SHA-256 over the tables' checksums.
        public let checksum: String
        /// Settings the database had with another value: the fleet's value was kept.
        public let settingsKept: [String]
        public var copied: Int { tables.reduce(0) { $0 + $1.copied } }
        public var present: Int { tables.reduce(0) { $0 + $1.present } }
    }

    /// How one SQLite table lands in PostgreSQL.
    private struct Target {
        let name: String
        /// The staged columns: the SQLite columns with `uid` mapped to `account` where the
        /// target has one, and this host where it needs one.
        let columns: [String]
        let key: String
        let textColumns: Set<String>
        /// Copied as they are, compared with an existing row, and checksummed: every column but
        /// `changed_by` (bookkeeping of which daemon last wrote). Sequences and settings merge instead.
        let compared: [String]?
        /// For messages: "transaction 2000000000000001".
        let noun: String

        var stage: String { "migrate_" + name }
        var copiedAsIs: Bool { compared != nil }
    }

    private static let targets: [Target] = {
        let exported = Dictionary(uniqueKeysWithValues: LedgerRows.tables.map { ($0.name, $0.columns) })
        func target(_ name: String, adding extra: [String] = [], text: Set<String> = [], key: String,
                    compared: Bool, noun: String) -> Target {
            let columns = exported[name]! + extra
            return Target(name: name, columns: columns, key: key, textColumns: text,
                          compared: compared ? columns.filter { $0 != "changed_by" } : nil, noun: noun)
        }
        return [
            target("transactions", adding: ["account", "host", "changed_by"],
                   text: ["app", "product", "error_message", "app_username", "payment_key", "account", "host"],
                   key: "id", compared: true, noun: "transaction"),
            Target(name: "sequences", columns: ["account", "app", "last"], key: "account", textColumns: [],
                   compared: nil, noun: "sequence"),
            target("settings", key: "key", compared: false, noun: "setting"),
            target("subscriptions", adding: ["account"],
                   text: ["app", "group_id", "product", "app_username", "next_product", "account"],
                   key: "original_id", compared: true, noun: "subscription with original transaction"),
            target("purchase_requests", adding: ["account"], text: ["app", "product", "account"],
                   key: "transaction_id", compared: true, noun: "purchase request of transaction"),
            target("renewals", key: "transaction_id", compared: true, noun: "renewal"),
        ]
    }()

    /// Rows staged per statement (PostgreSQL takes at most 65,535 parameters in one).
    static let stagedRowsPerStatement = 500

    /// 0x534B4D47: "SKMG". Two copies into one database wait for each other.
    static let importLock = 1397443911

    /// Copies `store`'s committed rows into this database in one transaction, verifies them and
    /// commits; on any conflict, mismatch or error nothing is left. `progress` is called after
    /// every page (the caller's watchdog). Not inside a unit of work of this ledger.
    public func importLedger(from store: any Ledger, progress: () -> Void = {}) throws(LedgerError) -> ImportReport {
        precondition(!isInTransaction, "import inside a unit of work")
        try connection.execute("BEGIN")
        do {
            // Durable when COMMIT returns, whatever the server's default; never waiting forever
            // for a lock (a daemon of the fleet migrating the schema, another copy).
            try connection.execute("SET LOCAL synchronous_commit = on")
            try connection.execute("SET LOCAL lock_timeout = '10s'")
            try connection.execute("SELECT pg_advisory_xact_lock(\(Self.importLock))")
            let report = try copy(from: store, progress: progress)
            // The fleet's daemons read everything again (settings may be new to them), with the commit.
            try connection.execute("SELECT pg_notify($1, $2)", [channel, member.host + "\n*"])
            try connection.execute("COMMIT")
            return report
        } catch {
            _ = try? connection.execute("ROLLBACK")
            throw error
        }
    }

    private func copy(from store: any Ledger, progress: () -> Void) throws(LedgerError) -> ImportReport {
        for target in Self.targets {
            // Names are the constants above, never values.
            try connection.execute("""
                CREATE TEMPORARY TABLE \(target.stage) (LIKE \(target.name)\(target.copiedAsIs ? ", canon text NOT NULL" : ""))
                ON COMMIT DROP
                """)
        }
        var read: [String: Int] = [:]
        var lastID: Int64 = 0
        try store.export { (table, rows) throws(LedgerError) in
            guard let target = Self.targets.first(where: { $0.name == table.name }) else { return }
            var staged: [[String?]] = []
            for row in rows {
                let values = row.map(\.text)
                if table.name == "settings", let key = values[0] {
                    if key == LedgerRows.lastIDSetting { lastID = max(lastID, Int64(values[1] ?? "") ?? 0) }
                    if LedgerRows.isFileSetting(key) { continue }
                }
                if table.name == "transactions" { lastID = max(lastID, Int64(values[0] ?? "") ?? 0) }
                staged.append(self.staged(values, of: table, into: target))
            }
            read[table.name, default: 0] += staged.count
            try stage(staged, into: target)
            progress()
        }
        try refuseConflicts()

        var tables: [ImportReport.Table] = []
        var settingsKept: [String] = []
        for target in Self.targets {
            let rows = read[target.name] ?? 0
            let copied: Int
            switch target.name {
            case "sequences":
                // Several uids may be one account: the highest counter of them, and of the database.
                copied = try connection.execute("""
                    INSERT INTO sequences(account, app, last) SELECT account, app, max(last) FROM migrate_sequences GROUP BY account, app
                    ON CONFLICT (account, app) DO UPDATE SET last = excluded.last WHERE sequences.last < excluded.last
                    """).changed
                let merged = try connection.execute("SELECT count(*) FROM (SELECT DISTINCT account, app FROM migrate_sequences) q")
                tables.append(.init(name: target.name, rows: rows, copied: copied,
                                    present: Int(merged.firstInt ?? 0) - copied, checksum: nil))
                continue
            case "settings":
                copied = try connection.execute("INSERT INTO settings(key, value) SELECT key, value FROM migrate_settings ON CONFLICT (key) DO NOTHING").changed
                settingsKept = try connection.execute("""
                    SELECT s.key FROM migrate_settings s JOIN settings t USING (key) WHERE s.value <> t.value ORDER BY s.key
                    """).rows.map { $0[0] ?? "" }
                tables.append(.init(name: target.name, rows: rows, copied: copied, present: rows - copied, checksum: nil))
                continue
            default:
                let columns = target.columns.joined(separator: ", ")
                copied = try connection.execute("""
                    INSERT INTO \(target.name)(\(columns)) SELECT \(columns) FROM \(target.stage) ON CONFLICT (\(target.key)) DO NOTHING
                    """).changed
            }
            tables.append(.init(name: target.name, rows: rows, copied: copied, present: rows - copied,
                                checksum: try verify(target, rows: rows)))
            progress()
        }
        // Where each account uses each app on this host: renewals fired later are delivered here.
        let queues = try connection.execute("""
            SELECT count(*) FROM (SELECT account, app FROM migrate_transactions UNION SELECT account, app FROM migrate_subscriptions
                UNION SELECT account, app FROM migrate_purchase_requests) q
            """).firstInt ?? 0
        let registered = try connection.execute("""
            INSERT INTO fleet_queues(host, account, app, since)
            SELECT $1::text, account, app, 0 FROM (SELECT account, app FROM migrate_transactions
                UNION SELECT account, app FROM migrate_subscriptions UNION SELECT account, app FROM migrate_purchase_requests) q
            ON CONFLICT DO NOTHING
            """, [member.host]).changed
        tables.append(.init(name: "fleet_queues", rows: Int(queues), copied: registered, present: Int(queues) - registered,
                            checksum: nil))
        try verifyMerged()

        // Above every id copied (and every id the file ever gave, and the clock's, as the
        // schema's migration does). setval is not undone by a rollback: it runs last, and a
        // higher sequence only skips ids.
        try connection.execute("""
            SELECT setval('transaction_ids', greatest((SELECT last_value FROM transaction_ids), $1::bigint, $2::bigint))
            """, [String(lastID), String(TransactionIDs.fromClock())])
        let sums = tables.compactMap { table in table.checksum.map { "\(table.name) \($0)\n" } }.joined()
        let checksum = try connection.execute("SELECT encode(sha256(convert_to($1::text, 'UTF8')), 'hex')", [sums]).rows.first?.first ?? nil
        return ImportReport(tables: tables, checksum: checksum ?? "", settingsKept: settingsKept)
    }

    /// The staged values of one SQLite row (`values` in `table`'s columns), canonical text last
    /// for the tables copied as they are.
    private func staged(_ values: [String?], of table: LedgerRows.Table, into target: Target) -> [String?] {
        var row = values
        let uid = table.columns.firstIndex(of: "uid").flatMap { values[$0] }.flatMap { UInt32($0) }
        switch table.name {
        case "transactions": row += [uid.map { accounts.account(of: $0) }, member.host, member.host]
        case "subscriptions", "purchase_requests": row += [uid.map { accounts.account(of: $0) }]
        case "sequences": row = [uid.map { accounts.account(of: $0) }, values[1], values[2]]
        default: break
        }
        guard let compared = target.compared else { return row }
        var canon = ""
        for column in compared {
            let value = row[target.columns.firstIndex(of: column)!]
            if !canon.isEmpty { canon += "," }
            canon += value.map { target.textColumns.contains(column) ? "\($0.utf8.count):\($0)" : $0 } ?? "-"
        }
        return row + [canon + "\n"]
    }

    /// The same canonical text as `staged` makes, computed by PostgreSQL from the columns of `alias`.
    private static func canonicalText(_ target: Target, alias: String) -> String {
        (target.compared ?? []).map { column in
            target.textColumns.contains(column)
                ? "coalesce(octet_length(\(alias).\(column))::text || ':' || \(alias).\(column), '-')"
                : "coalesce(\(alias).\(column)::text, '-')"
        }.joined(separator: " || ',' || ") + " || E'\\n'"
    }

    /// SHA-256 (hex) of `text` (a canonical line per row), concatenated in key order.
    private static func digest(of text: String, key: String) -> String {
        "encode(sha256(convert_to(coalesce(string_agg(\(text), '' ORDER BY \(key)), ''), 'UTF8')), 'hex')"
    }

    private func stage(_ rows: [[String?]], into target: Target) throws(LedgerError) {
        let width = target.columns.count + (target.copiedAsIs ? 1 : 0)
        let columns = target.columns.joined(separator: ", ") + (target.copiedAsIs ? ", canon" : "")
        var start = 0
        while start < rows.count {
            let chunk = rows[start..<min(start + Self.stagedRowsPerStatement, rows.count)]
            let values = (0..<chunk.count).map { row in
                "(" + (1...width).map { "$\(row * width + $0)" }.joined(separator: ", ") + ")"
            }.joined(separator: ", ")
            try connection.execute("INSERT INTO \(target.stage)(\(columns)) VALUES \(values)", chunk.flatMap { $0 })
            start += chunk.count
        }
    }

    /// Throws, naming the first one, when a staged row's key is taken by another row: the same
    /// id with other content, or another id with the same payment key or subscription group.
    private func refuseConflicts() throws(LedgerError) {
        for target in Self.targets {
            guard let compared = target.compared else { continue }
            let pairs = compared.map { "s.\($0), t.\($0)" }.joined(separator: ", ")
            let found = try connection.execute("""
                SELECT s.\(target.key), \(pairs) FROM \(target.stage) s JOIN \(target.name) t USING (\(target.key))
                WHERE (\(compared.map { "s." + $0 }.joined(separator: ", "))) IS DISTINCT FROM (\(compared.map { "t." + $0 }.joined(separator: ", ")))
                ORDER BY s.\(target.key) LIMIT 1
                """).rows.first
            if let found {
                let differing = compared.indices.filter { found[1 + 2 * $0] != found[2 + 2 * $0] }.map { index in
                    "\(compared[index]) \(found[2 + 2 * index] ?? "NULL") there, \(found[1 + 2 * index] ?? "NULL") here"
                }
                throw conflict("\(target.noun) \(found[0] ?? "") is already in \(path) with other content ("
                               + differing.joined(separator: "; ") + ")")
            }
        }
        if let row = try connection.execute("""
            SELECT s.id, t.id FROM migrate_transactions s JOIN transactions t
                ON t.account = s.account AND t.app = s.app AND t.payment_key = s.payment_key AND t.id <> s.id
            ORDER BY s.id LIMIT 1
            """).rows.first {
            throw conflict("transaction \(row[0] ?? "")'s payment key is taken in \(path) by transaction \(row[1] ?? "")")
        }
        if let row = try connection.execute("""
            SELECT s.original_id, t.original_id FROM migrate_subscriptions s JOIN subscriptions t
                ON t.account = s.account AND t.app = s.app AND t.group_id = s.group_id AND t.original_id <> s.original_id
            ORDER BY s.original_id LIMIT 1
            """).rows.first {
            throw conflict("subscription with original transaction \(row[0] ?? "") is in a group where \(path) already has "
                           + "subscription \(row[1] ?? "") of the same account")
        }
    }

    private func conflict(_ message: String) -> LedgerError {
        LedgerError(.other(PostgresConnection.uniqueViolation), path: path, message: message + "; nothing was copied")
    }

    /// Compares the rows now in `target` with those staged (sent): count and checksum. Returns the checksum.
    private func verify(_ target: Target, rows: Int) throws(LedgerError) -> String {
        let sent = try connection.execute("SELECT count(*), \(Self.digest(of: "canon", key: target.key)) FROM \(target.stage)")
        let stored = try connection.execute("""
            SELECT count(*), \(Self.digest(of: Self.canonicalText(target, alias: "t"), key: "t." + target.key))
            FROM \(target.name) t WHERE t.\(target.key) IN (SELECT \(target.key) FROM \(target.stage))
            """)
        let (sentCount, sentSum) = (sent.firstInt ?? -1, sent.rows.first.flatMap { $0[1] })
        let (storedCount, storedSum) = (stored.firstInt ?? -1, stored.rows.first.flatMap { $0[1] })
        guard sentCount == rows, storedCount == rows, sentSum == storedSum, let sum = storedSum else {
            throw LedgerError(.corrupt, path: path, message: """
                verification of \(target.name) failed: \(rows) rows read from SQLite, \(sentCount) sent, \(storedCount) in \
                PostgreSQL; checksum sent \(sentSum ?? "none"), stored \(storedSum ?? "none"); nothing was copied
                """)
        }
        return sum
    }

    /// Sequences at least as high as the file's, every setting and queue there.
    private func verifyMerged() throws(LedgerError) {
        for (what, sql) in [
            ("sequences lower than the SQLite file's", """
                SELECT count(*) FROM migrate_sequences s LEFT JOIN sequences t USING (account, app)
                WHERE t.last IS NULL OR t.last < s.last
                """),
            ("settings missing", "SELECT count(*) FROM migrate_settings s WHERE NOT EXISTS (SELECT 1 FROM settings t WHERE t.key = s.key)"),
            ("queues of this host missing", """
                SELECT count(*) FROM (SELECT account, app FROM migrate_transactions UNION SELECT account, app FROM migrate_subscriptions
                    UNION SELECT account, app FROM migrate_purchase_requests) q
                WHERE NOT EXISTS (SELECT 1 FROM fleet_queues f WHERE f.host = $1 AND f.account = q.account AND f.app = q.app)
                """),
        ] {
            let missing = try connection.execute(sql, sql.contains("$1") ? [member.host] : []).firstInt ?? -1
            guard missing == 0 else {
                throw LedgerError(.corrupt, path: path, message: "verification failed: \(missing) \(what); nothing was copied")
            }
        }
    }

    /// `conninfo` with a connection timeout (10 s) unless it names one: a host that does not
    /// answer must not hold the caller (the daemon's serving loop) for libpq's default, forever.
    public static func withConnectTimeout(_ conninfo: String, seconds: Int = 10) -> String {
        guard let pq = try? LibPQ.loaded(), let options = pq.conninfoParse(conninfo, nil) else { return conninfo }
        defer { pq.conninfoFree(options) }
        var option = options
        while let keyword = option.pointee.keyword {
            if String(cString: keyword) == "connect_timeout", option.pointee.val != nil { return conninfo }
            option += 1
        }
        if conninfo.hasPrefix("postgresql://") || conninfo.hasPrefix("postgres://") {
            return conninfo + (conninfo.contains("?") ? "&" : "?") + "connect_timeout=\(seconds)"
        }
        return conninfo + " connect_timeout=\(seconds)"
    }
}
