import Foundation
import StoreKitTestSupport
import StoreKitWire
import Testing

/// Two real storekitd daemons sharing one real PostgreSQL (started by the test, Unix socket only),
/// each with its own runtime and state directories and `HostName=`, standing in for two hosts of
/// a fleet. The same uid on both is the same account (`AccountFrom=user-name`, the default).
@Suite(.enabled(if: PostgresServer.unavailableReason == nil, Comment(rawValue: PostgresServer.unavailableReason ?? "")))
struct FleetTests {
    struct Fleet {
        let server: PostgresServer
        let a: DaemonProcess
        let b: DaemonProcess
    }

    private static func host(_ name: String, on server: PostgresServer) throws -> DaemonProcess {
        let daemon = try DaemonProcess()
        try daemon.directory.write("config/storekitd.conf.d/fleet.conf",
                                   "[Store]\nDatabase=\(server.connectionString())\nHostName=\(name)\n")
        return daemon
    }

    /// A PostgreSQL of its own and two daemons on it (host-a, host-b), removed when `body` returns.
    private func withFleet(startDaemons: Bool = true, _ body: (Fleet) throws -> Void) throws {
        let server = try PostgresServer()
        defer { server.remove() }
        let a = try Self.host("host-a", on: server)
        defer { a.remove() }
        let b = try Self.host("host-b", on: server)
        defer { b.remove() }
        if startDaemons {
            try a.start()
            try b.start()
        }
        try body(Fleet(server: server, a: a, b: b))
    }

    /// Reads pushes until one matches (each read waits at most the client's receive timeout).
    @discardableResult
    private func push(_ client: Client, _ what: String, where match: (ServerMessage) -> Bool) throws -> ServerMessage {
        for _ in 0..<100 {
            let message = try client.nextPush()
            if match(message) { return message }
        }
        throw IntegrationFailure("no push \(what)")
    }

    private func updated(_ message: ServerMessage) -> [TransactionRecord] {
        if case .updated(let records) = message { return records }
        return []
    }

    /// Buys the monthly subscription for each of `buyers` through A, stops both daemons, and
    /// moves the fleet's clock on `days` days, so that renewals fall due while the fleet is down.
    private func subscriptionsDueWhileDown(_ fleet: Fleet, buyers: [UInt32], days: Int64) throws {
        for uid in buyers {
            _ = try fleet.a.ctlOK(["buy", Sample.app, Sample.monthly, "--uid", String(uid)])
        }
        #expect(fleet.a.stop() == 0)
        #expect(fleet.b.stop() == 0)
        let offset = Int64(try fleet.server.sql("SELECT coalesce((SELECT value FROM settings WHERE key = 'clock.offset'), '0')")) ?? 0
        _ = try fleet.server.sql("""
            INSERT INTO settings(key, value) VALUES('clock.offset', '\(offset + days * 86_400_000)')
            ON CONFLICT (key) DO UPDATE SET value = excluded.value
            """)
    }

    /// Subscription periods that were renewed more than once.
    private func periodsRenewedTwice(_ fleet: Fleet) throws -> String {
        try fleet.server.sql("""
            SELECT count(*) FROM (SELECT original_id, date FROM transactions WHERE id IN (SELECT transaction_id FROM renewals)
            GROUP BY original_id, date HAVING count(*) > 1) AS twice
            """)
    }

    /// The `history` request: the account's transactions as this host's app sees them.
    private func history(_ client: Client) throws -> [TransactionRecord] {
        let id = client.makeRequestID()
        try client.connection.send(.history(requestID: id, afterID: 0))
        while true {
            switch try client.connection.receive() {
            case .transactions(let requestID, let records) where requestID == id: return records
            case .result(let requestID, let code, _, _, let message) where requestID == id:
                throw IntegrationFailure("history refused: \(code.name) \(message)")
            default: continue
            }
        }
    }

    @Test("a non-consumable bought through host A is restored through host B; A's consumable stays A's")
    func restoreOnAnotherHost() throws {
        try withFleet { fleet in
            let status = try fleet.b.ctlObject(["status"])
            #expect(status["host"] as? String == "host-b" && status["accountFrom"] as? String == "user-name", "\(status)")
            let onA = try Client(fleet.a)
            #expect(try onA.subscribe().isEmpty)
            let pack = try onA.buy(Sample.levelPack)
            let coins = try onA.buy(Sample.coins)
            #expect(try onA.finish(pack.id).code == .ok)

            let onB = try Client(fleet.b)
            #expect(try onB.subscribe().isEmpty, "A's purchases are in A's queue, not B's")
            // Finishing on B what A's queue holds (StoreKit 2 apps finish every update): done on
            // B, where nothing of it waits; it stays in A's queue for A's app.
            let notHers = try onB.finish(coins.id)
            #expect(notHers.code == .ok && notHers.removed.isEmpty, "\(notHers)")
            #expect(try onA.unfinished().map(\.id) == [coins.id], "and it stays in A's queue")
            let seenOnB = try history(onB)
            #expect(seenOnB.map(\.id) == [pack.id], "B's history has A's non-consumable, not A's consumable: \(seenOnB)")

            let restore = try onB.restore()
            #expect(restore.code == .ok && restore.value == 1, "\(restore)")
            let restored = try #require(restore.updated.first)
            #expect(restored.state == .restored && restored.productID == Sample.levelPack && restored.originalID == pack.id)
            #expect(try onB.unfinished().map(\.id) == [restored.id], "the restored transaction is in B's queue")
            #expect(try onA.unfinished().map(\.id) == [coins.id], "and not in A's")
            #expect(try onB.finish(restored.id).code == .ok)
            #expect(try onB.unfinished().isEmpty)
            #expect(try fleet.server.sql("SELECT host FROM transactions WHERE id = \(restored.id)") == "host-b")
        }
    }

    @Test("a renewal is fired once, by one daemon, and reaches the observers of both hosts; each finishes its own")
    func renewalReachesEveryHost() throws {
        try withFleet { fleet in
            let onA = try Client(fleet.a)
            _ = try onA.subscribe()
            let onB = try Client(fleet.b)
            _ = try onB.subscribe()
            let subscription = try onA.buy(Sample.monthly)
            #expect(try onA.finish(subscription.id).code == .ok)

            let clock = try fleet.a.ctlObject(["clock", "advance", "1mo"])
            #expect(clock["firedEvents"] as? Int == 1, "\(clock)")
            let renewal = try #require(updated(try push(onA, "of the renewal on A") { updated($0).contains { $0.originalID == subscription.id } }).first)
            let onBoth = updated(try push(onB, "of the renewal on B") { updated($0).contains { $0.id == renewal.id } })
            #expect(onBoth.first?.state == .purchased && onBoth.first?.finished == false)
            #expect(try fleet.server.sql("SELECT count(*) FROM renewals") == "1")
            #expect(try fleet.server.sql("SELECT count(*) FROM transactions WHERE original_id = \(subscription.id)") == "1")

            #expect(try onB.unfinished().map(\.id) == [renewal.id])
            #expect(try onB.finish(renewal.id).code == .ok)
            #expect(try onB.unfinished().isEmpty)
            #expect(try onA.unfinished().map(\.id) == [renewal.id], "finished on B, still in A's queue")
            #expect(try onA.finish(renewal.id).code == .ok)
            #expect(try onA.unfinished().isEmpty)

            // The clock is the fleet's: B, told by A's notification, is at A's time and fires the next one.
            let next = try fleet.b.ctlObject(["clock", "advance", "1mo"])
            #expect(next["firedEvents"] as? Int == 1, "\(next)")
            try push(onA, "of the second renewal on A") { updated($0).contains { $0.originalID == subscription.id && $0.id != renewal.id } }
            #expect(try fleet.server.sql("SELECT count(*) FROM renewals") == "2")
        }
    }

    @Test("due renewals found by two daemons starting at once are fired exactly once each (SKIP LOCKED)")
    func dueRenewalsFireOnceAcrossTheFleet() throws {
        try withFleet { fleet in
            // Forty subscriptions fall due while the fleet is down (the fleet's clock moves on 40 days).
            let buyers: [UInt32] = Array(2000..<2040)
            try subscriptionsDueWhileDown(fleet, buyers: buyers, days: 40)
            let failures = LockedValue<[String]>([])
            let (a, b) = (fleet.a, fleet.b)
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                do { try (index == 0 ? a : b).start() } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            #expect(failures.withLock { $0 }.isEmpty)
            // The free week and the first month have both passed: two renewals each, none twice.
            #expect(eventually(timeout: 30) { (try? fleet.server.sql("SELECT count(*) FROM renewals")) == String(buyers.count * 2) },
                    "\(String(describing: try? fleet.server.sql("SELECT count(*) FROM renewals")))")
            #expect(try periodsRenewedTwice(fleet) == "0", "no period renewed twice")
            #expect(try fleet.server.sql("SELECT count(*) FROM subscriptions WHERE renewals = 2") == String(buyers.count))
        }
    }

    @Test("a daemon killed (-9) while it fires due renewals: another daemon fires them, none lost, none doubled")
    func killedWhileFiring() throws {
        try withFleet { fleet in
            // A free week and three years of months fall due for sixty subscriptions: some 2,400
            // events, more than one unit of work fires (1,000), so the kill finds A mid-way.
            try subscriptionsDueWhileDown(fleet, buyers: Array(3000..<3060), days: 1_100)
            // A starts and is killed as soon as its first unit of work of renewals committed.
            let (process, exited) = try fleet.a.launch([Paths.binary("storekitd")] + fleet.a.arguments,
                                                        environment: ProcessInfo.processInfo.environment)
            #expect(eventually(timeout: 30) { (try? fleet.server.sql("SELECT count(*) FROM renewals")) != "0" })
            kill(process.processIdentifier, SIGKILL)
            _ = exited.wait(timeout: .now() + 10)
            let firedByA = Int(try fleet.server.sql("SELECT count(*) FROM renewals")) ?? -1
            try fleet.b.start()
            // Done when every subscription has the same number of renewals, none is due, and the
            // renewals are exactly those.
            func settled() -> Bool {
                guard let counts = try? fleet.server.sql("SELECT min(renewals) || ' ' || max(renewals) || ' ' || sum(renewals) FROM subscriptions"),
                      let made = try? fleet.server.sql("SELECT count(*) FROM renewals") else { return false }
                let parts = counts.split(separator: " ").compactMap { Int($0) }
                return parts.count == 3 && parts[0] == parts[1] && parts[0] >= 36 && String(parts[2]) == made
            }
            #expect(eventually(timeout: 120) { settled() },
                    "A fired \(firedByA) before it died; now \(String(describing: try? fleet.server.sql("SELECT min(renewals), max(renewals), (SELECT count(*) FROM renewals) FROM subscriptions")))")
            let total = Int(try fleet.server.sql("SELECT count(*) FROM renewals")) ?? 0
            #expect(firedByA < total, "the kill came before the last renewal (\(firedByA) of \(total))")
            #expect(try periodsRenewedTwice(fleet) == "0", "no period renewed twice")
            #expect(try fleet.server.sql("SELECT count(*) FROM transactions t JOIN renewals r ON r.transaction_id = t.id") == String(total),
                    "every renewal is a transaction")
        }
    }

    @Test("a refund made through host A revokes the product on host B")
    func refundOnOneHostRevokesOnTheOther() throws {
        try withFleet { fleet in
            let onA = try Client(fleet.a)
            _ = try onA.subscribe()
            let pack = try onA.buy(Sample.levelPack)
            #expect(try onA.finish(pack.id).code == .ok)
            let onB = try Client(fleet.b)
            _ = try onB.subscribe()

            _ = try fleet.a.ctlOK(["refund", String(pack.id)])
            let revoked = try push(onB, "revoking the level pack on B") {
                if case .entitlementsRevoked(let products) = $0 { return products == [Sample.levelPack] }
                return false
            }
            #expect(revoked == .entitlementsRevoked(productIDs: [Sample.levelPack]))
            let seenOnB = try history(onB)
            #expect(seenOnB.first { $0.id == pack.id }?.revocationDate != nil, "B's history has the revocation")
        }
    }

    @Test("an Ask to Buy request made on host B and approved through host A's control socket reaches B's observer")
    func askToBuyApprovedElsewhere() throws {
        try withFleet { fleet in
            let onB = try Client(fleet.b)
            _ = try onB.subscribe()
            let asked = try onB.request { id in
                .addPayment(.init(requestID: id, key: UUID().uuidString, productID: Sample.levelPack, quantity: 1,
                                  simulatesAskToBuy: true))
            }
            let deferred = try #require(asked.updated.last)
            #expect(deferred.state == .deferred)

            _ = try fleet.a.ctlOK(["approve", String(deferred.id)])
            let approved = updated(try push(onB, "of the approval on B") { updated($0).contains { $0.id == deferred.id } })
            #expect(approved.first?.state == .purchased)
            #expect(try onB.unfinished().map(\.id) == [deferred.id])
            #expect(try onB.finish(deferred.id).code == .ok)
        }
    }

    @Test("under a purchase load on both hosts, kill -9 of each daemon and a PostgreSQL restart lose and duplicate nothing")
    func killsAndRestartUnderLoad() throws {
        try withFleet { fleet in
            // Each buyer keeps buying until every fault is over and it has made at least `perHost`
            // purchases, so each fault meets both buyers mid-load whichever host runs faster.
            let perHost = 200
            let told = LockedValue<(acknowledged: [String: UInt64], stray: [String], retries: [Int], faultsOver: Bool)>(
                ([:], [], [0, 0], false))
            let threads = ClientThreads()
            for (index, daemon) in [fleet.a, fleet.b].enumerated() {
                threads.spawn("buyer on host \(index)") {
                    var client: Client?
                    var number = 0
                    while number < perHost || !told.withLock({ $0.faultsOver }) {
                        let key = "host\(index)-\(number)"
                        number += 1
                        let deadline = Date().addingTimeInterval(60)
                        while Date() < deadline {
                            do {
                                if client == nil { client = try Client(daemon) }
                                let reply = try client!.addPayment(Sample.coins, key: key)
                                if reply.code == .ok {
                                    told.withLock { told in
                                        if let earlier = told.acknowledged[key], earlier != reply.value {
                                            told.stray.append("\(key): \(earlier) then \(reply.value)")
                                        }
                                        told.acknowledged[key] = reply.value
                                    }
                                    break
                                }
                                told.withLock { $0.retries[index] += 1 }
                                Thread.sleep(forTimeInterval: 0.05)   // refused (PostgreSQL away): the same key again
                            } catch {
                                told.withLock { $0.retries[index] += 1 }
                                client?.close()
                                client = nil
                                Thread.sleep(forTimeInterval: 0.1)
                            }
                        }
                    }
                    client?.close()
                }
            }
            /// Waits until each host has `count` more acknowledgements than now.
            func waitForMoreAcknowledged(_ count: Int, before fault: String) {
                func perHostCounts() -> [Int] {
                    told.withLock { told in (0..<2).map { host in told.acknowledged.keys.count { $0.hasPrefix("host\(host)-") } } }
                }
                let start = perHostCounts()
                #expect(eventually(timeout: 60) { zip(perHostCounts(), start).allSatisfy { $0 - $1 >= count } },
                        "both hosts buy before \(fault): \(perHostCounts()) from \(start)")
            }
            waitForMoreAcknowledged(30, before: "kill -9 of host A")
            fleet.a.kill()
            try fleet.a.start()
            waitForMoreAcknowledged(30, before: "the PostgreSQL crash")
            try fleet.server.stop(immediate: true)
            Thread.sleep(forTimeInterval: 0.5)
            try fleet.server.start()
            waitForMoreAcknowledged(30, before: "kill -9 of host B")
            fleet.b.kill()
            try fleet.b.start()
            waitForMoreAcknowledged(10, before: "the end of the load")
            told.withLock { $0.faultsOver = true }
            #expect(threads.join(timeout: 120))
            let (acknowledged, stray, retries, _) = told.withLock { $0 }
            #expect(retries.allSatisfy { $0 > 0 }, "both hosts' buyers met the faults: \(retries)")
            #expect(stray.isEmpty, "\(stray)")
            #expect((0..<2).allSatisfy { host in acknowledged.keys.count { $0.hasPrefix("host\(host)-") } >= perHost })
            let rows = try fleet.server.sql("SELECT payment_key || '=' || id FROM transactions WHERE payment_key IS NOT NULL ORDER BY 1")
                .split(separator: "\n").map(String.init)
            #expect(rows.count == acknowledged.count, "every acknowledged purchase once, nothing else: \(rows.count) rows of \(acknowledged.count)")
            let stored = Dictionary(uniqueKeysWithValues: rows.map { row in
                let parts = row.split(separator: "=")
                return (String(parts[0]), UInt64(parts[1]) ?? 0)
            })
            #expect(stored == acknowledged, "each under the id it was acknowledged with")
            #expect(try fleet.server.sql("SELECT count(DISTINCT id) FROM transactions") == String(acknowledged.count))
        }
    }

    @Test("the same payment keys sent to both hosts at once: one transaction each, and both hosts answer with its id")
    func samePaymentKeysOnBothHosts() throws {
        try withFleet { fleet in
            // Three clients a host, each sending its share of the keys in order; the hosts send the
            // same keys at the same time. The read-ahead locks the queue's sequence row before it
            // looks the keys up, so the later host's unit reads the earlier's committed row; only
            // while the queue has no sequence row yet (its first purchases) can both insert, and
            // then the later's deferred insert fails and its unit runs again (ReadAheadTests).
            let keys = (0..<150).map { "both-\($0)" }
            let answers = LockedValue<[[String: UInt64]]>([[:], [:]])
            let failures = LockedValue<[String]>([])
            let start = DispatchSemaphore(value: 0)
            let threads = ClientThreads()
            for (host, daemon) in [fleet.a, fleet.b].enumerated() {
                for lane in 0..<3 {
                    threads.spawn("host \(host) lane \(lane)") {
                        do {
                            let client = try Client(daemon)
                            defer { client.close() }
                            start.wait()
                            for (index, key) in keys.enumerated() where index % 3 == lane {
                                let reply = try client.addPayment(Sample.coins, key: key)
                                guard reply.code == .ok else {
                                    failures.withLock { $0.append("\(key) on host \(host): \(reply.code.name) \(reply.message)") }
                                    continue
                                }
                                answers.withLock { $0[host][key] = reply.value }
                            }
                        } catch {
                            failures.withLock { $0.append("host \(host) lane \(lane): \(error)") }
                        }
                    }
                }
            }
            for _ in 0..<6 { start.signal() }
            #expect(threads.join(timeout: 120))
            #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
            let (onA, onB) = answers.withLock { ($0[0], $0[1]) }
            #expect(onA.count == keys.count && onB.count == keys.count)
            #expect(onA == onB, "each key answered with one id on both hosts")
            let rows = try fleet.server.sql("SELECT count(*) || ' ' || count(DISTINCT payment_key) FROM transactions WHERE payment_key LIKE 'both-%'")
            #expect(rows == "\(keys.count) \(keys.count)", "one row a key")
        }
    }

    @Test("a refund on host A takes back B's restored copy: storekitctl entitlements and StoreKit 2's currentEntitlements on B lose it")
    func refundRevokesRestoredCopyElsewhere() throws {
        try withFleet { fleet in
            let onA = try Client(fleet.a)
            _ = try onA.subscribe()
            let pack = try onA.buy(Sample.levelPack)
            #expect(try onA.finish(pack.id).code == .ok)
            let onB = try Client(fleet.b)
            _ = try onB.subscribe()
            let restored = try onB.restore()
            let copy = try #require(restored.updated.first { $0.productID == Sample.levelPack && $0.state == .restored }, "\(restored)")
            #expect(try onB.finish(copy.id).code == .ok)
            func entitledOnB() throws -> [String] {
                let listed = try fleet.b.ctlOK(["entitlements", Sample.app]) as? [[String: Any]] ?? []
                return listed.compactMap { $0["productIdentifier"] as? String }
            }
            #expect(try entitledOnB().contains(Sample.levelPack))

            _ = try fleet.a.ctlOK(["refund", String(pack.id)])
            #expect(try !entitledOnB().contains(Sample.levelPack), "B still entitles through its restored copy")
            #expect(try !fleet.b.storeKit2List("entitlements").contains(String(copy.id)))
            #expect(try !fleet.b.storeKit2List("entitlements").contains(String(pack.id)))
            #expect(try !fleet.a.storeKit2List("entitlements").contains(String(pack.id)))
            let seenOnB = try history(onB)
            #expect(seenOnB.first { $0.id == copy.id }?.revocationDate != nil, "B's history has its copy revoked")
        }
    }

    @Test("a purchase made on host A: StoreKit 2's Transaction.updates on host B announces it, B's entitlements include it; StoreKit 1's queue on B does not get it; a consumable stays A's")
    func purchasesElsewhereReachStoreKit2() throws {
        try withFleet { fleet in
            let storeKit2 = try StoreKit2App(fleet.b)
            defer { storeKit2.stop() }
            let storeKit1 = try fleet.b.observer()
            defer { storeKit1.stop() }
            let onA = try Client(fleet.a)
            _ = try onA.subscribe()
            let coins = try onA.buy(Sample.coins)
            let pack = try onA.buy(Sample.levelPack)

            #expect(storeKit2.waitForUpdate { $0[string: "transactionIdentifier"] == String(pack.id) }, "\(storeKit2.transcript)")
            #expect(try fleet.b.storeKit2List("entitlements").contains(String(pack.id)))
            #expect(try onA.finish(pack.id).code == .ok)
            // What B's apps heard by now: the level pack once, on StoreKit 2 only; nothing of the coins.
            let marker = try onA.buy(Sample.seasonPass)
            #expect(storeKit2.waitForUpdate { $0[string: "transactionIdentifier"] == String(marker.id) })
            #expect(storeKit2.updates(of: String(pack.id)).count == 1, "A finishing its own purchase is not news: \(storeKit2.transcript)")
            #expect(storeKit2.updates(of: String(coins.id)).isEmpty, "a consumable stays where it was bought")
            #expect(updates(storeKit1.output).isEmpty, "StoreKit 1's queue on B holds none of A's purchases: \(storeKit1.transcript)")
            // Apple's sample finishes every update, A's purchases too: done, quietly.
            #expect(!storeKit2.transcript.contains("finishing transaction"), "\(storeKit2.transcript)")
            #expect(try onA.unfinished().map(\.id).contains(coins.id), "A's consumable stays in A's queue")
        }
    }
}
