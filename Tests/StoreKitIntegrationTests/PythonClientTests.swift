import Foundation
import StoreKitTestSupport
import Testing

// The Python module `storekit` (python/storekit, over libstorekit through ctypes) against the real
// daemon: its unittest suite (python/tests), and docs/examples/python/buy_and_finish.py run from
// an installed copy of the module (`make install-python` into a temporary DESTDIR).

/// python3, libstorekit, and the environment that points the module at a daemon.
enum PythonClient {
    /// Debian's python3 (the one python3-storekit installs for), else the first on PATH; nil: none.
    static let interpreter: String? = {
        var candidates = ["/usr/bin/python3"]
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            candidates.append("\(directory)/python3")
        }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// The C library, built once per test run (`make libstorekit`, shared with LibStoreKitTests so
    /// that two makes never write the same objects at once); its path.
    static func buildLibrary() throws -> String {
        try LibStoreKit.built.get()
    }

    /// `make ARGUMENTS` in the repository.
    static func make(_ arguments: [String]) -> Result<Void, IntegrationFailure> {
        do {
            let result = try ProcessRunner.run("/usr/bin/env", ["make", "--no-print-directory", "-C", Paths.repository] + arguments,
                                               timeout: 600)
            guard result.status == 0 else {
                return .failure(IntegrationFailure("make \(arguments.joined(separator: " ")) failed (\(result.status)):\n\(result.stdout)\n\(result.stderr)"))
            }
            return .success(())
        } catch {
            return .failure(IntegrationFailure("cannot run make \(arguments.joined(separator: " ")): \(error)"))
        }
    }

    /// A daemon on the sample config, with its root certificate saved as root.pem beside it.
    static func daemon() throws -> DaemonProcess {
        let daemon = try DaemonProcess()
        try daemon.start()
        let certificate = try daemon.ctl(["certificate"])
        guard certificate.status == 0 else { throw IntegrationFailure("storekitctl certificate: \(certificate.stderr)") }
        try certificate.stdout.write(toFile: daemon.directory.file("root.pem"), atomically: true, encoding: .utf8)
        return daemon
    }

    /// What the module needs to reach `daemon`: its socket, the library, the root certificate;
    /// the module itself from `modulePath`.
    static func environment(_ daemon: DaemonProcess, modulePath: String, root: String? = nil) throws -> [String: String] {
        daemon.clientEnvironment.merging([
            "STOREKIT_LIBRARY": try buildLibrary(),
            "STOREKIT_ROOT_CERTIFICATE": root ?? daemon.directory.file("root.pem"),
            "PYTHONPATH": modulePath,
            "PYTHONDONTWRITEBYTECODE": "1",
            "STOREKIT_CONNECT_TIMEOUT": "10",
            "STOREKITCTL": Paths.binary("storekitctl"),
        ]) { $1 }
    }

    static func run(_ arguments: [String], environment: [String: String], timeout: Double = 60) throws -> ProcessResult {
        guard let interpreter else { throw IntegrationFailure("python3 is not installed") }
        return try ProcessRunner.run(interpreter, arguments, environment: environment, timeout: timeout)
    }
}

@Suite(.serialized, .enabled(if: PythonClient.interpreter != nil, "python3 is not installed"))
struct PythonClientTests {
    @Test("the storekit module's unittest suite passes against the real daemon and libstorekit, nothing skipped")
    func unittestSuite() throws {
        let daemon = try PythonClient.daemon()
        defer { daemon.remove() }
        let environment = try PythonClient.environment(daemon, modulePath: Paths.repository + "/python")
        let tests = Paths.repository + "/python/tests"
        let result = try PythonClient.run(["-m", "unittest", "discover", "-s", tests, "-t", tests, "-v"],
                                          environment: environment, timeout: 300)
        let report = result.stderr
        #expect(result.status == 0, "python3 -m unittest failed (\(result.status)):\n\(report)\n\(result.stdout)\n\(daemon.log(tail: 30))")
        #expect(report.contains("\nOK"), "\(report)")
        #expect(!report.contains("skipped"), "a test was skipped:\n\(report)")
        let ran = report.split(separator: "\n").first { $0.hasPrefix("Ran ") }
            .flatMap { Int($0.split(separator: " ")[1]) } ?? 0
        #expect(ran >= 23, "ran \(ran) tests:\n\(report)")

        // What the suite bought it finished: the queue is empty again.
        let unfinished = try daemon.transactions().filter { !$0.finished }
        #expect(unfinished.isEmpty, "\(unfinished)")
    }

    @Test("buy_and_finish.py, run from the installed module, buys, verifies, finishes and prints the id; it fails loudly on a refused product, a wrong root and bad usage")
    func exampleFromInstalledFiles() throws {
        let daemon = try PythonClient.daemon()
        defer { daemon.remove() }
        let destination = daemon.directory.file("destdir")
        try PythonClient.make(["install-python", "DESTDIR=\(destination)", "PREFIX=/usr"]).get()
        let installed = destination + "/usr/lib/python3/dist-packages"
        for file in ["__init__.py", "aio.py", "_lib.py"] {
            #expect(FileManager.default.fileExists(atPath: installed + "/storekit/" + file), "make install-python did not install \(file)")
        }
        let example = Paths.repository + "/docs/examples/python/buy_and_finish.py"
        let environment = try PythonClient.environment(daemon, modulePath: installed)

        let bought = try PythonClient.run([example, Sample.app, Sample.coins], environment: environment)
        #expect(bought.status == 0, "buy_and_finish.py failed (\(bought.status)): \(bought.stderr)\n\(daemon.log(tail: 30))")
        #expect(bought.stderr.isEmpty, "\(bought.stderr)")
        let id = bought.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!id.isEmpty && id.allSatisfy(\.isNumber), "not a transaction id: \(bought.stdout)")
        let record = try daemon.history().first { $0[string: "transactionIdentifier"] == id }
        #expect(record?[string: "productIdentifier"] == Sample.coins, "\(String(describing: record))")
        #expect(record?[string: "state"] == "purchased")
        #expect(record?["finished"] as? Bool == true, "the example did not finish \(id)")
        #expect(try daemon.transactions().allSatisfy(\.finished))

        // With no STOREKIT_ROOT_CERTIFICATE: the root the daemon publishes beside its socket.
        var published = environment
        published.removeValue(forKey: "STOREKIT_ROOT_CERTIFICATE")
        let again = try PythonClient.run([example, Sample.app, Sample.levelPack], environment: published)
        #expect(again.status == 0, "buy_and_finish.py with the published root failed (\(again.status)): \(again.stderr)")
        #expect(try daemon.transactions().allSatisfy(\.finished))

        // A product the catalogue does not hold: refused, said on stderr, nothing on stdout.
        let refused = try PythonClient.run([example, Sample.app, "com.example.game.no_such_product"], environment: environment)
        #expect(refused.status == 1, "\(refused.status): \(refused.stdout)\(refused.stderr)")
        #expect(refused.stdout.isEmpty)
        #expect(refused.stderr.contains("SKError 5"), "\(refused.stderr)")

        // Another root than the daemon's: the signature is refused and the purchase left unfinished.
        let otherRoot = daemon.directory.file("other-root.pem")
        let made = try ProcessRunner.run("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", daemon.directory.file("other-key.pem"), "-out", otherRoot, "-subj", "/CN=Not storekitd", "-days", "1"])
        #expect(made.status == 0, "openssl: \(made.stderr)")
        let wrongRoot = try PythonClient.environment(daemon, modulePath: installed, root: otherRoot)
        let unverified = try PythonClient.run([example, Sample.app, Sample.coins], environment: wrongRoot)
        #expect(unverified.status == 1, "\(unverified.status): \(unverified.stdout)\(unverified.stderr)")
        #expect(unverified.stdout.isEmpty)
        #expect(unverified.stderr.contains("did not verify (chain)"), "\(unverified.stderr)")
        let left = try daemon.transactions().filter { !$0.finished }
        #expect(left.count == 1 && left.first?.state == "purchased", "\(left)")

        // Usage.
        let usage = try PythonClient.run([example], environment: environment)
        #expect(usage.status == 2)
        #expect(usage.stderr.contains("usage:"), "\(usage.stderr)")
    }

    @Test("a connection lives through a daemon restart: Disconnected, Reconnected on the same descriptor, then a purchase")
    func connectionSurvivesRestart() throws {
        let interpreter = try #require(PythonClient.interpreter)
        let daemon = try PythonClient.daemon()
        defer { daemon.remove() }
        let environment = try PythonClient.environment(daemon, modulePath: Paths.repository + "/python")
        let client = try RunningProcess(interpreter, [Paths.repository + "/python/tests/reconnect_client.py", Sample.app, Sample.coins],
                                        environment: environment)
        #expect(client.waitForOutput { $0.contains("ready\n") }, "\(client.output)\n\(client.errorOutput)")
        daemon.stop()
        #expect(client.waitForOutput { $0.contains("disconnected\n") }, "\(client.output)\n\(client.errorOutput)")
        try daemon.start()
        #expect(client.waitForOutput(timeout: 30) { $0.contains("reconnected ") }, "\(client.output)\n\(client.errorOutput)")
        client.process.waitUntilExit()
        #expect(client.process.terminationStatus == 0, "\(client.errorOutput)")
        let unfinished = try daemon.transactions().filter { !$0.finished }
        #expect(unfinished.isEmpty, "\(unfinished)")
    }
}
