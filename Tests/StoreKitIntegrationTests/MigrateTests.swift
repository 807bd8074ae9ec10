import Foundation
import StoreKitTestSupport
import StoreKitWire
import Testing

/// `storekitctl migrate CONNINFO` end to end: a real storekitd on its SQLite file copies its
/// ledger into a real PostgreSQL (started by the test, Unix socket only), keeps serving from
/// SQLite, and a daemon started on PostgreSQL as the same host finds what the first one had.
@Suite(.enabled(if: PostgresServer.unavailableReason == nil, Comment(rawValue: PostgresServer.unavailableReason ?? "")))
struct MigrateTests {
    /// A storekitd on SQLite (the default) or, with `database`, on PostgreSQL; this host is `host-a`.
    private static func daemon(database: String? = nil) throws -> DaemonProcess {
        let daemon = try DaemonProcess()
        try daemon.directory.write("config/storekitd.conf.d/host.conf",
                                   "[Store]\nHostName=host-a\n" + (database.map { "Database=\($0)\n" } ?? ""))
        return daemon
    }

    /// A PostgreSQL of its own and a running daemon on SQLite with an observer of the sample
    /// app, removed when `body` returns.
    private func withSQLiteDaemon(_ body: (PostgresServer, DaemonProcess, Client) throws -> Void) throws {
        let server = try PostgresServer()
        defer { server.remove() }
        let sqlite = try Self.daemon()
        defer { sqlite.remove() }
        try sqlite.start()
        let buyer = try Client(sqlite)
        #expect(try buyer.subscribe().isEmpty)
        try body(server, sqlite, buyer)
    }

    private static func tables(_ report: JSONObject) -> [String: JSONObject] {
        Dictionary(uniqueKeysWithValues: ((report["tables"] as? [JSONObject]) ?? []).map { ($0["table"] as? String ?? "", $0) })
    }

    /// The SHA-256 of the transactions this host copied, computed here from the rows in
    /// PostgreSQL with the canonical form docs/fleet.md states.
    private static func transactionsChecksum(_ server: PostgresServer) throws -> String {
        let text: Set = ["app", "product", "error_message", "app_username", "payment_key", "account", "host"]
        let columns = ["id", "original_id", "uid", "app", "product", "quantity", "state", "sequence", "date", "finished",
                       "error_code", "error_message", "revocation_date", "revocation_reason", "app_username",
                       "expires_date", "payment_key", "account", "host"]
        let line = columns.map { text.contains($0) ? "coalesce(octet_length(\($0)) || ':' || \($0), '-')" : "coalesce(\($0)::text, '-')" }
            .joined(separator: " || ',' || ")
        return try server.sql("""
            SELECT encode(sha256(convert_to(string_agg(\(line) || E'\\n', '' ORDER BY id), 'UTF8')), 'hex')
            FROM transactions WHERE host = 'host-a'
            """)
    }

    @Test("migrate copies every table in one verified transaction, twice copies nothing, and a daemon on PostgreSQL finds the same queue, history and higher ids")
    func migrateAndMoveOver() throws {
        try withSQLiteDaemon { server, sqlite, buyer in
            let coins = try buyer.buy(Sample.coins)
            let pack = try buyer.buy(Sample.levelPack)
            #expect(try buyer.finish(pack.id).code == .ok)
            let monthly = try buyer.buy(Sample.monthly)
            #expect(try buyer.finish(monthly.id).code == .ok)
            let clock = try sqlite.ctlObject(["clock", "advance", "1mo"])
            #expect((clock["firedEvents"] as? Int ?? 0) >= 1, "\(clock)")
            let asked = try buyer.request { id in
                .addPayment(.init(requestID: id, key: UUID().uuidString, productID: Sample.seasonPass, quantity: 1, simulatesAskToBuy: true))
            }
            #expect(asked.updated.last?.state == .deferred, "\(asked)")

            let queue = try Client(sqlite).subscribe()
            #expect(queue.contains { $0.id == coins.id } && queue.contains { $0.originalID == monthly.id }, "\(queue)")
            let history = try sqlite.transactions()

            let migrated = try sqlite.ctlObject(["migrate", server.connectionString()])
            let tables = Self.tables(migrated)
            #expect(migrated["database"] as? String == "PostgreSQL database postgres on \(server.socketDirectory)", "\(migrated)")
            #expect(migrated["host"] as? String == "host-a")
            #expect(migrated["present"] as? Int == 0 && (migrated["copied"] as? Int ?? 0) > history.count, "\(migrated)")
            #expect(tables["transactions"]?["copied"] as? Int == history.count, "\(tables)")
            let renewals = try #require(tables["renewals"]?["copied"] as? Int)
            #expect(renewals >= 1)
            #expect(tables["purchase_requests"]?["copied"] as? Int == 1)
            #expect(tables["subscriptions"]?["copied"] as? Int == 1)
            #expect(tables["fleet_queues"]?["copied"] as? Int == 1)

            // Counted and checked in PostgreSQL itself.
            #expect(try server.sql("SELECT count(*) FROM transactions WHERE host = 'host-a' AND changed_by = 'host-a'") == String(history.count))
            #expect(try server.sql("SELECT count(*) FROM renewals") == String(renewals))
            #expect(try server.sql("SELECT count(*) FROM transactions WHERE host = '' OR id IN (SELECT transaction_id FROM deliveries)") == "0",
                    "renewals made before the fleet stay in this host's queue")
            #expect(try server.sql("SELECT state FROM transactions t JOIN purchase_requests r ON r.transaction_id = t.id") == "4")
            #expect(try server.sql("SELECT host || ' ' || account || ' ' || app FROM fleet_queues") == "host-a root \(Sample.app)")
            #expect(try server.sql("SELECT account FROM subscriptions WHERE original_id = \(monthly.id)") == "root")
            #expect(try Self.transactionsChecksum(server) == tables["transactions"]?["checksum"] as? String)
            let highest = history.compactMap { UInt64($0.id) }.max() ?? 0
            #expect((UInt64(try server.sql("SELECT last_value FROM transaction_ids")) ?? 0) >= highest)

            // Again: nothing new, nothing copied, the same checksum.
            let again = try sqlite.ctlObject(["migrate", server.connectionString()])
            #expect(again["copied"] as? Int == 0 && again["present"] as? Int == migrated["copied"] as? Int, "\(again)")
            #expect((again["message"] as? String)?.hasPrefix("nothing copied") == true, "\(again)")
            #expect(again["checksum"] as? String == migrated["checksum"] as? String)
            let table = try sqlite.ctl(["migrate", server.connectionString()])
            #expect(table.status == 0 && table.stdout.contains("transactions") && table.stdout.contains("nothing copied"), "\(table.stdout)")
            // The connection string from standard input (`-`): no password in the process list.
            let piped = try ProcessRunner.run("/bin/sh", ["-c", "printf '%s\\n' \"$1\" | \"$0\" migrate -",
                                                          Paths.binary("storekitctl"), server.connectionString()],
                                              environment: sqlite.clientEnvironment)
            #expect(piped.status == 0 && piped.stdout.contains("nothing copied"), "\(piped.stdout) \(piped.stderr)")
            let empty = try ProcessRunner.run("/bin/sh", ["-c", "\"$0\" migrate - </dev/null", Paths.binary("storekitctl")],
                                              environment: sqlite.clientEnvironment)
            #expect(empty.status == 64 && empty.stderr.contains("no connection string on standard input"), "\(empty.stderr)")
            #expect(try server.sql("SELECT count(*) FROM transactions") == String(history.count))

            // SQLite is as it was and still serves: a purchase after migrate goes to SQLite only.
            #expect(try sqlite.transactions() == history)
            let later = try buyer.buy(Sample.coins)
            #expect(try sqlite.transactions().contains { $0.id == String(later.id) })
            #expect(try server.sql("SELECT count(*) FROM transactions WHERE id = \(later.id)") == "0")
            buyer.close()
            #expect(sqlite.stop() == 0)

            // Moving over: the same host on PostgreSQL.
            let postgres = try Self.daemon(database: server.connectionString())
            defer { postgres.remove() }
            try postgres.start()
            let onPostgres = try Client(postgres)
            #expect(try onPostgres.subscribe().map(\.id).sorted() == queue.map(\.id).sorted(), "the same unfinished queue")
            #expect(try postgres.transactions() == history, "the same history")
            let next = try onPostgres.buy(Sample.coins)
            #expect(next.id > highest, "ids above the copied ones")
            #expect(try server.sql("SELECT host FROM transactions WHERE id = \(next.id)") == "host-a")
        }
    }

    @Test("a row already in PostgreSQL with other content makes migrate refuse, naming it, with nothing copied")
    func conflictRefused() throws {
        try withSQLiteDaemon { server, sqlite, buyer in
            let first = try buyer.buy(Sample.levelPack)
            _ = try sqlite.ctlObject(["migrate", server.connectionString()])

            _ = try server.sql("UPDATE transactions SET quantity = 7 WHERE id = \(first.id)")
            let second = try buyer.buy(Sample.coins)
            let ids = try server.sql("SELECT last_value FROM transaction_ids")
            let refused = try sqlite.ctl(["migrate", server.connectionString()])
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("transaction \(first.id) is already in PostgreSQL database postgres"), "\(refused.stderr)")
            #expect(refused.stderr.contains("quantity 7 there, 1 here") && refused.stderr.contains("nothing was copied"), "\(refused.stderr)")
            #expect(try server.sql("SELECT count(*) FROM transactions WHERE id = \(second.id)") == "0", "nothing copied")
            #expect(try server.sql("SELECT last_value FROM transaction_ids") == ids)
            #expect(sqlite.log().contains("Migration of \(sqlite.databasePath) to PostgreSQL database postgres"))

            // The same payment key under another id is refused too.
            _ = try server.sql("UPDATE transactions SET quantity = 1 WHERE id = \(first.id)")
            let keyed = try buyer.addPayment(Sample.coins, key: "tap-1")
            _ = try server.sql("""
                INSERT INTO transactions(id, uid, app, product, quantity, state, sequence, date, account, host, changed_by, payment_key)
                VALUES(42, 0, '\(Sample.app)', '\(Sample.coins)', 1, 1, 1, 0, 'root', 'host-b', 'host-b', 'tap-1')
                """)
            let taken = try sqlite.ctl(["migrate", server.connectionString()])
            #expect(taken.status == 1 && taken.stderr.contains("transaction \(keyed.value)'s payment key is taken"), "\(taken.stderr)")
            #expect(try buyer.unfinished().contains { $0.id == second.id }, "the daemon serves on")
        }
    }

    @Test("a bad connection string, a stopped PostgreSQL and a daemon already on PostgreSQL are refused clearly, without the password")
    func refusals() throws {
        try withSQLiteDaemon { server, sqlite, _ in
            _ = try sqlite.buyOutsideApp(Sample.coins)

            let bad = try sqlite.ctl(["migrate", "host=\(server.socketDirectory) password=hunter2-secret bogus"])
            #expect(bad.status == 1 && bad.stderr.contains("bad connection string"), "\(bad.stderr)")
            #expect(!bad.stderr.contains("hunter2") && !sqlite.log().contains("hunter2"))
            let badURI = try sqlite.ctl(["migrate", "postgresql://storekit:hunter2-secret@/postgres?host=\(server.socketDirectory)&nosuch=1"])
            #expect(badURI.status == 1 && badURI.stderr.contains("bad connection string"), "\(badURI.stderr)")
            #expect(!badURI.stderr.contains("hunter2"), "\(badURI.stderr)")

            try server.stop()
            let stopped = try sqlite.ctl(["migrate", server.connectionString() + " password=hunter2-secret"])
            #expect(stopped.status == 1 && stopped.stderr.contains("cannot connect to PostgreSQL"), "\(stopped.stderr)")
            #expect(!stopped.stderr.contains("hunter2") && !sqlite.log().contains("hunter2"))
            #expect(try sqlite.buyOutsideApp(Sample.coins).state == "purchased", "the daemon serves on")
            try server.start()
            #expect(try server.sql("SELECT count(*) FROM pg_tables WHERE tablename = 'transactions'") == "0", "nothing half-made")

            let postgres = try Self.daemon(database: server.connectionString())
            defer { postgres.remove() }
            try postgres.start()
            let already = try postgres.ctl(["migrate", server.connectionString()])
            #expect(already.status == 1 && already.stderr.contains("already on PostgreSQL database postgres"), "\(already.stderr)")
        }
    }
}
