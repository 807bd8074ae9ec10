import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing

/// The durability gate's lanes through the real daemon: a unit of work's output waits for its
/// commit-log record and its signatures, per uid. With the signer's thread slowed on purpose
/// (`debug-slow-signing`), one uid's pushes wait there for seconds; another uid's purchase, made
/// meanwhile, must not wait with them, and the first uid's own later answer must.
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root: the second uid's client connects as uid 65534 (setresuid)"))
struct SigningLanesTests {
    static let delay = 3.0

    @Test("pushes waiting for the signer's thread hold back their own uid's later answers, not another uid's purchase")
    func slowSignaturesHoldBackTheirUIDOnly() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        daemon.extraArguments = ["--enable-test-hooks"]
        try daemon.start()
        daemon.openDirectoriesToOtherUsers()
        let hooks = try TestHooks(daemon)
        #expect(try hooks.run("debug-slow-signing", ["soon"]) == .invalidArgument)
        #expect(try hooks.run("debug-slow-signing", ["60001"]) == .invalidArgument)
        #expect(try hooks.run("debug-slow-signing", [String(Int(Self.delay * 1000))]) == .ok)

        // Root's six purchases in one write: one unit of work, signed on the signer's thread
        // (more than two signatures), which now waits `delay` seconds first. A ping pipelined
        // behind them is answered in root's lane, after their pushes.
        let root = try ProofOfPurchaseTests.observer(of: daemon, timeout: 20)
        var bytes: [UInt8] = []
        for index in 0..<6 {
            let payment = ClientMessage.addPayment(.init(requestID: UInt32(1000 + index), key: "root-\(index)",
                                                         productID: Sample.coins, quantity: 1))
            Frame.append(body: payment.encode(), to: &bytes)
        }
        Frame.append(body: ClientMessage.ping(requestID: 2000).encode(), to: &bytes)
        let rootSent = Date()
        try root.sendRaw(bytes)

        // Once root's unit is on the signer's thread (the daemon says so as the thread begins to
        // wait; a control command would be answered in root's lane, after those signatures),
        // uid 65534 connects, subscribes and buys: its purchase is signed on the loop (one
        // signature), and none of its answers waits for root's signatures.
        try #require(eventually { daemon.log().contains("(6 signatures) waits \(Int(Self.delay * 1000)) ms first") },
                     "root's six purchases did not reach the signer's thread:\n\(daemon.log(tail: 20))")
        let otherSent = Date()
        let other = try Client(daemon, asUID: IsolationTests.nobody)
        #expect(try other.subscribe().isEmpty)
        let bought = try other.buy(Sample.coins)
        let otherWaited = Date().timeIntervalSince(otherSent)
        #expect(otherWaited < Self.delay / 2, "uid 65534's hello, subscribe and purchase took \(otherWaited) s: held behind root's signatures")
        #expect(bought.jwsRepresentation != nil, "its push is signed")

        // Root: every purchase pushed and signed, the ping answered after all of them.
        var purchased: [UInt64: String?] = [:]
        var pongAfter: Int?
        while pongAfter == nil {
            switch try root.receive() {
            case .updated(let records):
                for record in records where record.state == .purchased { purchased[record.id] = record.jwsRepresentation }
            case .result(2000, let code, _, _, _):
                #expect(code == .ok)
                pongAfter = purchased.count
            default:
                break
            }
        }
        let rootWaited = Date().timeIntervalSince(rootSent)
        #expect(pongAfter == 6, "root's ping was answered after \(pongAfter ?? 0) of its 6 purchases' pushes")
        #expect(purchased.values.allSatisfy { $0 != nil }, "root's pushes are signed")
        #expect(rootWaited >= Self.delay * 0.9, "root's unit waited for the slowed signer (\(rootWaited) s)")
        #expect(otherWaited < rootWaited, "uid 65534 was answered first")
        #expect(try hooks.run("debug-slow-signing", ["0"]) == .ok)
    }
}
