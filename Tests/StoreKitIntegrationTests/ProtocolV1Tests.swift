import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Synchronization
import Testing

// Apps built before the daemon was upgraded keep working: the project's own version-1 client
// (OpenStoreKit and storekit-example-app as they shipped, kept unchanged in Tests/Compat/ProtocolV1)
// against today's daemon, beside today's clients on the same socket (docs/protocol.md §12).

/// The version-1 storekit-example-app, built once per test run from Tests/Compat/ProtocolV1.
enum ProtocolV1Client {
    private static let built = Mutex<Result<String, IntegrationFailure>?>(nil)

    static func executable() throws -> String {
        try built.withLock { built in
            if built == nil { built = build() }
            return try built!.get()
        }
    }

    private static func build() -> Result<String, IntegrationFailure> {
        let package = Paths.repository + "/Tests/Compat/ProtocolV1"
        let scratch = Paths.repository + "/.build/compat-v1"
        let arguments = ["swift", "build", "--package-path", package, "--scratch-path", scratch, "--product", "storekit-example-app"]
        do {
            let result = try ProcessRunner.run("/usr/bin/env", arguments, timeout: 600)
            guard result.status == 0 else {
                return .failure(IntegrationFailure("building the version-1 client failed (\(result.status)):\n\(result.stdout)\n\(result.stderr)"))
            }
            return .success(scratch + "/debug/storekit-example-app")
        } catch {
            return .failure(IntegrationFailure("cannot build the version-1 client: \(error)"))
        }
    }
}

@Suite(.serialized) struct ProtocolV1Tests {
    /// Runs the version-1 example app against `daemon`.
    func oldApp(_ daemon: DaemonProcess, _ arguments: [String], ledger: String) throws -> ProcessResult {
        try ProcessRunner.run(try ProtocolV1Client.executable(), ["--ledger", ledger] + arguments,
                              environment: daemon.clientEnvironment, timeout: appTimeout)
    }

    /// The JSON lines an example app printed.
    func events(_ output: String) -> [[String: Any]] {
        output.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    @Test("the version-1 OpenStoreKit, as it shipped, lists, observes, buys, finishes, restores and is refused as before, beside a version-2 client")
    func shippedClientWholeFlow() throws {
        let v1 = try ProtocolV1Client.executable()
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let ledger = daemon.directory.file("v1-ledger")

        // A purchase by today's client, left unfinished: the old app lists it (its one-frame `unfinished`).
        let today = try Client(daemon)
        _ = try today.subscribe()
        let waiting = try today.buy(Sample.coins)
        #expect(waiting.jwsRepresentation != nil, "a version-2 client gets the JWS")
        let listed = try oldApp(daemon, ["list"], ledger: ledger)
        #expect(listed.status == 0, "list: \(listed.stderr)")
        #expect(listed.stdout.contains(String(waiting.id)), "list: \(listed.stdout)")

        // The old observer receives it at launch, delivers and finishes it, then follows what happens.
        let observer = try RunningProcess(v1, ["--ledger", ledger, "observe"], environment: daemon.clientEnvironment)
        #expect(observer.waitForOutput { $0.contains("\"removed\"") && $0.contains(String(waiting.id)) },
                "the old observer did not finish the waiting purchase: \(observer.output)\n\(observer.errorOutput)")
        let monthly = try today.buy(Sample.monthly)
        #expect(observer.waitForOutput { $0.split(separator: "\n").contains { $0.contains("\"removed\"") && $0.contains(String(monthly.id)) } },
                "the old observer did not see today's client's purchase: \(observer.output)")

        // The old app buys and restores by itself.
        let bought = try oldApp(daemon, ["buy", Sample.levelPack], ledger: ledger)
        #expect(bought.status == 0, "buy: \(bought.stdout)\n\(bought.stderr)")
        #expect(events(bought.stdout).contains { $0["state"] as? String == "purchased" && $0["granted"] as? Bool == true })
        let restored = try oldApp(daemon, ["restore"], ledger: ledger)
        #expect(restored.status == 0, "restore: \(restored.stdout)\n\(restored.stderr)")
        let restoredProducts = Set(events(restored.stdout).filter { $0["state"] as? String == "restored" }
            .compactMap { $0["productIdentifier"] as? String })
        #expect(restoredProducts == [Sample.levelPack, Sample.monthly], "restore: \(restored.stdout)")
        #expect(events(restored.stdout).contains { $0["event"] as? String == "restoreFinished" })

        // Refusals read as before: an unknown product is a failed transaction (storeProductNotAvailable),
        // an unregistered app is refused with the daemon's words.
        let unknown = try oldApp(daemon, ["buy", "com.example.game.nothing"], ledger: ledger)
        #expect(unknown.status != 0)
        #expect(events(unknown.stdout).contains { ($0["error"] as? [String: Any])?["code"] as? Int == 5 && $0["state"] as? String == "failed" },
                "unknown product: \(unknown.stdout)")
        let wrongApp = try oldApp(daemon, ["--app", "com.example.wrong", "list"], ledger: ledger)
        #expect(wrongApp.status != 0)
        #expect(wrongApp.stderr.contains("com.example.wrong is not registered"), "wrong app: \(wrongApp.stderr)")

        // Everything the old clients touched is finished; nothing was lost.
        let all = try daemon.transactions()
        for id in [waiting.id, monthly.id] {
            #expect(all.first { $0.id == String(id) }?.finished == true, "\(id) is not finished: \(all)")
        }
        #expect(all.filter { $0.state == "restored" }.allSatisfy { $0.finished })
        observer.stop()
    }

    @Test("version 1 on the wire: welcome 1, records without JWS, one-frame unfinished, no newer messages; versions outside 1…5 refused")
    func version1Frames() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let old = try Client(daemon, version: 1)
        let today = try Client(daemon)
        _ = try old.subscribe()
        _ = try today.subscribe()

        // One purchase, pushed to both: the version-1 record has no JWS (WireConnection reads it
        // strictly as version 1: a trailing JWS field would fail the decode), version 2's has it.
        let bought = try old.buy(Sample.levelPack)
        #expect(bought.jwsRepresentation == nil)
        let pushed = try today.connection.receive { message in
            if case .updated(let records) = message { return records.contains { $0.id == bought.id && $0.state == .purchased } }
            return false
        }
        guard case .updated(let records) = pushed else { return }
        #expect(records.first { $0.id == bought.id }?.jwsRepresentation != nil)

        // Unfinished: version 1 asks once and gets every unfinished transaction in one frame.
        for _ in 0..<3 { _ = try old.buy(Sample.coins) }
        let unfinished = try old.unfinished()
        #expect(unfinished.count == 4)
        #expect(unfinished.allSatisfy { $0.jwsRepresentation == nil })

        // Products without offers; finishing and the refusals of version 1.
        try old.connection.send(.products(requestID: 80, identifiers: [Sample.monthly, "nope"]))
        let products = try old.connection.receive { if case .products(80, _, _) = $0 { true } else { false } }
        guard case .products(_, let known, let invalid) = products else { return }
        #expect(known.map(\.productID) == [Sample.monthly] && invalid == ["nope"])
        #expect(known.first?.subscriptionPeriod == "P1M" && known.first?.introductoryOffer == nil)
        #expect(try old.finish(bought.id).code == .ok)
        #expect(try old.finish(bought.id).code == .ok, "finishing twice is fine")
        #expect(try old.finish(1).code == .transactionNotFound)

        // A message version 1 does not have (history, 12) is refused as an unknown type, and the connection closed.
        try old.connection.send(.ping(requestID: 90))
        #expect(try old.reply(to: 90).code == .ok)
        try old.connection.sendRaw(Frame.encode(body: ClientMessage.history(requestID: 91, afterID: 0).encode()))
        let refusal = try old.connection.receive { if case .result = $0 { true } else { false } }
        guard case .result(_, let code, _, _, let message) = refusal else { return }
        #expect(code == .malformedRequest, "\(message)")
        #expect(throws: ConnectionError.self) { for _ in 0..<100 { _ = try old.connection.receive() } }

        // Versions never shipped are refused, naming what is served.
        for version: UInt16 in [0, 6, 0xFFFF] {
            let connection = try WireConnection(path: daemon.clientSocket)
            connection.setReceiveTimeout(receiveTimeout)
            do {
                _ = try connection.hello(app: Sample.app, version: version)
                Issue.record("version \(version) was welcomed")
            } catch {
                guard case .refused(let code, let text) = error.code else { throw error }
                #expect(code == .unsupportedVersion && text.contains("serves 1 to 5"), "\(text)")
            }
        }
    }
}
