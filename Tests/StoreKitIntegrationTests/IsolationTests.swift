import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The peer's uid (SO_PEERCRED) scopes everything: another user neither sees nor finishes root's
/// transactions, and may not use the control socket.
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root: runs clients as uid 65534 (setpriv, setresuid) and chowns their directory"))
struct IsolationTests {
    static let nobody: UInt32 = 65534

    /// A directory uid 65534 can write its ledger into.
    static func nobodyDirectory(_ daemon: DaemonProcess) throws -> String {
        let path = daemon.directory.file("nobody")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard chown(path, nobody, nobody) == 0 else { throw IntegrationFailure("chown \(path) failed: errno \(errno)") }
        return path
    }

    @Test func anotherUIDSeesAndFinishesNothingOfRoot() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        daemon.openDirectoriesToOtherUsers()
        let nobodyLedger = try Self.nobodyDirectory(daemon) + "/ledger"

        let rootPurchase = try daemon.buyOutsideApp(Sample.levelPack, uid: 0)
        let rootID = try #require(UInt64(rootPurchase.id))

        // Root's app lists it (the positive control for the check below).
        let rootList = try daemon.app(["list"], ledger: daemon.directory.file("root-ledger"), timeout: appTimeout)
        #expect(rootList.status == 0, "\(rootList.stderr)")
        #expect(events(rootList.stdout).compactMap { $0["transactionIdentifier"] as? String } == [rootPurchase.id])

        // uid 65534, through setpriv, sees nothing.
        let nobodyList = try daemon.app(["list"], uid: Self.nobody, ledger: nobodyLedger, timeout: appTimeout)
        #expect(nobodyList.status == 0, "stdout: \(nobodyList.stdout)\nstderr: \(nobodyList.stderr)")
        #expect(events(nobodyList.stdout).isEmpty, "uid 65534 must not see root's transactions: \(nobodyList.stdout)")

        // Nor over the raw protocol, and it cannot finish root's transaction.
        let intruder = try Client(daemon, asUID: Self.nobody)
        #expect(intruder.uid == Self.nobody, "the daemon saw uid \(intruder.uid)")
        #expect(try intruder.subscribe().isEmpty)
        #expect(try intruder.unfinished().isEmpty)
        let finish = try intruder.finish(rootID)
        #expect(finish.code == .transactionNotFound, "\(finish.code.name) \(finish.message)")
        #expect(finish.removed.isEmpty)

        let listed = try daemon.transactions()
        #expect(listed.map(\.id) == [rootPurchase.id])
        #expect(listed.first?.finished == false, "root's transaction is still unfinished")
        #expect(try Client(daemon).subscribe().map(\.id) == [rootID])
    }

    @Test func eachUIDHasItsOwnQueue() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        daemon.openDirectoriesToOtherUsers()
        let nobodyHome = try Self.nobodyDirectory(daemon)
        let nobodyLedger = nobodyHome + "/ledger"

        let rootPurchase = try daemon.buyOutsideApp(Sample.coins)
        let observer = try Client(daemon)
        #expect(try observer.subscribe().map(\.id) == [UInt64(rootPurchase.id)])

        // uid 65534 buys through the real example app: its purchase is its own.
        let bought = try daemon.app(["buy", Sample.levelPack], uid: Self.nobody, ledger: nobodyLedger, dataHome: nobodyHome,
                                    timeout: appTimeout)
        #expect(bought.status == 0, "stdout: \(bought.stdout)\nstderr: \(bought.stderr)")
        let nobodys = try daemon.transactions(["--uid", String(Self.nobody)])
        #expect(nobodys.count == 1)
        #expect(nobodys.first?.productIdentifier == Sample.levelPack)
        #expect(nobodys.first?.finished == true)
        #expect(ledgerIDs(nobodyLedger) == nobodys.map(\.id))
        let purchasedEvents = updates(bought.stdout).filter { $0["state"] as? String == "purchased" }
        #expect(purchasedEvents.map { $0["transactionIdentifier"] as? String } == nobodys.map(\.id))

        // Root's observer heard nothing of it, and root's purchase is untouched.
        let ping = try observer.request { .ping(requestID: $0) }
        #expect(ping.pushes.isEmpty, "root's observer got another uid's updates: \(ping.pushes)")
        let roots = try daemon.transactions(["--uid", "0"])
        #expect(roots.map(\.id) == [rootPurchase.id])
        #expect(roots.first?.finished == false)
    }

    @Test func controlSocketRefusesOtherUsers() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        daemon.openDirectoriesToOtherUsers()

        // The socket file's mode keeps uid 65534 out...
        let byMode = try daemon.ctl(["status"], uid: Self.nobody)
        #expect(byMode.status == 1, "stdout: \(byMode.stdout)\nstderr: \(byMode.stderr)")
        #expect(byMode.stdout.isEmpty)

        // ...and the daemon checks the peer itself even when the mode would let it in: it answers
        // a typed refusal at once and closes.
        chmod(daemon.controlSocket, 0o666)
        let raw = try connectWithThreadUID(Self.nobody, path: daemon.controlSocket)
        raw.setReceiveTimeout(receiveTimeout)
        let refusal = try raw.receive()
        guard case .result(_, let code, _, _, let message) = refusal else {
            Issue.record("expected a refusal, got \(refusal)")
            return
        }
        #expect(code == .permissionDenied)
        #expect(message.contains("may not use the control socket"), "\(message)")
        #expect(raw.closedByPeer())

        // storekitctl run as that user fails with the daemon's reason, every time (the refusal
        // races the hello storekitctl writes, so try a few times).
        for _ in 0..<10 {
            let byPeer = try daemon.ctl(["buy", Sample.app, Sample.coins, "--uid", "0"], uid: Self.nobody)
            #expect(byPeer.status == 1, "stdout: \(byPeer.stdout)\nstderr: \(byPeer.stderr)")
            #expect(byPeer.stderr.contains("may not use the control socket"), "\(byPeer.stderr)")
        }
        #expect(try daemon.transactions().isEmpty, "the refused buys did nothing")

        // Root may.
        #expect(try daemon.ctl(["status"]).status == 0)
    }
}
