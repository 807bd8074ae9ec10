import Foundation
import StoreKitTestSupport
import StoreKitWire
import Testing

/// The real storekitd with `[Store] Database=` pointing at a real PostgreSQL (its own server per
/// test, started by the test, Unix socket only): purchases, a restart, and PostgreSQL going away.
@Suite(.enabled(if: PostgresServer.unavailableReason == nil, Comment(rawValue: PostgresServer.unavailableReason ?? "")))
struct PostgresLedgerFlowTests {
    /// A daemon whose ledger is `server`'s database `postgres` (a drop-in beside the sample config).
    private func daemon(on server: PostgresServer) throws -> DaemonProcess {
        let daemon = try DaemonProcess()
        try daemon.directory.write("config/storekitd.conf.d/ledger.conf", "[Store]\nDatabase=\(server.connectionString())\n")
        return daemon
    }

    /// A PostgreSQL of its own, a daemon on it, and a registered observer of the sample app;
    /// everything is stopped and removed when `body` returns.
    private func withRunningDaemon(_ body: (PostgresServer, DaemonProcess, Client) throws -> Void) throws {
        let server = try PostgresServer()
        defer { server.remove() }
        let daemon = try daemon(on: server)
        defer { daemon.remove() }
        try daemon.start()
        let buyer = try Client(daemon)
        #expect(try buyer.subscribe().isEmpty)
        try body(server, daemon, buyer)
    }

    @Test("a purchase and a finish land in PostgreSQL; after a restart nothing is lost and no SQLite file was made")
    func purchaseSurvivesRestart() throws {
        let server = try PostgresServer()
        defer { server.remove() }
        let daemon = try daemon(on: server)
        defer { daemon.remove() }
        try daemon.start()
        #expect(daemon.log().contains("Opened database PostgreSQL database postgres on \(server.socketDirectory) as host "))
        #expect(daemon.log().contains(": created schema \(2)"))
        #expect(try daemon.mappedFiles().contains { $0.hasSuffix("/libpq.so.5") || $0.contains("/libpq.so.5.") },
                "libpq is loaded when the configuration names a PostgreSQL ledger")

        let buyer = try Client(daemon)
        #expect(try buyer.subscribe().isEmpty)
        let coins = try buyer.buy(Sample.coins)
        let levelPack = try buyer.buy(Sample.levelPack)
        let repeated = try buyer.addPayment(Sample.coins, key: "tap-1")
        #expect(repeated.code == .ok)
        let again = try buyer.addPayment(Sample.coins, key: "tap-1")
        #expect(again.value == repeated.value, "the same payment key answers with the same transaction")
        #expect(try buyer.finish(coins.id).code == .ok)
        #expect(try server.sql("SELECT count(*) FROM transactions") == "3")
        #expect(try server.sql("SELECT finished FROM transactions WHERE id = \(coins.id)") == "1")
        buyer.close()

        #expect(daemon.stop() == 0)
        try daemon.start()
        #expect(daemon.log().contains(": schema 2"))
        let back = try Client(daemon)
        let unfinished = try back.subscribe()
        #expect(Set(unfinished.map(\.id)) == [levelPack.id, repeated.value])
        #expect(try daemon.transactions().count == 3)
        #expect(!FileManager.default.fileExists(atPath: daemon.databasePath), "the SQLite file is not used")
        // `storekitctl backup` copies the SQLite file only, and says what to use instead.
        let backup = try daemon.ctl(["backup", daemon.directory.file("copy.sqlite")])
        #expect(backup.status != 0)
        #expect(backup.stderr.contains("pg_dump"), "\(backup.stderr)")
        #expect(!FileManager.default.fileExists(atPath: daemon.directory.file("copy.sqlite")))
        // A new purchase after the restart takes an id above every earlier one.
        #expect(try back.buy(Sample.coins).id > max(coins.id, levelPack.id, repeated.value))
    }

    @Test("a write PostgreSQL refuses at the unit's COMMIT (sent with it, in one round trip) leaves the unit uncommitted: it runs again request by request, the refused payment is answered with its error, the others in it go through")
    func aWriteRefusedAtCommitIsIsolated() throws {
        try withRunningDaemon { server, daemon, buyer in
            // The ledger's disk is "full" for level packs only (SQLSTATE 53100), as PostgreSQL says it.
            _ = try server.sql("""
                CREATE FUNCTION refuse_packs() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                  IF NEW.product = 'com.example.game.level_pack' THEN
                    RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = '53100';
                  END IF;
                  RETURN NEW;
                END $$;
                CREATE TRIGGER refuse_packs BEFORE INSERT ON transactions FOR EACH ROW EXECUTE FUNCTION refuse_packs();
                """)
            // Both payments in one write: read in one turn, they are one unit of work.
            let coinsID = buyer.makeRequestID(), packID = buyer.makeRequestID()
            let frames = [ClientMessage.addPayment(.init(requestID: coinsID, key: "coins-1", productID: Sample.coins, quantity: 1)),
                          .addPayment(.init(requestID: packID, key: "pack-1", productID: Sample.levelPack, quantity: 1))]
                .flatMap { Frame.encode(body: $0.encode(version: buyer.connection.version)) }
            try buyer.connection.sendRaw(frames)
            var results: [UInt32: (ResultCode, String)] = [:]
            var purchased: [String] = []
            while results.count < 2 {
                switch try buyer.connection.receive() {
                case .result(let id, let code, _, _, let message): results[id] = (code, message)
                case .updated(let records): purchased += records.filter { $0.state == .purchased }.map(\.productID)
                default: continue
                }
            }
            #expect(results[coinsID]?.0 == .ok, "\(results)")
            #expect(results[packID]?.0 == .storageFull && results[packID]?.1.contains("No space left") == true, "\(results)")
            #expect(purchased.contains(Sample.coins) && !purchased.contains(Sample.levelPack))
            #expect(try server.sql("SELECT count(*) FROM transactions WHERE product = '\(Sample.coins)'") == "1")
            #expect(try server.sql("SELECT count(*) FROM transactions WHERE product = '\(Sample.levelPack)'") == "0")
            // The daemon runs on: the same payment again once the disk has room.
            _ = try server.sql("DROP TRIGGER refuse_packs ON transactions")
            #expect(try buyer.addPayment(Sample.levelPack, key: "pack-1").code == .ok)
        }
    }

    @Test("PostgreSQL stopped: payments are refused with storeUnreachable, observers stay connected, the daemon runs on; started again: payments go through")
    func postgresGoesAwayAndComesBack() throws {
        try withRunningDaemon { server, daemon, buyer in
            let before = try buyer.buy(Sample.levelPack)

            try server.stop()
            let refused = try buyer.addPayment(Sample.coins)
            #expect(refused.code == .storeUnreachable, "\(refused)")
            #expect(refused.message.contains("PostgreSQL"), "\(refused.message)")
            #expect(refused.updated.isEmpty, "nothing is said of a purchase that was not recorded")
            #expect(daemon.process?.isRunning == true)
            #expect(daemon.log().contains("is unreachable; requests are refused"))

            try server.start()
            var after: Reply?
            #expect(eventually(timeout: receiveTimeout) {
                let reply = try? buyer.addPayment(Sample.coins)
                after = reply
                return reply?.code == .ok
            }, "payments go through again on the same connection: \(String(describing: after))")
            #expect(try Set(buyer.unfinished().map(\.id)) == Set([before.id, after?.value].compactMap { $0 }))
            #expect(try server.sql("SELECT count(*) FROM transactions") == "2", "the refused payment left no row")
        }
    }

    @Test("no PostgreSQL at start: the daemon does not start, and says why")
    func noPostgresAtStart() throws {
        let nowhere = TemporaryDirectory("skpg-none")
        defer { nowhere.remove() }
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.directory.write("config/storekitd.conf.d/ledger.conf", "[Store]\nDatabase=host=\(nowhere.path) dbname=storekit\n")
        #expect(throws: DaemonError.self) { try daemon.start(timeout: 10) }
        #expect(daemon.log().contains("Failed to open database PostgreSQL database storekit on \(nowhere.path): cannot connect to PostgreSQL"),
                "\(daemon.log(tail: 5))")
        #expect(!FileManager.default.fileExists(atPath: daemon.databasePath), "no SQLite file instead")
    }

    @Test("PostgreSQL unreachable is said once in the journal and in STATUS=, and so is its return")
    func unreachableIsSaid() throws {
        let server = try PostgresServer()
        defer { server.remove() }
        let daemon = try daemon(on: server)
        let manager = try FakeServiceManager(directory: daemon.directory)
        defer { manager.stop(); daemon.directory.remove() }
        try manager.listen(clientPath: daemon.clientSocket, controlPath: daemon.controlSocket)
        try manager.start(Paths.binary("storekitd"), daemon.arguments, logPath: daemon.logPath)
        try #require(manager.waitFor(timeout: 15, after: 0) { $0.contains("READY=1") } != nil, "\(daemon.log(tail: 20))")
        let buyer = try Client(daemon)
        #expect(try buyer.subscribe().isEmpty)
        _ = try buyer.buy(Sample.coins)

        try server.stop()
        let before = manager.notifications.count
        for _ in 0..<3 { #expect(try buyer.addPayment(Sample.coins).code == .storeUnreachable) }
        #expect(manager.waitFor(after: before) { $0.contains("STATUS=") && $0.contains("DATABASE UNREACHABLE") } != nil,
                "\(manager.notifications.suffix(3))")
        #expect(daemon.log().components(separatedBy: "is unreachable; requests are refused").count == 2, "said once")
        // The fleet's LISTEN connection went with it.
        #expect(manager.waitFor(after: before) { $0.contains("STATUS=") && $0.contains("NOT HEARING THE FLEET") } != nil,
                "\(manager.notifications.suffix(3))")
        #expect(daemon.log().contains("Lost the fleet's notification connection"))
        for _ in 0..<5 { #expect(try buyer.addPayment(Sample.coins).code == .storeUnreachable) }
        // A StoreKit 2 app asking to buy meanwhile hears that the store cannot be reached.
        let app = try ProcessRunner.run(Paths.binary("storekit2-example-app"), ["buy", Sample.coins],
                                        environment: daemon.clientEnvironment, timeout: appTimeout)
        #expect(app.status != 0)
        #expect(app.stdout.contains("could not be reached") && !app.stdout.contains("unknown product"), "APP STDOUT \(app.stdout) \(app.stderr)")
        // STATUS= is one line (systemd keeps only the first: libpq's newlines would hide the rest),
        // says both, and never a count it does not know.
        let statuses = manager.notifications[before...].compactMap { $0.components(separatedBy: "STATUS=").dropFirst().first }
        #expect(statuses.contains { $0.contains("DATABASE UNREACHABLE") && $0.contains("NOT HEARING THE FLEET") }, "\(statuses)")
        for status in statuses {
            #expect(!status.contains("\n") && !status.contains("\r"), "STATUS= has a line break: \(status.debugDescription)")
            #expect(!status.contains("-1 unfinished"), "\(status)")
        }
        // The outage is said once: refused batches are not each an error.
        let errors = daemon.log().split(separator: "\n").filter { $0.contains("[error]") || $0.contains("[err]") }
        #expect(errors.count == 1, "\(errors)")
        #expect(!errors.contains { $0.hasSuffix("\\n") }, "a journal line ends in a literal \\n: \(errors)")

        try server.start()
        let back = manager.notifications.count
        #expect(eventually(timeout: receiveTimeout) { (try? buyer.addPayment(Sample.coins))?.code == .ok })
        #expect(manager.waitFor(after: back) { $0.contains("STATUS=Serving") && !$0.contains("UNREACHABLE") } != nil,
                "\(manager.notifications.suffix(3))")
        #expect(daemon.log().contains("is reachable again"))
        #expect(manager.waitFor(timeout: 20, after: back) { $0.contains("STATUS=Serving") && !$0.contains("UNREACHABLE") && !$0.contains("NOT HEARING") } != nil,
                "\(manager.notifications.suffix(3))")
        #expect(eventually(timeout: 20) { daemon.log().contains("Listening to the fleet on") })
    }

    @Test("PostgreSQL crashed and restarted twice under a purchase load: every acknowledged purchase is there once, nothing doubled")
    func crashUnderLoadLosesAndDoublesNothing() throws {
        try withRunningDaemon { server, daemon, buyer in

            let purchases = 300
            var acknowledged: [String: UInt64] = [:]
            var refused = 0
            let restarted = DispatchSemaphore(value: 0)
            for index in 0..<purchases {
                if index == 100 {
                    // A crash between purchases: PostgreSQL gone at once, back half a second later.
                    try server.stop(immediate: true)
                    Thread.detachNewThread { Thread.sleep(forTimeInterval: 0.5); try? server.start(); restarted.signal() }
                } else if index == 200 {
                    // A crash while purchases run: whatever commit is in flight may or may not have happened.
                    Thread.detachNewThread {
                        try? server.stop(immediate: true)
                        Thread.sleep(forTimeInterval: 0.3)
                        try? server.start()
                        restarted.signal()
                    }
                }
                // The app's way: the same payment key again until the store answers ok.
                let key = "load-\(index)"
                let deadline = Date().addingTimeInterval(20)
                while true {
                    let reply = try buyer.addPayment(Sample.coins, key: key)
                    if reply.code == .ok {
                        acknowledged[key] = reply.value
                        break
                    }
                    #expect(reply.code == .storeUnreachable, "\(reply)")
                    refused += 1
                    guard Date() < deadline else { throw IntegrationFailure("\(key) never went through: \(reply)") }
                    Thread.sleep(forTimeInterval: 0.02)
                }
            }
            #expect(restarted.wait(timeout: .now() + 20) == .success && restarted.wait(timeout: .now() + 20) == .success)
            #expect(refused > 0, "PostgreSQL's crashes refused some attempts")
            #expect(daemon.process?.isRunning == true)

            let rows = try server.sql("SELECT payment_key || ' ' || id FROM transactions ORDER BY id")
                .split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
            #expect(rows.count == purchases, "one row per purchase, \(refused) refused attempts retried")
            var stored: [String: UInt64] = [:]
            for row in rows where row.count == 2 { stored[row[0]] = UInt64(row[1]) }
            #expect(stored == acknowledged, "every acknowledged purchase is stored, under the id it was acknowledged with")
        }
    }
}
