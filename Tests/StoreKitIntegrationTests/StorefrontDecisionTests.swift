import Foundation
import StoreKitTestSupport
import Testing

/// `paymentQueue(_:shouldContinue:in:)`: after a storefront change the app's delegate decides
/// whether each deferred payment continues; "no" withdraws it (it becomes `failed`).
@Suite("storefront change and the queue delegate")
struct StorefrontDecisionTests {
    /// A deferred purchase of the level pack, made through the example app with Ask to Buy on.
    static func deferredPurchase(_ daemon: DaemonProcess) throws -> String {
        #expect(try daemon.ctl(["ask-to-buy", "on", "--uid", String(getuid())]).status == 0)
        let buy = try daemon.app(["buy", "com.example.game.level_pack"])
        #expect(buy.status == 0, "\(buy.stderr)")
        let deferred = try #require(updates(buy.stdout).last { $0["state"] as? String == "deferred" })
        return try #require(deferred["transactionIdentifier"] as? String)
    }

    static func observe(_ daemon: DaemonProcess, answer: String) throws -> RunningProcess {
        try RunningProcess(Paths.binary("storekit-example-app"),
                           ["--ledger", daemon.directory.file("ledger"), "--storefront-change", answer, "observe"],
                           environment: daemon.clientEnvironment)
    }

    @Test("the delegate says no: the deferred payment is withdrawn and fails")
    func delegateCancels() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let id = try Self.deferredPurchase(daemon)
        let observer = try Self.observe(daemon, answer: "cancel")
        defer { observer.stop() }
        #expect(observer.waitForOutput { $0.contains("\"deferred\"") })
        #expect(try daemon.ctl(["storefront", "set", "GBR"]).status == 0)
        #expect(observer.waitForOutput { output in
            updates(output).contains { $0["transactionIdentifier"] as? String == id && $0["state"] as? String == "failed" }
        }, "output: \(observer.output)")
        let asked = events(observer.output).first { $0["event"] as? String == "shouldContinue" }
        #expect(asked?["storefront"] as? String == "GBR")
        let failed = updates(observer.output).first { $0["state"] as? String == "failed" }
        #expect((failed?["error"] as? [String: Any])?["code"] as? Int == 5)
    }

    @Test("the delegate says yes: the payment stays deferred and can still be approved")
    func delegateContinues() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let id = try Self.deferredPurchase(daemon)
        let observer = try Self.observe(daemon, answer: "continue")
        defer { observer.stop() }
        #expect(observer.waitForOutput { $0.contains("\"deferred\"") })
        #expect(try daemon.ctl(["storefront", "set", "GBR"]).status == 0)
        #expect(observer.waitForOutput { $0.contains("shouldContinue") })
        #expect(try daemon.ctl(["approve", id]).status == 0)
        #expect(observer.waitForOutput { output in
            updates(output).contains { $0["transactionIdentifier"] as? String == id && $0["state"] as? String == "purchased" }
        }, "output: \(observer.output)")
    }
}
