import StoreKitStore

// The PostgreSQL schema: the SQLite ledger's tables (TransactionStore+Schema.swift) with the same
// columns and meanings, in versions kept in `storekit_schema`. Each migration runs in one
// transaction under an advisory lock, so that daemons starting together migrate once; a newer
// schema is refused.

extension PostgresLedger {
    /// Creates or upgrades the schema; says what it found.
    func migrate() throws(StoreError) -> String {
        try connection.execute("BEGIN")
        do throws(StoreError) {
            // 0x534B5144: "SKQD", the SQLite ledger's application id.
            try connection.execute("SELECT pg_advisory_xact_lock(1397440836)")
            try connection.execute("CREATE TABLE IF NOT EXISTS storekit_schema (version integer NOT NULL)")
            let found = Int(try connection.execute("SELECT max(version) FROM storekit_schema").firstInt ?? 0)
            guard found <= Self.schemaVersion else {
                throw StoreError(.unsupportedSchema(found: found, supported: Self.schemaVersion), path: path,
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
            if found < Self.schemaVersion {
                try connection.execute("DELETE FROM storekit_schema")
                try connection.execute("INSERT INTO storekit_schema(version) VALUES($1)", [String(Self.schemaVersion)])
            }
            try connection.execute("COMMIT")
            return found == 0 ? "created schema \(Self.schemaVersion)"
                : found < Self.schemaVersion ? "migrated schema \(found) → \(Self.schemaVersion)" : "schema \(found)"
        } catch {
            _ = try? connection.execute("ROLLBACK")
            throw error
        }
    }
}
