import Foundation
import StoreKitTestSupport
import Testing

// Helpers of the store-flow suites: the example app observing for the whole test, storekitctl
// commands expected to succeed or fail, JSON objects by key.

typealias JSONObject = [String: Any]

extension DaemonProcess {
    /// `storekitctl ARGS -o json`, which must succeed; the parsed answer.
    @discardableResult
    func ctlOK(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> Any {
        let result = try ctl(arguments + ["-o", "json"])
        guard result.status == 0 else {
            throw IntegrationFailure("storekitctl \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.stderr)")
        }
        return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8), options: [.fragmentsAllowed])
    }

    /// `storekitctl ARGS -o json` answering one object.
    func ctlObject(_ arguments: [String]) throws -> JSONObject {
        guard let object = try ctlOK(arguments) as? JSONObject else {
            throw IntegrationFailure("storekitctl \(arguments.joined(separator: " ")) did not answer an object")
        }
        return object
    }

    /// `storekitctl ARGS -o json` answering an array of objects.
    func ctlArray(_ arguments: [String]) throws -> [JSONObject] {
        guard let array = try ctlOK(arguments) as? [JSONObject] else {
            throw IntegrationFailure("storekitctl \(arguments.joined(separator: " ")) did not answer an array")
        }
        return array
    }

    /// `storekitctl history APP -o json`.
    func history(_ arguments: [String] = [Sample.app]) throws -> [JSONObject] {
        try ctlArray(["history"] + arguments)
    }

    /// The example app's `observe`, running until the test ends; returns once it is subscribed.
    func observer(ledger: String? = nil, extra: [String] = []) throws -> RunningProcess {
        let before = try ctlObject(["status"])["observers"] as? Int ?? 0
        let process = try RunningProcess(
            Paths.binary("storekit-example-app"),
            ["--ledger", ledger ?? directory.file("ledger-\(UUID().uuidString)")] + extra + ["observe"],
            environment: clientEnvironment)
        let subscribed = eventually {
            ((try? ctlObject(["status"]))?["observers"] as? Int ?? 0) > before
        }
        guard subscribed else { throw IntegrationFailure("observe did not subscribe: \(process.errorOutput)") }
        return process
    }
}

extension RunningProcess {
    /// The `updated` events of transaction `id`.
    func updates(of id: String) -> [JSONObject] {
        StoreKitIntegrationTests.updates(output).filter { $0["transactionIdentifier"] as? String == id }
    }

    /// Waits until an `updated` event matches.
    @discardableResult
    func waitForUpdate(_ match: @escaping (JSONObject) -> Bool) -> Bool {
        waitForOutput { StoreKitIntegrationTests.updates($0).contains(where: match) }
    }

    /// Events of a kind (`revoked`, `storefrontChanged`, `promoted`, …).
    func events(_ kind: String) -> [JSONObject] {
        StoreKitIntegrationTests.events(output).filter { $0["event"] as? String == kind }
    }

    var transcript: String { output + "\n" + errorOutput }
}

extension Dictionary where Key == String, Value == Any {
    subscript(string key: String) -> String? { self[key] as? String }
}
