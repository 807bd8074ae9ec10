import Foundation
import StoreKitTestSupport
import StoreKitWire
import Testing

/// The fleet's trust boundary (docs/fleet.md, "Who may do what"): a role that can connect may
/// NOTIFY on the fleet's channel, and that only wakes the daemons, which then read the rows; the
/// daemons themselves need no more than the least-privilege role the docs give.
@Suite(.enabled(if: PostgresServer.unavailableReason == nil, Comment(rawValue: PostgresServer.unavailableReason ?? "")))
struct FleetTrustTests {
    private static func host(_ name: String, conninfo: String) throws -> DaemonProcess {
        let daemon = try DaemonProcess()
        try daemon.directory.write("config/storekitd.conf.d/fleet.conf", "[Store]\nDatabase=\(conninfo)\nHostName=\(name)\n")
        return daemon
    }

    /// What host B shows of uid 0's queue: unfinished ids, history ids with their revocation, entitlements.
    private static func snapshot(_ daemon: DaemonProcess) throws -> String {
        let unfinished = try daemon.ctl(["transactions", "-o", "json"]).stdout
        let history = try daemon.ctl(["history", Sample.app, "-o", "json"]).stdout
        let entitled = try daemon.ctl(["entitlements", Sample.app, "-o", "json"]).stdout
        func ids(_ json: String) -> [String] {
            let array = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [[String: Any]] ?? []
            return array.map { "\($0["transactionIdentifier"] ?? "?")/\($0["state"] ?? "?")/\($0["revocationDate"] ?? "-")" }.sorted()
        }
        return "unfinished \(ids(unfinished)); history \(ids(history)); entitlements \(ids(entitled))"
    }

    @Test("forged and garbage NOTIFYs on the fleet's channel only wake the hosts: nothing is pushed, nothing changes, real changes still arrive")
    func forgedNotificationsChangeNothing() throws {
        let server = try PostgresServer()
        defer { server.remove() }
        let a = try Self.host("host-a", conninfo: server.connectionString())
        defer { a.remove() }
        let b = try Self.host("host-b", conninfo: server.connectionString())
        defer { b.remove() }
        try a.start()
        try b.start()
        let onB = try Client(b)
        _ = try onB.subscribe()
        _ = try a.ctlOK(["buy", Sample.app, Sample.levelPack])
        _ = try b.ctlOK(["buy", Sample.app, Sample.coins])
        // Let what those caused reach B's observer, then read it all.
        Thread.sleep(forTimeInterval: 1)
        _ = try onB.request { .ping(requestID: $0) }
        let before = try Self.snapshot(b)

        let channel = "'storekit_fleet_' || left(md5(current_schema()), 12)"
        let forged = [
            "host-a\n0\t\(Sample.app)",             // a queue that exists, nothing changed in it
            "host-a\nroot\t\(Sample.app)",          // the same by account name
            "host-a\n*",                            // "everything changed": settings and schedule reread
            "host-b\n*",                            // claims to be B itself
            "garbage", "", "\n\n\n", "\t", "host-a\n" + String(repeating: "x\ty\n", count: 1_900),
            "host-a\n\(String(repeating: "é", count: 3_000))",
        ]
        for payload in forged {
            _ = try server.sql("SELECT pg_notify(\(channel), $$\(payload)$$)")
        }
        _ = try server.sql("SELECT pg_notify(\(channel), 'host-z' || chr(10) || md5(random()::text)) FROM generate_series(1, 2000)")
        Thread.sleep(forTimeInterval: 1.5)
        let reply = try onB.request { .ping(requestID: $0) }
        #expect(reply.code == .ok)
        #expect(reply.pushes.isEmpty, "B's observer was told of something: \(reply.pushes)")
        #expect(try Self.snapshot(b) == before)
        #expect(try Self.snapshot(a) != "", "A serves on")

        // A real change after all that still reaches B's observer.
        let refunded = try a.ctlOK(["history", Sample.app]) as? [[String: Any]] ?? []
        let pack = try #require(refunded.first { $0["productIdentifier"] as? String == Sample.levelPack }?["transactionIdentifier"])
        _ = try a.ctlOK(["refund", "\(pack)"])
        var told = false
        for _ in 0..<50 where !told {
            guard let message = try? onB.nextPush() else { break }
            if case .entitlementsRevoked(let products) = message, products == [Sample.levelPack] { told = true }
        }
        #expect(told, "the refund on A reached B's observer")
        let errors = b.log().split(separator: "\n").filter { $0.contains("[error]") || $0.contains("[err]") }
        #expect(errors.isEmpty, "\(errors)")
    }

    @Test("daemons run on the least-privilege role of docs/fleet.md, once the owner made the schema; that role cannot change the schema")
    func leastPrivilegeRole() throws {
        let server = try PostgresServer()
        defer { server.remove() }
        // The owner (the test server's superuser here; an owner role in production) makes the schema.
        let owner = try Self.host("host-owner", conninfo: server.connectionString())
        defer { owner.remove() }
        try owner.start()
        #expect(owner.stop() == 0)
        // The SQL docs/fleet.md gives, word for word.
        try server.sql("""
            CREATE ROLE storekitd LOGIN;
            GRANT USAGE ON SCHEMA public TO storekitd;
            GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO storekitd;
            GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO storekitd;
            """)
        let limited = server.connectionString(user: "storekitd")
        let a = try Self.host("host-a", conninfo: limited)
        defer { a.remove() }
        let b = try Self.host("host-b", conninfo: limited)
        defer { b.remove() }
        try a.start()
        try b.start()
        let onA = try Client(a)
        _ = try onA.subscribe()
        let pack = try onA.buy(Sample.levelPack)
        #expect(try onA.finish(pack.id).code == .ok)
        let coins = try onA.buy(Sample.coins)
        #expect(try onA.finish(coins.id).code == .ok)
        let onB = try Client(b)
        _ = try onB.subscribe()
        let restored = try onB.restore()
        #expect(restored.code == .ok)
        #expect(restored.updated.contains { $0.productID == Sample.levelPack && $0.state == .restored }, "\(restored)")
        #expect(try b.ctl(["clock", "advance", "1d"]).status == 0)
        for statement in ["DROP TABLE transactions", "ALTER TABLE transactions ADD COLUMN x int", "CREATE TABLE x (y int)",
                          "TRUNCATE transactions"] {
            #expect(throws: (any Error).self, "\(statement) was allowed") {
                try server.sql(statement, user: "storekitd")
            }
        }
    }
}
