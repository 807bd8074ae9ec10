import Foundation
import StoreKitConnection
import StoreKitPosix
import StoreKitTestSupport
import StoreKitWire
import Testing

/// storekitd under a fake service manager: notify protocol, watchdog, socket activation by name
/// and the FD store across a crash — the real daemon binary, real sockets.
@Suite("systemd integration")
struct SystemdIntegrationTests {
    /// A daemon fixture whose lifecycle is driven by a `FakeServiceManager`.
    final class Managed {
        let daemon: DaemonProcess
        let manager: FakeServiceManager

        init() throws {
            daemon = try DaemonProcess()
            manager = try FakeServiceManager(directory: daemon.directory)
            try manager.listen(clientPath: daemon.clientSocket, controlPath: daemon.controlSocket)
        }

        func start(_ environment: [String: String] = [:], extra: [String] = []) throws {
            let before = manager.notifications.count
            try manager.start(Paths.binary("storekitd"), daemon.arguments + extra, environment: environment,
                              logPath: daemon.logPath)
            guard manager.waitFor(timeout: 15, after: before, { $0.contains("READY=1") }) != nil else {
                throw DaemonError.timeout(log: daemon.log(tail: 30))
            }
        }

        func cleanUp() {
            manager.stop()
            daemon.directory.remove()
        }
    }

    @Test("READY=1 with STATUS, then STOPPING=1 on SIGTERM, exit 0")
    func readyStatusStopping() throws {
        let managed = try Managed()
        defer { managed.cleanUp() }
        try managed.start()
        let ready = try #require(managed.manager.waitFor { $0.contains("READY=1") })
        #expect(ready.text.contains("STATUS=Serving"))
        // Serving: the passed control socket answers (it was not bound by the daemon itself).
        let control = try WireConnection(path: managed.daemon.controlSocket)
        _ = try control.hello(app: "")
        #expect(managed.daemon.log().contains("Using the passed client socket"))
        managed.manager.signal(SIGTERM)
        #expect(managed.manager.waitFor(after: ready.index) { $0.contains("STOPPING=1") } != nil)
        let status = try #require(managed.manager.wait())
        #expect(status == 0, "exit status \(status)")
    }

    @Test("STATUS= follows the counts after a change")
    func statusFollowsChanges() throws {
        let managed = try Managed()
        defer { managed.cleanUp() }
        try managed.start()
        let before = managed.manager.notifications.count
        #expect(try managed.daemon.ctl(["buy", "com.example.game", "com.example.game.level_pack", "--uid", "0"]).status == 0)
        #expect(managed.manager.waitFor(after: before) { $0.contains("STATUS=") && $0.contains("1 unfinished transaction") } != nil,
                "\(managed.manager.notifications.suffix(3))")
    }

    @Test("SIGHUP: RELOADING=1 with MONOTONIC_USEC, then READY=1; a broken config keeps the old one")
    func reload() throws {
        let managed = try Managed()
        defer { managed.cleanUp() }
        try managed.start()
        let before = managed.manager.notifications.count
        managed.manager.signal(SIGHUP)
        let reloading = try #require(managed.manager.waitFor(after: before) { $0.contains("RELOADING=1") })
        #expect(reloading.text.contains("MONOTONIC_USEC="))
        let ready = try #require(managed.manager.waitFor(after: reloading.index) { $0.contains("READY=1") })
        #expect(!ready.text.contains("failed"))

        // Break the config: the reload fails, says why, and the daemon keeps serving.
        try "[Daemon]\nNoSuchKey=1\n".write(toFile: managed.daemon.configFile, atomically: true, encoding: .utf8)
        let count = managed.manager.notifications.count
        managed.manager.signal(SIGHUP)
        let failed = try #require(managed.manager.waitFor(after: count) { $0.contains("READY=1") })
        #expect(failed.text.contains("Reload failed"))
        #expect(failed.text.contains("NoSuchKey"))
        let result = try managed.daemon.ctl(["products", "com.example.game"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("com.example.game.coins100"))
    }

    @Test("watchdog pings come from the serving loop and stop while it is blocked")
    func watchdog() throws {
        let managed = try Managed()
        defer { managed.cleanUp() }
        try managed.start(["WATCHDOG_USEC": "200000"], extra: ["--enable-test-hooks"])
        let first = try #require(managed.manager.waitFor { $0.contains("WATCHDOG=1") })
        #expect(managed.manager.waitFor(after: first.index + 1) { $0.contains("WATCHDOG=1") } != nil)

        // Block the loop for 1.5 s: no ping may arrive in that time (interval 100 ms).
        let control = try WireConnection(path: managed.daemon.controlSocket)
        _ = try control.hello(app: "")
        let started = ProcessInfo.processInfo.systemUptime
        try control.send(.control(requestID: 1, command: "debug-stall", arguments: ["1500"]))
        _ = try control.receive()   // the loop serves again
        let resumed = ProcessInfo.processInfo.systemUptime
        #expect(resumed - started >= 1.4)
        let after = managed.manager.notifications.count
        #expect(managed.manager.waitFor(after: after) { $0.contains("WATCHDOG=1") } != nil, "pings did not resume")
        // From the last ping before the stall to the first after it, the longest silence is the
        // stall's (less what delayed receiving a ping), not the 100 ms of a serving loop.
        let pings = managed.manager.timedNotifications.filter { $0.text.contains("WATCHDOG=1") }.map(\.arrived)
        let from = pings.last { $0 <= started } ?? started
        let to = pings.first { $0 >= resumed } ?? resumed
        let around = pings.filter { $0 >= from && $0 <= to }
        let silence = zip(around, around.dropFirst()).map { $1 - $0 }.max() ?? 0
        #expect(silence >= 1.0, "pings continued while the loop was blocked: longest silence \(silence) s of \(around)")
    }

    @Test("an observer connected before a crash stays connected through the FD store, nothing delivered twice")
    func fdStoreKeepsObserverAcrossRestart() throws {
        let managed = try Managed()
        defer { managed.cleanUp() }
        try managed.start()
        let observer = try managed.daemon.connect()
        try observer.send(.subscribe(requestID: 1))
        _ = try observer.result(for: 1)
        // The daemon stored the observing session under a name that says so.
        #expect(eventually(timeout: 5) {
            managed.manager.storedNames.contains { $0.hasPrefix("session.") && $0.hasSuffix(".1.com.example.game") }
        }, "stored: \(managed.manager.storedNames)")

        managed.manager.kill9()
        try managed.start()
        #expect(managed.daemon.log().contains("Resumed observer of com.example.game"))

        // A purchase made outside the app reaches the old connection without reconnecting.
        let bought = try managed.daemon.ctlJSON(["buy", "com.example.game", "com.example.game.level_pack", "--uid", String(getuid())])
        let id = try #require((bought as? [String: Any])?["transactionIdentifier"] as? String)
        var states: [TransactionState] = []
        while !states.contains(.purchased) {
            switch try observer.receive() {
            case .updated(let records):
                // No snapshot is replayed to the resumed session: only the new transaction arrives.
                #expect(records.allSatisfy { String($0.id) == id })
                states += records.map(\.state)
            case .welcome:
                Issue.record("the resumed session got a second welcome")
            default:
                break
            }
        }
        #expect(states == [.purchasing, .purchased])
        // And it can still make requests on the same connection.
        try observer.send(.finish(requestID: 2, transactionID: UInt64(id)!))
        #expect(try observer.result(for: 2).code == .ok)
    }

    @Test("a closed session leaves the FD store")
    func fdStoreRemove() throws {
        let managed = try Managed()
        defer { managed.cleanUp() }
        try managed.start()
        let connection = try managed.daemon.connect()
        #expect(eventually(timeout: 5) { !managed.manager.storedNames.isEmpty })
        #expect(managed.manager.storedNames.count == 1, "stored: \(managed.manager.storedNames)")
        connection.close()
        #expect(eventually(timeout: 5) { managed.manager.storedNames.isEmpty }, "stored: \(managed.manager.storedNames)")
    }

    @Test("systemd-socket-activate starts the daemon on the first connection with named fds")
    func socketActivation() throws {
        let daemon = try DaemonProcess()
        defer { daemon.directory.remove() }
        try FileManager.default.createDirectory(atPath: daemon.runtimeDirectory, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/systemd-socket-activate")
        process.arguments = ["-l", daemon.clientSocket, "-l", daemon.controlSocket, "--fdname=client:control",
                             Paths.binary("storekitd")] + daemon.arguments
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: {
            _ = FileManager.default.createFile(atPath: daemon.logPath, contents: nil)
            return daemon.logPath
        }()))
        process.standardError = log
        process.standardOutput = log
        try process.run()
        defer {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
        // The sockets exist before the daemon runs; the first connection starts it.
        var connection: WireConnection?
        eventually {
            connection = try? WireConnection(path: daemon.clientSocket)
            return connection != nil
        }
        let client = try #require(connection, "systemd-socket-activate did not listen on \(daemon.clientSocket)")
        let welcome = try client.hello(app: "com.example.game")
        #expect(welcome.uid == getuid())
        try client.send(.ping(requestID: 9))
        #expect(try client.result(for: 9).code == .ok)
        #expect(daemon.log().contains("Using the passed client socket"))
        #expect(daemon.log().contains("Using the passed control socket"))
    }
}
