import Foundation
import StoreKitLedger
import StoreKitSQLite
import StoreKitTestSupport
import StoreKitWire
import Testing

/// Schemas v2 (the store's schedule) and v3 (renewals) upgrade a v1 database in place.
@Suite struct SchemaMigrationTests {
    /// The v1 schema exactly as the first release created it.
    static let version1 = """
        CREATE TABLE transactions (
            id INTEGER PRIMARY KEY, original_id INTEGER, uid INTEGER NOT NULL, app TEXT NOT NULL,
            product TEXT NOT NULL, quantity INTEGER NOT NULL, state INTEGER NOT NULL, sequence INTEGER NOT NULL,
            date INTEGER NOT NULL, finished INTEGER NOT NULL DEFAULT 0, error_code INTEGER, error_message TEXT,
            revocation_date INTEGER, revocation_reason INTEGER, app_username TEXT, expires_date INTEGER,
            payment_key TEXT
        );
        CREATE INDEX transactions_unfinished ON transactions(uid, app, id) WHERE finished = 0;
        CREATE INDEX transactions_queue ON transactions(uid, app, product);
        CREATE UNIQUE INDEX transactions_payment_key ON transactions(uid, app, payment_key) WHERE payment_key IS NOT NULL;
        CREATE TABLE sequences (uid INTEGER NOT NULL, app TEXT NOT NULL, last INTEGER NOT NULL, PRIMARY KEY (uid, app)) WITHOUT ROWID;
        CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        INSERT INTO transactions(id, uid, app, product, quantity, state, sequence, date)
            VALUES (2000000000000001, 1000, 'com.example.game', 'com.example.game.premium.yearly', 1, 1, 2, 1700000000000);
        INSERT INTO sequences VALUES (1000, 'com.example.game', 2);
        INSERT INTO settings VALUES ('clock.offset', '5000');
        PRAGMA application_id = \(SQLiteLedger.applicationID);
        PRAGMA user_version = 1;
        """

    @Test func version1DatabaseIsUpgradedInPlace() throws {
        let directory = TemporaryDirectory("skmigrate")
        defer { directory.remove() }
        let path = directory.file("storekitd.sqlite")
        do {
            let database = try SQLiteDatabase(path: path)
            try database.execute(Self.version1)
        }

        let kept: TransactionRecord
        do {
            let store = try SQLiteLedger(path: path)
            #expect(store.openReport == "migrated schema 1 → 3")
            #expect(try store.database.scalarInt("PRAGMA user_version") == 3)
            kept = try #require(try store.transaction(id: 2_000_000_000_000_001))
            #expect(kept.productID == "com.example.game.premium.yearly" && kept.sequence == 2)
            #expect(try store.setting("clock.offset") == "5000")

            // The new tables work, and counters carry on from the old data.
            try store.begin()
            #expect(store.allocateTransactionID() > 2_000_000_000_000_001)
            #expect(try store.nextSequence(uid: 1000, app: "com.example.game") == 3)
            try store.upsert(Subscription(
                originalID: kept.id, uid: 1000, app: "com.example.game", groupID: "G", productID: kept.productID,
                quantity: 1, periodStart: kept.date, expiresDate: kept.date + 1000, due: kept.date + 1000,
                lastTransactionID: kept.id))
            try store.markRenewal(transactionID: kept.id)
            try store.commit()
            #expect(try store.nextDueTime() == kept.date + 1000)
        }
        // The store was dropped before a flush: its unit of work comes back from the commit log.
        let reopened = try SQLiteLedger(path: path)
        #expect(reopened.openReport == "schema 3; applied 1 unit of work from the commit log")
        #expect(try reopened.subscription(originalID: kept.id)?.groupID == "G")
        #expect(try reopened.isRenewal(transactionID: kept.id))
        #expect(try !reopened.isRenewal(transactionID: kept.id + 1))
    }
}
