import Foundation
import StoreKitTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

// Helpers of the StoreKit 2 suites: the StoreKit 2 sample app (`storekit2-example-app`) as a
// long-running process that listens to `Transaction.updates` and takes commands on stdin, and
// storekitctl calls for this process's uid (the app's buyer).

/// The uid the sample app runs as: storekitctl acts for it with `--uid`.
let buyer = String(geteuid())

/// `storekit2-example-app listen`, running until the test ends, driven through its stdin.
final class StoreKit2App {
    private let running: RunningProcess
    private let input = Pipe()

    /// Starts `listen` with `listeners` more listeners and waits until each of them listens.
    init(_ daemon: DaemonProcess, listeners: Int = 0) throws {
        running = try RunningProcess(Paths.binary("storekit2-example-app"), ["listen", "--listeners", String(listeners)],
                                     environment: daemon.clientEnvironment, input: input)
        let ready = waitForOutput { output in
            (0...listeners).allSatisfy { number in
                events(output).contains { $0["event"] as? String == "listening" && $0["listener"] as? Int == number }
            }
        }
        guard ready else { throw IntegrationFailure("storekit2-example-app did not start listening: \(transcript)") }
    }

    var output: String { running.output }
    var transcript: String { running.transcript }

    /// Sends one command line (`buy PRODUCT …`, `list …`, `finish ID`, `status`) and waits until it is done.
    @discardableResult
    func command(_ line: String) throws -> [JSONObject] {
        let before = events(output).count
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
        let name = String(line.split(separator: " ").first ?? "")
        guard waitForOutput({ events($0).dropFirst(before).contains { $0["event"] as? String == "done" && $0["command"] as? String == name } }) else {
            throw IntegrationFailure("command \(line) did not finish: \(transcript)")
        }
        return Array(events(output).dropFirst(before))
    }

    /// The `update` events listener `listener` printed (nil: every listener's).
    func updates(listener: Int? = nil) -> [JSONObject] {
        events(output).filter { $0["event"] as? String == "update" && (listener == nil || $0["listener"] as? Int == listener) }
    }

    /// The updates of transaction `id` that listener `listener` received.
    func updates(of id: String, listener: Int = 0) -> [JSONObject] {
        updates(listener: listener).filter { $0[string: "transactionIdentifier"] == id }
    }

    /// Waits until listener `listener` received an update matching `match`.
    @discardableResult
    func waitForUpdate(listener: Int = 0, _ match: @escaping (JSONObject) -> Bool) -> Bool {
        waitForOutput { _ in self.updates(listener: listener).contains(where: match) }
    }

    /// Waits until the output satisfies `condition` (or the process exits, or the deadline passes).
    @discardableResult
    func waitForOutput(_ condition: (String) -> Bool) -> Bool {
        running.waitForOutput(condition)
    }

    /// SIGKILL by pid (a crash of the app) and wait.
    func stop() { running.stop() }
}

extension DaemonProcess {
    /// Runs `storekit2-example-app ARGS` to completion; its JSON events.
    func storeKit2App(_ arguments: [String], environment extra: [String: String] = [:]) throws -> [JSONObject] {
        let result = try ProcessRunner.run(Paths.binary("storekit2-example-app"), arguments,
                                           environment: clientEnvironment.merging(extra) { $1 }, timeout: appTimeout)
        guard result.status == 0 else {
            throw IntegrationFailure("storekit2-example-app \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.stdout) \(result.stderr)")
        }
        return events(result.stdout)
    }

    /// `storekit2-example-app list WHAT`: the transaction ids listed.
    func storeKit2List(_ what: String, environment: [String: String] = [:]) throws -> [String] {
        try storeKit2App(["list", what], environment: environment).filter { $0["event"] as? String == "transaction" }.compactMap { $0[string: "transactionIdentifier"] }
    }

    /// `storekitctl buy` for the sample app's buyer: a purchase made outside the app.
    func buyForApp(_ product: String) throws -> ListedTransaction {
        try buyOutsideApp(product, uid: geteuid())
    }

    /// The ids of this buyer's unfinished transactions, as the daemon holds them.
    func unfinishedIDs() throws -> Set<String> {
        Set(try transactions(["--app", Sample.app, "--uid", buyer, "--unfinished"]).map(\.id))
    }
}
