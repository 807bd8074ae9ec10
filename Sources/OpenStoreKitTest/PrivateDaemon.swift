import Foundation
import StoreKitConnection
import StoreKitWire
import Synchronization

/// A storekitd of a test session's own: its configuration, sockets, database and keys in a
/// temporary directory, the session's catalogue registered for this process's app identifier.
///
/// The daemon runs under a `/bin/sh` guard that holds the read end of a socket pair whose other
/// end only this process has (the lifeline): when the session ends that end is closed, and when
/// this process dies the kernel closes it; either way the guard's `read` returns, and it stops the
/// daemon (SIGTERM) and waits for it. So a session leaves no process behind, even after a crash of
/// the tests.
final class PrivateDaemon: @unchecked Sendable {
    let directory: String
    /// The app identifier the session registered (this process's).
    let app: String
    var clientSocket: String { directory + "/run/storekitd.sock" }
    var controlSocket: String { directory + "/run/control.sock" }
    var dataHome: String { directory + "/data" }
    private var logPath: String { directory + "/storekitd.log" }
    private let guardProcess: Process
    /// The guard's process id (the daemon is its child), while it runs.
    var guardPID: Int32? { guardProcess.isRunning ? guardProcess.processIdentifier : nil }
    /// The write end of the lifeline (close-on-exec: no other child inherits it).
    private let lifeline: FileHandle
    private let lock = NSLock()
    private var stopped = false

    /// Starts a daemon serving `catalog` (a `.storekit` file) to `app`; returns once its control
    /// socket answers.
    init(catalog: URL, app: String) throws(SKTestSessionError) {
        let binary = try Self.daemonBinary()
        var template = Array((FileManager.default.temporaryDirectory.path + "/OpenStoreKitTest.XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw .cannotStart("cannot make a temporary directory: \(String(cString: strerror(errno)))") }
        directory = String(cString: made)
        self.app = app
        let configuration = directory + "/config"
        do {
            for sub in ["config/apps.d", "run", "state", "data"] {
                try FileManager.default.createDirectory(atPath: directory + "/" + sub, withIntermediateDirectories: true)
            }
            // The daemon's defaults, and the session's app with its catalogue (absolute path).
            try Data("# OpenStoreKitTest: a private storekitd for one SKTestSession.\n".utf8)
                .write(to: URL(fileURLWithPath: configuration + "/storekitd.conf"))
            try Data("[App]\nID=\(app)\nCatalog=\(catalog.path)\n".utf8)
                .write(to: URL(fileURLWithPath: configuration + "/apps.d/session.conf"))
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw .cannotStart("cannot write the session's configuration in \(directory): \(error)")
        }

        // The configuration is checked first, so that a bad catalogue fails the session at once
        // with storekitd's own words (file, JSON path, reason).
        let check = Process()
        check.executableURL = URL(fileURLWithPath: binary)
        check.arguments = ["--check-config", "--config", configuration + "/storekitd.conf"]
        let checkOutput = Pipe()
        check.standardOutput = checkOutput
        check.standardError = checkOutput
        do {
            try check.run()
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw .cannotStart("cannot run \(binary): \(error)")
        }
        let said = String(decoding: checkOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        check.waitUntilExit()
        guard check.terminationStatus == 0 else {
            try? FileManager.default.removeItem(atPath: directory)
            throw .invalidConfiguration(said.trimmingCharacters(in: .whitespacesAndNewlines))
        }

        // Both ends close-on-exec from the start (a socket pair made with SOCK_CLOEXEC, which the
        // shell's `read` reads as it reads a pipe), so that no process this one starts, another
        // session's guard included, holds a copy: the guard's stdin is a dup of the read end.
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            try? FileManager.default.removeItem(atPath: directory)
            throw .cannotStart("socketpair: \(String(cString: strerror(errno)))")
        }
        let readEnd = FileHandle(fileDescriptor: ends[0], closeOnDealloc: true)
        lifeline = FileHandle(fileDescriptor: ends[1], closeOnDealloc: true)
        guardProcess = Process()
        guardProcess.executableURL = URL(fileURLWithPath: "/bin/sh")
        // The daemon in the background; a watcher reads the lifeline and stops the daemon at its
        // end; the guard waits for the daemon, so it also ends (and the session sees it) if the
        // daemon exits on its own. (The lifeline moves to fd 3 first: a background list's stdin is
        // /dev/null in a shell without job control.)
        let script = #"exec 3<&0; "$0" "$@" </dev/null 3<&- & daemon=$!; (read -r _ <&3; kill -TERM "$daemon" 2>/dev/null) & "#
            + #"watcher=$!; exec 3<&-; wait "$daemon"; status=$?; kill "$watcher" 2>/dev/null; exit "$status""#
        guardProcess.arguments = ["-c", script, binary, "--config", configuration + "/storekitd.conf",
                                  "--runtime-dir", directory + "/run", "--state-dir", directory + "/state", "--log-target", "stderr"]
        var environment = ProcessInfo.processInfo.environment
        for inherited in ["NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID"] {
            environment.removeValue(forKey: inherited)
        }
        guardProcess.environment = environment
        guardProcess.standardInput = readEnd
        let logDescriptor = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        let log = logDescriptor >= 0 ? FileHandle(fileDescriptor: logDescriptor, closeOnDealloc: true) : nil
        guardProcess.standardOutput = log ?? FileHandle.nullDevice
        guardProcess.standardError = log ?? FileHandle.nullDevice
        do {
            let process = guardProcess
            try Self.withDefaultSignals { try process.run() }
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw .cannotStart("cannot run \(binary): \(error)")
        }
        try? log?.close()
        // Only the guard keeps the read end; this process keeps the write end, the lifeline.
        try? readEnd.close()
        PrivateDaemon.live.withLock { $0[ObjectIdentifier(self)] = self }
        do {
            try waitUntilReady()
        } catch {
            stop()
            throw error
        }
    }

    deinit { stop() }

    /// Runs `body` on a thread of its own with no signal blocked: a child inherits its spawner's
    /// signal mask, and the threads tests run on (libdispatch's) block most signals, SIGCHLD and
    /// SIGTERM included; with them blocked, the guard's `wait` would never return.
    private static func withDefaultSignals(_ body: @escaping @Sendable () throws -> Void) throws {
        let outcome = Mutex<(any Error)?>(nil)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            var none = sigset_t()
            sigemptyset(&none)
            pthread_sigmask(SIG_SETMASK, &none, nil)
            do { try body() } catch { outcome.withLock { $0 = error } }
            done.signal()
        }
        thread.start()
        done.wait()
        if let error = outcome.withLock({ $0 }) { throw error }
    }

    /// Stops the daemon (closing the lifeline), waits for it, and removes the directory.
    func stop() {
        let first = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        cutLifeline()
        let deadline = Date().addingTimeInterval(15)
        while guardProcess.isRunning && Date() < deadline { usleep(10_000) }
        if guardProcess.isRunning { kill(guardProcess.processIdentifier, SIGKILL) }
        guardProcess.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
        PrivateDaemon.live.withLock { $0[ObjectIdentifier(self)] = nil }
    }

    /// Closes the lifeline only, as the kernel does when this process dies (tests of the guard).
    func cutLifeline() {
        try? lifeline.close()
    }

    /// The daemons of sessions still alive, stopped at exit (a session kept in a global is never
    /// deinitialized).
    private static let live: Mutex<[ObjectIdentifier: PrivateDaemon]> = {
        atexit { PrivateDaemon.stopAll() }
        return Mutex([:])
    }()

    private static func stopAll() {
        for daemon in live.withLock({ Array($0.values) }) { daemon.stop() }
    }

    /// The last lines of the daemon's log, for errors.
    func logTail(_ lines: Int = 20) -> String {
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").suffix(lines).joined(separator: "\n")
    }

    private func waitUntilReady() throws(SKTestSessionError) {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            guard guardProcess.isRunning else {
                throw .cannotStart("storekitd exited: \(logTail())")
            }
            if let connection = try? WireConnection(path: controlSocket), (try? connection.hello(app: "")) != nil { return }
            usleep(20_000)
        }
        throw .cannotStart("storekitd did not answer within 30 s: \(logTail())")
    }

    /// Sends a control command; returns its JSON document, or throws the daemon's refusal.
    func control(_ command: ControlCommand, _ arguments: [String] = []) throws(SKTestSessionError) -> JSONValue {
        let answer: (ok: Bool, message: String, json: String)
        do throws(ConnectionError) {
            let connection = try WireConnection(path: controlSocket)
            defer { connection.close() }
            _ = try connection.hello(app: "")
            try connection.send(.control(requestID: 1, command: command.rawValue, arguments: arguments))
            answer = try Self.awaitAnswer(connection)
        } catch {
            throw .cannotReach("\(command.rawValue): \(error)")
        }
        guard answer.ok else { throw .refused(command: command.rawValue, message: answer.message) }
        return (try? JSONValue.parse(Array(answer.json.utf8))) ?? .null
    }

    /// The control result (or a refusal) that answers the one request sent on `connection`.
    private static func awaitAnswer(_ connection: WireConnection) throws(ConnectionError) -> (ok: Bool, message: String, json: String) {
        while true {
            switch try connection.receive() {
            case .controlResult(_, let code, let message, let json): return (code == .ok, message, json)
            case .result(_, let code, _, _, let message) where code != .ok: return (false, message, "")
            default: continue
            }
        }
    }

    /// Buys `product` for this process's user outside the app (as on another device).
    @discardableResult
    func buy(_ product: String, quantity: Int? = nil) throws(SKTestSessionError) -> JSONValue {
        var arguments = ["app=\(app)", "product=\(product)", "uid=\(getuid())"]
        if let quantity { arguments.append("quantity=\(quantity)") }
        return try control(.buy, arguments)
    }

    /// storekitd: `$STOREKITD_PATH`; beside this executable (a `swift build` of this package);
    /// `.build/debug` or `.build/release` of the current directory; `PATH`; `/usr/bin`, `/usr/sbin`.
    static func daemonBinary() throws(SKTestSessionError) -> String {
        let environment = ProcessInfo.processInfo.environment
        var candidates: [String] = []
        if let explicit = environment["STOREKITD_PATH"], !explicit.isEmpty { candidates.append(explicit) }
        let executable = URL(fileURLWithPath: CommandLine.arguments.first ?? "").resolvingSymlinksInPath()
        // swift test runs PACKAGE.xctest (a bundle directory on some platforms) from the build directory.
        var directory = executable.deletingLastPathComponent()
        for _ in 0..<4 {
            candidates.append(directory.appendingPathComponent("storekitd").path)
            directory = directory.deletingLastPathComponent()
        }
        let current = FileManager.default.currentDirectoryPath
        candidates += [current + "/.build/debug/storekitd", current + "/.build/release/storekitd"]
        candidates += (environment["PATH"] ?? "").split(separator: ":").map { "\($0)/storekitd" }
        candidates += ["/usr/bin/storekitd", "/usr/sbin/storekitd"]
        if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) { return found }
        throw .cannotStart("storekitd not found (install the storekitd package, build it with `swift build`, or set STOREKITD_PATH); looked in: "
            + candidates.joined(separator: ", "))
    }
}
