import StoreKitLedger

// The PostgreSQL schema: the SQLite ledger's tables (SQLiteLedger+Schema.swift) with the same
// columns and meanings, in versions kept in `storekit_schema`. Each migration runs in one
// transaction under an advisory lock, so that daemons starting together migrate once; a newer
// schema is refused.
//
// Version 2 makes the ledger a fleet's (docs/fleet.md): rows belong to an account (not a uid) and
// a transaction to the queue of the host that made it (`host`; '' for a renewal, which belongs to
// every host where the account uses the app and is finished per host in `deliveries`);
// `changed_by` names the host whose daemon last changed a row, `fleet_queues` where each account
// uses each app, and `transaction_ids` hands out ids to the whole fleet in blocks.

extension PostgresLedger {
    /// Creates or upgrades the schema; says what it found.
    func migrate(to version: Int = schemaVersion) throws(LedgerError) -> String {
        try connection.execute("BEGIN")
        do throws(LedgerError) {
            // 0x534B5144: "SKQD", the SQLite ledger's application id.
            try connection.execute("SELECT pg_advisory_xact_lock(1397440836)")
            // Created only when missing: `CREATE … IF NOT EXISTS` needs CREATE on the schema even
            // when the table is there, which the daemons' least-privilege role lacks (docs/fleet.md).
            if try connection.execute("SELECT to_regclass('storekit_schema') IS NULL").rows.first?.first == "t" {
                try connection.execute("CREATE TABLE storekit_schema (version integer NOT NULL)")
            }
            let found = Int(try connection.execute("SELECT max(version) FROM storekit_schema").firstInt ?? 0)
            guard found <= version else {
                throw LedgerError(.unsupportedSchema(found: found, supported: Self.schemaVersion), path: path,
                                 message: "schema version \(found) is newer than this storekitd's \(Self.schemaVersion); refusing to use it")
            }
            if found < 1 {
                // v1 = the SQLite ledger's schema 3. The payment key is unique per queue: NULLs
                // (payments without a key) are distinct.
                for statement in [
                    """
                    CREATE TABLE transactions (
                        id bigint PRIMARY KEY,
                        original_id bigint,
                        uid bigint NOT NULL,
                        app text NOT NULL,
                        product text NOT NULL,
                        quantity integer NOT NULL,
                        state integer NOT NULL,
                        sequence bigint NOT NULL,
                        date bigint NOT NULL,
                        finished integer NOT NULL DEFAULT 0,
                        error_code integer,
                        error_message text,
                        revocation_date bigint,
                        revocation_reason integer,
                        app_username text,
                        expires_date bigint,
                        payment_key text,
                        CONSTRAINT transactions_payment_key UNIQUE (uid, app, payment_key)
                    )
                    """,
                    "CREATE INDEX transactions_unfinished ON transactions(uid, app, id) WHERE finished = 0",
                    "CREATE INDEX transactions_queue ON transactions(uid, app, product)",
                    "CREATE TABLE sequences (uid bigint NOT NULL, app text NOT NULL, last bigint NOT NULL, PRIMARY KEY (uid, app))",
                    "CREATE TABLE settings (key text PRIMARY KEY, value text NOT NULL)",
                    """
                    CREATE TABLE subscriptions (
                        original_id bigint PRIMARY KEY,
                        uid bigint NOT NULL,
                        app text NOT NULL,
                        group_id text NOT NULL,
                        product text NOT NULL,
                        quantity integer NOT NULL,
                        app_username text,
                        status integer NOT NULL,
                        period_start bigint NOT NULL,
                        expires_date bigint NOT NULL,
                        auto_renew integer NOT NULL,
                        next_product text,
                        offer_periods_left integer NOT NULL DEFAULT 0,
                        grace_end bigint,
                        retry_end bigint,
                        due bigint,
                        last_transaction bigint NOT NULL,
                        renewals integer NOT NULL DEFAULT 0,
                        CONSTRAINT subscriptions_group UNIQUE (uid, app, group_id)
                    )
                    """,
                    "CREATE INDEX subscriptions_due ON subscriptions(due) WHERE due IS NOT NULL",
                    """
                    CREATE TABLE purchase_requests (
                        transaction_id bigint PRIMARY KEY,
                        kind integer NOT NULL,
                        uid bigint NOT NULL,
                        app text NOT NULL,
                        product text NOT NULL,
                        created bigint NOT NULL,
                        expires bigint
                    )
                    """,
                    "CREATE INDEX purchase_requests_product ON purchase_requests(uid, app, product, kind)",
                    "CREATE INDEX purchase_requests_due ON purchase_requests(expires) WHERE expires IS NOT NULL",
                    "CREATE TABLE renewals (transaction_id bigint PRIMARY KEY)",
                ] {
                    try connection.execute(statement)
                }
            }
            if found < 2 && version >= 2 { try migrateToFleet() }
            if found < version {
                try connection.execute("DELETE FROM storekit_schema")
                try connection.execute("INSERT INTO storekit_schema(version) VALUES($1)", [String(version)])
            }
            try connection.execute("COMMIT")
            return found == 0 ? "created schema \(version)"
                : found < version ? "migrated schema \(found) → \(version)" : "schema \(found)"
        } catch {
            _ = try? connection.execute("ROLLBACK")
            throw error
        }
    }

    /// Version 1 → 2: accounts, hosts, deliveries, fleet-wide ids. Rows written before belong to
    /// the account of their uid (as this host maps it) and to this host's queues.
    private func migrateToFleet() throws(LedgerError) {
        for statement in [
            "ALTER TABLE transactions ADD COLUMN account text, ADD COLUMN host text, ADD COLUMN changed_by text",
            "ALTER TABLE subscriptions ADD COLUMN account text",
            "ALTER TABLE purchase_requests ADD COLUMN account text",
            "ALTER TABLE sequences ADD COLUMN account text",
        ] {
            try connection.execute(statement)
        }
        let uids = try connection.execute("""
            SELECT uid FROM transactions UNION SELECT uid FROM subscriptions
            UNION SELECT uid FROM purchase_requests UNION SELECT uid FROM sequences
            """).rows.compactMap { $0.first.flatMap { $0 }.flatMap { UInt32($0) } }
        for uid in uids {
            let account = accounts.account(of: uid)
            for table in ["transactions", "subscriptions", "purchase_requests", "sequences"] {
                // The table name is one of the four above, never a value.
                try connection.execute("UPDATE \(table) SET account = $1 WHERE uid = $2", [account, String(uid)])
            }
        }
        try connection.execute("UPDATE transactions SET host = $1, changed_by = $1", [member.host])
        // Renewals already made stay in this host's queue, where they were.
        for statement in [
            "ALTER TABLE transactions ALTER COLUMN account SET NOT NULL, ALTER COLUMN host SET NOT NULL, ALTER COLUMN changed_by SET NOT NULL",
            "ALTER TABLE transactions DROP CONSTRAINT transactions_payment_key",
            "ALTER TABLE transactions ADD CONSTRAINT transactions_payment_key UNIQUE (account, app, payment_key)",
            "DROP INDEX transactions_unfinished",
            "DROP INDEX transactions_queue",
            "CREATE INDEX transactions_unfinished ON transactions(host, account, app, id) WHERE finished = 0",
            "CREATE INDEX transactions_account ON transactions(account, app, sequence)",
            "ALTER TABLE subscriptions ALTER COLUMN account SET NOT NULL",
            "ALTER TABLE subscriptions DROP CONSTRAINT subscriptions_group",
            "ALTER TABLE subscriptions ADD CONSTRAINT subscriptions_group UNIQUE (account, app, group_id)",
            "ALTER TABLE purchase_requests ALTER COLUMN account SET NOT NULL",
            "DROP INDEX purchase_requests_product",
            "CREATE INDEX purchase_requests_product ON purchase_requests(account, app, product, kind)",
            "DELETE FROM sequences WHERE account IS NULL",
            "ALTER TABLE sequences DROP CONSTRAINT sequences_pkey",
            "ALTER TABLE sequences DROP COLUMN uid",
            "ALTER TABLE sequences ADD PRIMARY KEY (account, app)",
            """
            CREATE TABLE deliveries (
                transaction_id bigint NOT NULL REFERENCES transactions(id) ON DELETE CASCADE,
                host text NOT NULL,
                finished integer NOT NULL DEFAULT 0,
                PRIMARY KEY (transaction_id, host)
            )
            """,
            "CREATE INDEX deliveries_unfinished ON deliveries(host, transaction_id) WHERE finished = 0",
            """
            CREATE TABLE fleet_queues (
                host text NOT NULL,
                account text NOT NULL,
                app text NOT NULL,
                since bigint NOT NULL,
                PRIMARY KEY (account, app, host)
            )
            """,
            "INSERT INTO fleet_queues(host, account, app, since) SELECT DISTINCT host, account, app, 0 FROM transactions",
            "CREATE SEQUENCE transaction_ids AS bigint INCREMENT BY \(Self.idBlock)",
        ] {
            try connection.execute(statement)
        }
        // Above every id given so far, and above the clock-based ids the SQLite ledger (and this
        // ledger before version 2) hands out, so that a ledger moved over keeps its ids.
        try connection.execute("""
            SELECT setval('transaction_ids', greatest(coalesce((SELECT max(id) FROM transactions), 0),
                coalesce((SELECT value::bigint FROM settings WHERE key = 'transactions.lastID'), 0), $1::bigint))
            """, [String(TransactionIDs.fromClock())])
    }
}
