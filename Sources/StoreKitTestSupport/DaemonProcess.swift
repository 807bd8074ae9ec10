import Foundation
import StoreKitConnection
import StoreKitWire

/// A real `storekitd` on temporary directories, for end-to-end tests.
///
/// The configuration is the repository's sample (`config/`) unless `configure` writes another.
/// `stop()` sends SIGTERM, `kill()` SIGKILL; `start()` again reuses the same state directory.
public final class DaemonProcess: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public var configFile: String
    public var runtimeDirectory: String { directory.file("run") }
    public var stateDirectory: String { directory.file("state") }
    public var clientSocket: String { runtimeDirectory + "/storekitd.sock" }
    public var controlSocket: String { runtimeDirectory + "/control.sock" }
    public var databasePath: String { stateDirectory + "/storekitd.sqlite" }
    public var logPath: String { directory.file("storekitd.log") }
    public var extraArguments: [String] = []
    public var extraEnvironment: [String: String] = [:]
    public private(set) var process: Process?
    private var exited = DispatchSemaphore(value: 0)

    /// `configFile` nil: a copy of the sample config (so tests may add apps beside it).
    public init(configFile: String? = nil) throws {
        directory = TemporaryDirectory("skd")
        if let configFile {
            self.configFile = configFile
        } else {
            let copy = directory.file("config")
            try FileManager.default.copyItem(atPath: Paths.sampleConfig, toPath: copy)
            self.configFile = copy + "/storekitd.conf"
        }
    }

    deinit {
        if let process, process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) }
    }

    /// The environment that points clients (library, CLI, example app) at this daemon; app
    /// receipts go to a data home of this test's own, downloaded content to a cache home.
    public var clientEnvironment: [String: String] {
        ["STOREKITD_SOCKET": clientSocket, "STOREKITD_CONTROL_SOCKET": controlSocket, "XDG_DATA_HOME": dataHome,
         "XDG_CACHE_HOME": cacheHome]
    }

    /// Where OpenStoreKit clients started with `clientEnvironment` keep downloaded content.
    public var cacheHome: String { directory.file("cache") }

    /// Where OpenStoreKit clients started with `clientEnvironment` keep their app receipts.
    public var dataHome: String { directory.file("data") }

    public var arguments: [String] {
        ["--config", configFile, "--runtime-dir", runtimeDirectory, "--state-dir", stateDirectory,
         "--log-target", "stderr"] + extraArguments
    }

    /// Starts the daemon and waits until its control socket answers.
    public func start(timeout: Double = 15) throws {
        let environment = ProcessInfo.processInfo.environment.merging(extraEnvironment) { $1 }
            .filter { $0.key != "NOTIFY_SOCKET" && $0.key != "LISTEN_FDS" }
        let (process, exited) = try launch([Paths.binary("storekitd")] + arguments, environment: environment)
        self.process = process
        self.exited = exited
        if try !waitUntilReady(process, timeout: timeout) {
            throw DaemonError.exited(status: process.terminationStatus, log: log(tail: 20))
        }
    }

    /// Runs `command` with its output appended to this daemon's log; the semaphore is signalled
    /// when it exits.
    public func launch(_ command: [String], environment: [String: String]) throws -> (Process, DispatchSemaphore) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.environment = environment
        if !FileManager.default.fileExists(atPath: logPath) { _ = FileManager.default.createFile(atPath: logPath, contents: nil) }
        let logFile = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        logFile.seekToEndOfFile()
        process.standardError = logFile
        process.standardOutput = logFile
        process.standardInput = FileHandle.nullDevice
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        try? logFile.close()
        return (process, exited)
    }

    /// Waits until the control socket answers: true; false when `process` exited first. Throws
    /// `DaemonError.timeout` after `timeout` seconds.
    public func waitUntilReady(_ process: Process, timeout: Double) throws -> Bool {
        var exited = false
        let settled = eventually(timeout: timeout) {
            if !process.isRunning {
                exited = true
                return true
            }
            guard let connection = try? WireConnection(path: controlSocket) else { return false }
            return (try? connection.hello(app: "")) != nil
        }
        guard settled else { throw DaemonError.timeout(log: log(tail: 20)) }
        return !exited
    }

    /// SIGTERM and wait; returns the exit status.
    @discardableResult
    public func stop(timeout: Double = 15) -> Int32 {
        guard let process, process.isRunning else { return process?.terminationStatus ?? 0 }
        Foundation.kill(process.processIdentifier, SIGTERM)
        return wait(timeout: timeout)
    }

    /// SIGKILL (a crash) and wait.
    public func kill() {
        guard let process, process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        _ = wait(timeout: 10)
    }

    @discardableResult
    public func wait(timeout: Double) -> Int32 {
        guard let process else { return 0 }
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            Foundation.kill(process.processIdentifier, SIGKILL)
            exited.wait()
        }
        return process.terminationStatus
    }

    public func log(tail: Int = 1000) -> String {
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").suffix(tail).joined(separator: "\n")
    }

    /// The files the running daemon has mapped (`/proc/PID/maps`, read to its end: a `/proc` file
    /// says it is empty, and a read by its size would stop at the first page).
    public func mappedFiles() throws -> Set<String> {
        guard let pid = process?.processIdentifier, let maps = FileHandle(forReadingAtPath: "/proc/\(pid)/maps") else {
            throw DaemonError.notRunning
        }
        defer { try? maps.close() }
        let text = String(decoding: maps.readDataToEndOfFile(), as: UTF8.self)
        return Set(text.split(separator: "\n").compactMap { line in line.firstIndex(of: "/").map { String(line[$0...]) } })
    }

    /// Runs `storekitctl` against this daemon.
    public func ctl(_ arguments: [String], uid: UInt32? = nil) throws -> ProcessResult {
        try ProcessRunner.run(Paths.binary("storekitctl"), arguments, environment: clientEnvironment, uid: uid)
    }

    /// Runs `storekitctl ... -o json` and parses the answer.
    public func ctlJSON(_ arguments: [String]) throws -> Any {
        let result = try ctl(arguments + ["-o", "json"])
        guard result.status == 0 else { throw DaemonError.command(arguments, result) }
        return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8), options: [.fragmentsAllowed])
    }

    /// Runs `storekit-example-app` against this daemon with a ledger in the temp dir.
    /// `dataHome`: where it keeps its receipt (default: `dataHome`, which only root may write).
    public func app(_ arguments: [String], uid: UInt32? = nil, ledger: String? = nil, dataHome: String? = nil,
                    timeout: Double = 20) throws -> ProcessResult {
        let ledgerPath = ledger ?? directory.file("ledger-\(uid ?? 0)")
        var environment = clientEnvironment
        if let dataHome {
            // Another user's app keeps its receipt and downloads in a home of its own.
            environment["XDG_DATA_HOME"] = dataHome
            environment["XDG_CACHE_HOME"] = dataHome + "/cache"
        }
        return try ProcessRunner.run(Paths.binary("storekit-example-app"), ["--ledger", ledgerPath] + arguments,
                                     environment: environment, uid: uid, timeout: timeout)
    }

    /// A raw protocol connection to the client socket, after hello.
    public func connect(app: String = "com.example.game") throws -> WireConnection {
        let connection = try WireConnection(path: clientSocket)
        _ = try connection.hello(app: app)
        return connection
    }

    public func remove() {
        kill()
        directory.remove()
    }
}

public enum DaemonError: Error, CustomStringConvertible {
    case exited(status: Int32, log: String)
    case timeout(log: String)
    case command([String], ProcessResult)
    case notRunning

    public var description: String {
        switch self {
        case .exited(let status, let log): "storekitd exited with \(status):\n\(log)"
        case .timeout(let log): "storekitd did not become ready:\n\(log)"
        case .notRunning: "storekitd is not running"
        case .command(let arguments, let result): "storekitctl \(arguments) failed (\(result.status)): \(result.stderr)"
        }
    }
}

extension WireConnection {
    /// Receives until a message matches, skipping others (pushes interleave with replies).
    public func receive(until match: (ServerMessage) -> Bool, limit: Int = 10_000) throws -> ServerMessage {
        for _ in 0..<limit {
            let message = try receive()
            if match(message) { return message }
        }
        throw ConnectionError(.closed, path: path)
    }

    /// The result for `requestID`, skipping pushes.
    public func result(for requestID: UInt32) throws -> (code: ResultCode, detail: Int32, value: UInt64, message: String) {
        let message = try receive { message in
            if case .result(let id, _, _, _, _) = message { return id == requestID }
            return false
        }
        guard case .result(_, let code, let detail, let value, let text) = message else { fatalError("unreachable") }
        return (code, detail, value, text)
    }
}
