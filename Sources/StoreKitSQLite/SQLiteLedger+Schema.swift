import CSQLite
import StoreKitLedger
import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

// The schema and its migrations: each version in one immediate transaction, refused when newer.

extension SQLiteLedger {
    func migrate(from version: Int) throws(LedgerError) {
        try database.immediateTransaction { () throws(LedgerError) in
            if version < 1 {
                try database.execute("""
                    CREATE TABLE transactions (
                        id INTEGER PRIMARY KEY,
                        original_id INTEGER,
                        uid INTEGER NOT NULL,
                        app TEXT NOT NULL,
                        product TEXT NOT NULL,
                        quantity INTEGER NOT NULL,
                        state INTEGER NOT NULL,
                        sequence INTEGER NOT NULL,
                        date INTEGER NOT NULL,
                        finished INTEGER NOT NULL DEFAULT 0,
                        error_code INTEGER,
                        error_message TEXT,
                        revocation_date INTEGER,
                        revocation_reason INTEGER,
                        app_username TEXT,
                        expires_date INTEGER,
                        payment_key TEXT
                    );
                    CREATE INDEX transactions_unfinished ON transactions(uid, app, id) WHERE finished = 0;
                    CREATE INDEX transactions_queue ON transactions(uid, app, product);
                    CREATE UNIQUE INDEX transactions_payment_key ON transactions(uid, app, payment_key)
                        WHERE payment_key IS NOT NULL;
                    CREATE TABLE sequences (
                        uid INTEGER NOT NULL, app TEXT NOT NULL, last INTEGER NOT NULL,
                        PRIMARY KEY (uid, app)
                    ) WITHOUT ROWID;
                    CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
                    """)
            }
            if version < 2 {
                // v2: the simulated store's durable schedule. A subscription row is one buyer's
                // subscription in one group (renewals, expiry, billing retry); a purchase request is
                // an Ask to Buy awaiting a parent or an interrupted purchase awaiting resolution.
                // `due` / `expires` is when the next scheduled event fires on the store clock.
                try database.execute("""
                    CREATE TABLE subscriptions (
                        original_id INTEGER PRIMARY KEY,
                        uid INTEGER NOT NULL,
                        app TEXT NOT NULL,
                        group_id TEXT NOT NULL,
                        product TEXT NOT NULL,
                        quantity INTEGER NOT NULL,
                        app_username TEXT,
                        status INTEGER NOT NULL,
                        period_start INTEGER NOT NULL,
                        expires_date INTEGER NOT NULL,
                        auto_renew INTEGER NOT NULL,
                        next_product TEXT,
                        offer_periods_left INTEGER NOT NULL DEFAULT 0,
                        grace_end INTEGER,
                        retry_end INTEGER,
                        due INTEGER,
                        last_transaction INTEGER NOT NULL,
                        renewals INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE UNIQUE INDEX subscriptions_group ON subscriptions(uid, app, group_id);
                    CREATE INDEX subscriptions_due ON subscriptions(due) WHERE due IS NOT NULL;
                    CREATE TABLE purchase_requests (
                        transaction_id INTEGER PRIMARY KEY,
                        kind INTEGER NOT NULL,
                        uid INTEGER NOT NULL,
                        app TEXT NOT NULL,
                        product TEXT NOT NULL,
                        created INTEGER NOT NULL,
                        expires INTEGER
                    );
                    CREATE INDEX purchase_requests_product ON purchase_requests(uid, app, product, kind);
                    CREATE INDEX purchase_requests_due ON purchase_requests(expires) WHERE expires IS NOT NULL;
                    """)
            }
            if version < 3 {
                // v3: which transactions are renewals (a signed transaction's `transactionReason`),
                // recorded by the store when it renews a subscription.
                try database.execute("CREATE TABLE renewals (transaction_id INTEGER PRIMARY KEY)")
            }
            try database.execute("PRAGMA application_id=\(Self.applicationID)")
            try database.execute("PRAGMA user_version=\(Self.schemaVersion)")
        }
    }
}
