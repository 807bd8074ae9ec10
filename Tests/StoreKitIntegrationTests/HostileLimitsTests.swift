import Foundation
import StoreKitConnection
import StoreKitPosix
import StoreKitTestSupport
import StoreKitWire
import Testing

/// The limits a hostile local user meets, through the real daemon: output bounded while it is
/// produced, a daemon-wide output budget, a send timeout, control capacity of its own, a hello
/// deadline, a request rate and an unfinished-transaction quota per uid.
@Suite("hostile limits")
struct HostileLimitsTests {
    static func daemon(limits: String) throws -> DaemonProcess {
        let daemon = try DaemonProcess()
        try "[Limits]\n\(limits)\n".write(toFile: daemon.configFile, atomically: true, encoding: .utf8)
        try daemon.start()
        return daemon
    }

    /// `count` unfinished purchases of the level pack by this uid, each with an applicationUsername
    /// of `bytes` bytes: what makes every `unfinished` answer large.
    static func holdLargePurchases(_ daemon: DaemonProcess, count: Int, bytes: Int) throws {
        let buyer = try Client(daemon)
        defer { buyer.close() }
        _ = try buyer.subscribe()
        for _ in 0..<count {
            let reply = try buyer.request { id in
                .addPayment(.init(requestID: id, key: UUID().uuidString, productID: Sample.levelPack, quantity: 1,
                                  applicationUsername: String(repeating: "u", count: bytes)))
            }
            #expect(reply.code == .ok, "\(reply.code.name) \(reply.message)")
        }
    }

    /// The daemon's resident set in bytes.
    static func rss(_ daemon: DaemonProcess) -> Int {
        guard let pid = daemon.process?.processIdentifier,
              let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
        return (Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) * 1024
    }

    /// Many requests written at once on one connection, never read.
    static func pipeline(_ connection: WireConnection, _ make: (UInt32) -> ClientMessage, count: Int) throws {
        var bytes: [UInt8] = []
        for index in 0..<count { Frame.append(body: make(UInt32(index + 1000)).encode(), to: &bytes) }
        try connection.sendRaw(bytes)
    }

    /// Whether the peer closed `fd` within `seconds`, seen without reading from it.
    static func hungUp(_ fd: Int32, within seconds: Double) -> Bool {
        var descriptor = pollfd(fd: fd, events: Int16(0x2000), revents: 0)   // POLLRDHUP (Linux), not exported to Swift
        guard poll(&descriptor, 1, Int32(seconds * 1000)) > 0 else { return false }
        return descriptor.revents & Int16(0x2000 | POLLHUP) != 0
    }

    /// How long a ping of a fresh client takes, in seconds.
    static func pingTime(_ daemon: DaemonProcess) throws -> Double {
        let client = try Client(daemon)
        defer { client.close() }
        let started = Date()
        #expect(try client.request { .ping(requestID: $0) }.code == .ok)
        return Date().timeIntervalSince(started)
    }

    @Test("8 large unfinished transactions and 128 pipelined `unfinished` never read: memory stays bounded, others are served")
    func amplificationBounded() throws {
        let daemon = try Self.daemon(limits: "MaxApplicationUsernameLength=1M\nOutputHighWaterMark=1M\nSendTimeoutSec=3s")
        defer { daemon.remove() }
        try Self.holdLargePurchases(daemon, count: 8, bytes: 256 << 10)
        let before = Self.rss(daemon)
        // Each answer is 2 MB; 128 of them would be 256 MB.
        let attacker = try daemon.connect()
        try Self.pipeline(attacker, { .unfinished(requestID: $0) }, count: 128)
        #expect(try Self.pingTime(daemon) < 1.0)
        // The attacker's requests wait for it to read; it does not (watched without reading), and is cut off.
        #expect(Self.hungUp(attacker.fd, within: 15))
        let grown = Self.rss(daemon) - before
        #expect(grown < 64 << 20, "the daemon grew by \(grown >> 20) MB")
        #expect(daemon.log().contains("Cut off"))
        #expect(try Self.pingTime(daemon) < 1.0)
    }

    @Test("an applicationUsername over MaxApplicationUsernameLength= fails the payment with paymentInvalid")
    func usernameLimit() throws {
        let daemon = try Self.daemon(limits: "MaxApplicationUsernameLength=64")
        defer { daemon.remove() }
        let client = try Client(daemon)
        let long = try client.request { id in
            .addPayment(.init(requestID: id, key: UUID().uuidString, productID: Sample.coins, quantity: 1,
                              applicationUsername: String(repeating: "x", count: 65)))
        }
        #expect(long.code == .storeKit && long.detail == 3, "\(long.code.name) \(long.detail) \(long.message)")
        #expect(long.message.contains("MaxApplicationUsernameLength="))
        let fits = try client.request { id in
            .addPayment(.init(requestID: id, key: UUID().uuidString, productID: Sample.coins, quantity: 1,
                              applicationUsername: String(repeating: "x", count: 64)))
        }
        #expect(fits.code == .ok)
    }

    @Test("over OutputBudget= the connections holding the most unread output are cut off")
    func outputBudget() throws {
        let daemon = try Self.daemon(limits: "MaxApplicationUsernameLength=1M\nOutputHighWaterMark=4M\nOutputBudget=3M")
        defer { daemon.remove() }
        try Self.holdLargePurchases(daemon, count: 4, bytes: 256 << 10)
        // Four connections, each asking four times for a page of 256 KB it never reads: 4 MB in
        // all, over the budget.
        let readers = try (0..<4).map { _ in try daemon.connect() }
        for reader in readers { try Self.pipeline(reader, { .unfinished(requestID: $0) }, count: 4) }
        #expect(eventually { daemon.log().contains("is over OutputBudget=") })
        #expect(readers.contains { HostileClientTests.closedByDaemon($0.fd, within: 2) })
        #expect(try Self.pingTime(daemon) < 1.0)
    }

    @Test("over OutputBudget= the uid holding the most loses first: many small unread connections of one uid, not another uid's one slow reader",
          .enabled(if: getuid() == 0, "needs root to connect as other uids"))
    func outputBudgetByUID() throws {
        let daemon = try Self.daemon(limits: "MaxApplicationUsernameLength=1M\nOutputHighWaterMark=8M\nOutputBudget=3M")
        defer { daemon.remove() }
        daemon.openDirectoriesToOtherUsers()
        let (spreader, slow): (UInt32, UInt32) = (4301, 4302)
        func hold(_ uid: UInt32, bytes: Int) throws {
            let buyer = try Client(daemon, asUID: uid)
            defer { buyer.close() }
            let reply = try buyer.request { id in
                .addPayment(.init(requestID: id, key: UUID().uuidString, productID: Sample.levelPack, quantity: 1,
                                  applicationUsername: String(repeating: "u", count: bytes)))
            }
            #expect(reply.code == .ok, "\(reply.code.name) \(reply.message)")
        }
        try hold(slow, bytes: 640 << 10)
        try hold(slow, bytes: 640 << 10)
        try hold(spreader, bytes: 256 << 10)
        // The slow reader: one connection, two pages of 640 KB it does not read yet. Then the
        // spreader: 14 connections, each two pages of 256 KB: less per connection than the slow
        // reader, three times as much in all.
        let reader = try connectWithThreadUID(slow, path: daemon.clientSocket)
        _ = try reader.hello(app: Sample.app)
        try Self.pipeline(reader, { .unfinished(requestID: $0) }, count: 2)
        Thread.sleep(forTimeInterval: 0.3)
        var spread: [WireConnection] = []
        for _ in 0..<14 {
            let connection = try connectWithThreadUID(spreader, path: daemon.clientSocket)
            _ = try connection.hello(app: Sample.app)
            try Self.pipeline(connection, { .unfinished(requestID: $0) }, count: 2)
            spread.append(connection)
        }
        #expect(eventually { daemon.log().contains("is over OutputBudget=") })
        #expect(spread.contains { HostileClientTests.closedByDaemon($0.fd, within: 2) }, "the spreader kept every connection")
        #expect(!Self.hungUp(reader.fd, within: 0.5), "the slow reader of the other uid was cut off")
        #expect(daemon.log().contains("uid \(spreader) held the most unread"), "\(daemon.log())")
        #expect(!daemon.log().contains("uid \(slow) held the most unread"))
        // The slow reader gets its whole answer once it reads.
        reader.setReceiveTimeout(10)
        guard case .transactions(_, let records)? = try? reader.receive() else {
            Issue.record("the slow reader got no answer")
            return
        }
        #expect(records.first?.applicationUsername?.utf8.count == 640 << 10, "a page of the slow reader's own large purchases")
    }

    @Test("a connection that reads none of its output for SendTimeoutSec= is closed")
    func sendTimeout() throws {
        let daemon = try Self.daemon(limits: "MaxApplicationUsernameLength=1M\nSendTimeoutSec=1s")
        defer { daemon.remove() }
        try Self.holdLargePurchases(daemon, count: 2, bytes: 512 << 10)
        let stalled = try daemon.connect()
        try Self.pipeline(stalled, { .unfinished(requestID: $0) }, count: 2)
        let started = Date()
        // Watched without reading (a read would be progress): the daemon's close shows as a hang-up.
        #expect(Self.hungUp(stalled.fd, within: 10))
        #expect(Date().timeIntervalSince(started) >= 0.9)
        #expect(daemon.log().contains("SendTimeoutSec="))
    }

    @Test("clients filling MaxConnections= do not lock root's storekitctl out")
    func controlCapacity() throws {
        let daemon = try Self.daemon(limits: "MaxConnections=8\nMaxConnectionsPerUID=8")
        defer { daemon.remove() }
        let idle = try (0..<8).map { _ in try WireConnection(path: daemon.clientSocket) }
        defer { idle.forEach { $0.close() } }
        // The ninth client is refused...
        let ninth = try WireConnection(path: daemon.clientSocket)
        #expect(HostileClientTests.closedByDaemon(ninth.fd, within: 5))
        // ...the administrator is not.
        let status = try daemon.ctl(["status"])
        #expect(status.status == 0, "\(status.stderr)")
    }

    @Test("a connection that never says hello is closed after HelloTimeoutSec=; one that did stays")
    func helloDeadline() throws {
        let daemon = try Self.daemon(limits: "HelloTimeoutSec=1s")
        defer { daemon.remove() }
        let greeted = try daemon.connect()
        let silent = try WireConnection(path: daemon.clientSocket)
        let started = Date()
        #expect(HostileClientTests.closedByDaemon(silent.fd, within: 10))
        #expect(Date().timeIntervalSince(started) >= 0.9)
        try greeted.send(.ping(requestID: 9))
        #expect(try greeted.result(for: 9).code == .ok)
        #expect(daemon.log().contains("HelloTimeoutSec="))
    }

    @Test("past MaxRequestsPerUIDPerSecond= pipelined requests are refused with rateLimited, never more served than the rate, said once in a while")
    func requestRate() throws {
        let daemon = try Self.daemon(limits: "MaxRequestsPerUIDPerSecond=100")
        defer { daemon.remove() }
        let flooder = try daemon.connect()
        flooder.setReceiveTimeout(10)
        let started = Date()
        try Self.pipeline(flooder, { .ping(requestID: $0) }, count: 1000)
        var codes: [ResultCode: Int] = [:]
        for _ in 0..<1000 {
            guard case .result(_, let code, _, _, _) = try flooder.receive() else { continue }
            codes[code, default: 0] += 1
        }
        let elapsed = Date().timeIntervalSince(started)
        // A burst of two seconds' worth is served, then the rate while the uid is paced; what it
        // had pipelined beyond its bucket in each read is refused. Never more than the rate allows.
        #expect((codes[.ok] ?? 0) >= 200 && Double(codes[.ok] ?? 0) <= 200 + 100 * elapsed + 10, "\(codes) in \(elapsed) s")
        #expect((codes[.rateLimited] ?? 0) >= 200, "\(codes)")
        #expect((codes[.ok] ?? 0) + (codes[.rateLimited] ?? 0) == 1000, "\(codes)")
        #expect(daemon.log().components(separatedBy: "requests per second").count - 1 <= 21)
        // The budget refills.
        usleep(200_000)
        try flooder.send(.ping(requestID: 1))
        #expect(try flooder.result(for: 1).code == .ok)
    }

    @Test("a uid past MaxRequestsPerUIDPerSecond= that waits for each answer is paced, not refused, and the daemon does not spin on it")
    func requestRatePaces() throws {
        let daemon = try Self.daemon(limits: "MaxRequestsPerUIDPerSecond=200")
        defer { daemon.remove() }
        let flooder = try daemon.connect()
        flooder.setReceiveTimeout(10)
        // One request at a time, sent again at once when refused: a flood that retries.
        let started = Date()
        var codes: [ResultCode: Int] = [:]
        var requestID: UInt32 = 1000
        var done = 0
        while done < 1000 {
            requestID += 1
            try flooder.send(.ping(requestID: requestID))
            let code = try flooder.result(for: requestID).code
            codes[code, default: 0] += 1
            if code == .ok { done += 1 }
        }
        let elapsed = Date().timeIntervalSince(started)
        // The burst (two seconds' worth, 400) is served at once, the other 600 at 200/s.
        #expect(elapsed >= 2.5 && elapsed < 6, "\(elapsed) s")
        #expect((codes[.rateLimited] ?? 0) == 0, "\(codes)")
        // The daemon did not spin on the paced uid meanwhile: its CPU time stays far below the wall time.
        #expect(Self.cpuSeconds(daemon) < elapsed / 4, "\(Self.cpuSeconds(daemon)) s of CPU in \(elapsed) s")
    }

    @Test("a paced connection that then goes quiet is not taken for a half-sent frame and closed")
    func pacedThenQuietStaysOpen() throws {
        let daemon = try Self.daemon(limits: "MaxRequestsPerUIDPerSecond=20\nPartialFrameTimeoutSec=1s")
        defer { daemon.remove() }
        let client = try daemon.connect()
        client.setReceiveTimeout(10)
        // The burst (40) and a few more, one at a time: the last ones are paced.
        for id in UInt32(1)...45 {
            try client.send(.ping(requestID: id))
            #expect(try client.result(for: id).code == .ok)
        }
        // Quiet for longer than PartialFrameTimeoutSec=, then one more request.
        Thread.sleep(forTimeInterval: 2.5)
        try client.send(.ping(requestID: 100))
        #expect(try client.result(for: 100).code == .ok)
        #expect(!daemon.log().contains("partial frame not completed"))
    }

    @Test("a paced connection whose peer hangs up is closed at once, without the loop spinning until its turn")
    func pacedHangUpDoesNotSpin() throws {
        let daemon = try Self.daemon(limits: "MaxRequestsPerUIDPerSecond=1")
        defer { daemon.remove() }
        let client = try daemon.connect()
        client.setReceiveTimeout(10)
        for id in UInt32(1)...2 {   // the burst of two
            try client.send(.ping(requestID: id))
            #expect(try client.result(for: id).code == .ok)
        }
        try client.send(.ping(requestID: 3))   // paced for about a second
        usleep(100_000)
        let before = Self.cpuSeconds(daemon)
        client.close()
        usleep(800_000)
        let spent = Self.cpuSeconds(daemon) - before
        #expect(spent < 0.3, "\(spent) s of CPU in 0.8 s after the paced peer hung up")
        let other = try daemon.connect()
        try other.send(.ping(requestID: 1))
        #expect(try other.result(for: 1).code == .ok)
    }

    /// User and system CPU time of the daemon so far, in seconds.
    static func cpuSeconds(_ daemon: DaemonProcess) -> Double {
        guard let pid = daemon.process?.processIdentifier,
              let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return .infinity }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state is field 3; utime and stime are fields 14 and 15.
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return .infinity }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    @Test("past MaxUnfinishedPerQueue= payments are refused with quotaExceeded until one is finished")
    func unfinishedQuota() throws {
        let daemon = try Self.daemon(limits: "MaxUnfinishedPerQueue=3")
        defer { daemon.remove() }
        let client = try Client(daemon)
        _ = try client.subscribe()
        var bought: [TransactionRecord] = []
        for _ in 0..<3 { bought.append(try client.buy(Sample.levelPack)) }
        let key = UUID().uuidString
        let refused = try client.addPayment(Sample.coins, key: key)
        #expect(refused.code == .quotaExceeded, "\(refused.code.name) \(refused.message)")
        #expect(refused.message.contains("MaxUnfinishedPerQueue="))
        // Another app's queue of the same uid is not affected, nor is another uid's (same rule).
        #expect(try client.finish(bought[0].id).code == .ok)
        #expect(try client.addPayment(Sample.coins, key: key).code == .ok)
        // Full again: refused, also after a daemon restart (the count is taken from the table).
        #expect(try client.addPayment(Sample.coins).code == .quotaExceeded)
        client.close()
        #expect(daemon.stop() == 0)
        try daemon.start()
        let again = try Client(daemon)
        #expect(try again.addPayment(Sample.coins).code == .quotaExceeded)
    }
}
