import Foundation
import StoreKitConnection
import StoreKitPosix
import StoreKitTestSupport
import Testing

/// An app whose storekitd cannot be reached says why once on stderr, and a payment made meanwhile
/// fails after a bounded time with a network-kind SKError, as StoreKit fails a purchase offline.
@Suite("unreachable store")
struct UnreachableStoreTests {
    static let timeout = ["STOREKIT_CONNECT_TIMEOUT": "1"]

    static func occurrences(_ text: String, in output: String) -> Int { output.components(separatedBy: text).count - 1 }

    @Test("no socket file: the purchase fails at once (no wait for a daemon that is not there) with cloudServiceNetworkConnectionFailed (7), the paths tried said once")
    func missingSocket() throws {
        let directory = TemporaryDirectory("sknosock")
        defer { directory.remove() }
        let socket = directory.file("missing/storekitd.sock")
        let started = Date()
        // No STOREKIT_CONNECT_TIMEOUT: the default (10 s) would be the wait if it waited.
        let result = try ProcessRunner.run(Paths.binary("storekit-example-app"),
                                           ["--ledger", directory.file("ledger"), "buy", "com.example.game.coins100"],
                                           environment: ["STOREKITD_SOCKET": socket], timeout: 30)
        #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
        #expect(Date().timeIntervalSince(started) < 5, "took \(Date().timeIntervalSince(started)) s")
        #expect(Self.occurrences("OpenStoreKit: cannot reach storekitd: no storekitd socket: tried \(socket) (", in: result.stderr) == 1,
                "\(result.stderr)")
        let failed = events(result.stdout).first { ($0["state"] as? String) == "failed" }
        #expect(failed != nil, "\(result.stdout)")
        #expect("\(failed ?? [:])".contains("7") || result.stdout.contains("cloudServiceNetworkConnectionFailed"), "\(result.stdout)")
    }

    @Test("without STOREKITD_SOCKET, the paths tried are the daemon's own lookup order: XDG_RUNTIME_DIR's, /tmp/storekitd-UID, /run/storekitd",
          .enabled(if: getuid() == 0, "needs root to run the app as another user"))
    func lookupOrderSaid() throws {
        let directory = TemporaryDirectory("sknolookup")
        defer { directory.remove() }
        chmod(directory.path, 0o755)
        let started = Date()
        let result = try ProcessRunner.run(Paths.binary("storekit-example-app"), ["--ledger", "/dev/null", "list"],
                                           environment: ["XDG_RUNTIME_DIR": directory.path, "HOME": "/"], uid: 65534, timeout: 30)
        #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
        #expect(Date().timeIntervalSince(started) < 5)
        let tried = "tried \(directory.path)/storekitd/storekitd.sock, /tmp/storekitd-65534/storekitd.sock, /run/storekitd/storekitd.sock"
        #expect(result.stderr.contains(tried), "\(result.stderr)")
    }

    @Test("a daemon without XDG_RUNTIME_DIR serves in /tmp/storekitd-UID, and a client of that uid finds it there without being told",
          .enabled(if: getuid() == 0, "needs root to run both as another user"))
    func noRuntimeDirectoryFoundByClients() throws {
        let directory = TemporaryDirectory("sknoxdg")
        defer { directory.remove() }
        chmod(directory.path, 0o755)
        let uid: UInt32 = 4711
        let runtime = SocketLocation.temporaryDirectory(uid: uid)
        try? FileManager.default.removeItem(atPath: runtime)
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let state = directory.file("state")
        #expect(mkdir(state, 0o700) == 0 && chown(state, uid, uid) == 0)
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        daemon.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", Paths.binary("storekitd"),
                            "--config", Paths.sampleConfig + "/storekitd.conf", "--state-dir", state, "--log-target", "stderr"]
        daemon.environment = ["HOME": "/", "PATH": "/usr/bin:/bin"]
        let log = directory.file("log")
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        daemon.standardError = FileHandle(forWritingAtPath: log)
        try daemon.run()
        defer { daemon.terminate(); daemon.waitUntilExit() }
        #expect(eventually(timeout: 15) { FileManager.default.fileExists(atPath: runtime + "/storekitd.sock") },
                "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        func said() -> String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        #expect(eventually(timeout: 10) { said().contains("clients of uid \(uid) find it there by themselves") }, "\(said())")
        #expect(said().contains("on \(runtime),"), "\(said())")
        let result = try ProcessRunner.run(Paths.binary("storekit-example-app"), ["--ledger", "/dev/null", "list"],
                                           environment: ["HOME": "/"], uid: uid, timeout: 30)
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
    }

    @Test("SKReceiptRefreshRequest with no store: the delegate hears cloudServiceNetworkConnectionFailed (7), no receipt is written")
    func receiptRefreshFails() throws {
        let directory = TemporaryDirectory("sknoreceipt")
        defer { directory.remove() }
        let started = Date()
        let result = try ProcessRunner.run(Paths.binary("storekit-example-app"), ["--ledger", directory.file("ledger"), "refresh-receipt"],
                                           environment: Self.timeout.merging(["STOREKITD_SOCKET": directory.file("missing.sock"),
                                                                              "XDG_DATA_HOME": directory.file("data")]) { $1 },
                                           timeout: 30)
        #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
        #expect(Date().timeIntervalSince(started) < 20)
        let failure = events(result.stdout).first { $0["event"] as? String == "receiptRefreshFailed" }
        #expect(failure?["code"] as? Int == 7, "\(result.stdout)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("data/storekit/com.example.game/receipt")))
    }

    @Test("reached but refused (an app that is not registered): the app says the daemon refused it, not that it cannot reach it")
    func reachedButRefused() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let result = try daemon.app(["--app", "com.example.wrong", "buy", Sample.coins])
        #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
        #expect(Self.occurrences("OpenStoreKit: storekitd refused com.example.wrong: app com.example.wrong is not registered",
                                 in: result.stderr) == 1, "\(result.stderr)")
        #expect(!result.stderr.contains("cannot reach"), "\(result.stderr)")
        #expect(result.stdout.contains("is not registered"), "the failed transaction says why: \(result.stdout)")
    }

    @Test("nothing listening: said once, and `list` fails instead of hanging")
    func refusedConnection() throws {
        let directory = TemporaryDirectory("sknolisten")
        defer { directory.remove() }
        // A socket file with no listener behind it, as a stopped daemon leaves behind.
        let socket = directory.file("storekitd.sock")
        let fd = try UnixSocket.listen(path: socket, mode: 0o666)
        UnixSocket.close(fd)
        let result = try ProcessRunner.run(Paths.binary("storekit-example-app"), ["--ledger", directory.file("ledger"), "list"],
                                           environment: Self.timeout.merging(["STOREKITD_SOCKET": socket]) { $1 }, timeout: 30)
        #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
        #expect(Self.occurrences("OpenStoreKit: cannot reach storekitd: nothing listens on \(socket)", in: result.stderr) == 1,
                "\(result.stderr)")
        #expect(result.stderr.contains("cannot list transactions: Cannot connect to the store: nothing listens"), "\(result.stderr)")
    }

    @Test("a socket this user may not reach: permission denied, said once", .enabled(if: getuid() == 0, "needs root to run the app as another user"))
    func permissionDenied() throws {
        let directory = TemporaryDirectory("skdenied")   // mkdtemp: 0700, root's
        defer { directory.remove() }
        let socket = directory.file("storekitd.sock")
        let fd = try UnixSocket.listen(path: socket, mode: 0o666)
        defer { UnixSocket.close(fd) }
        let result = try ProcessRunner.run(Paths.binary("storekit-example-app"), ["--ledger", "/dev/null", "list"],
                                           environment: Self.timeout.merging(["STOREKITD_SOCKET": socket, "HOME": "/"]) { $1 },
                                           uid: 65534, timeout: 30)
        #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
        #expect(Self.occurrences("OpenStoreKit: cannot reach storekitd: permission denied on \(socket)", in: result.stderr) == 1,
                "\(result.stderr)")
    }
}
