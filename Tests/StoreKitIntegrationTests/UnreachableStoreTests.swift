import Foundation
import StoreKitPosix
import StoreKitTestSupport
import Testing

/// An app whose storekitd cannot be reached says why once on stderr, and a payment made meanwhile
/// fails after a bounded time with a network-kind SKError, as StoreKit fails a purchase offline.
@Suite("unreachable store")
struct UnreachableStoreTests {
    static let timeout = ["STOREKIT_CONNECT_TIMEOUT": "1"]

    static func occurrences(_ text: String, in output: String) -> Int { output.components(separatedBy: text).count - 1 }

    @Test("no socket: the reason once on stderr, the purchase fails with cloudServiceNetworkConnectionFailed (7)")
    func missingSocket() throws {
        let directory = TemporaryDirectory("sknosock")
        defer { directory.remove() }
        let socket = directory.file("missing/storekitd.sock")
        let started = Date()
        let result = try ProcessRunner.run(Paths.binary("storekit-example-app"),
                                           ["--ledger", directory.file("ledger"), "buy", "com.example.game.coins100"],
                                           environment: Self.timeout.merging(["STOREKITD_SOCKET": socket]) { $1 }, timeout: 30)
        #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
        #expect(Date().timeIntervalSince(started) < 20, "took \(Date().timeIntervalSince(started)) s")
        #expect(Self.occurrences("OpenStoreKit: cannot reach storekitd: no storekitd socket at \(socket)", in: result.stderr) == 1,
                "\(result.stderr)")
        let failed = events(result.stdout).first { ($0["state"] as? String) == "failed" }
        #expect(failed != nil, "\(result.stdout)")
        #expect("\(failed ?? [:])".contains("7") || result.stdout.contains("cloudServiceNetworkConnectionFailed"), "\(result.stdout)")
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
