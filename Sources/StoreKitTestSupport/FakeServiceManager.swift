import Foundation
import StoreKitPosix

/// Plays systemd for a daemon under test: owns the listening sockets and passes them by name
/// (LISTEN_FDS/LISTEN_FDNAMES with LISTEN_PID = the daemon's pid), reads sd_notify datagrams,
/// keeps the FD store (FDSTORE=1 / FDSTOREREMOVE=1) and hands the stored fds to the next start.
public final class FakeServiceManager: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public let notifyPath: String
    private let notifyFD: Int32
    private let lock = NSLock()
    private var messages: [String] = []
    /// When each of `messages` arrived (`ProcessInfo.systemUptime`, monotonic seconds).
    private var arrivals: [Double] = []
    private var stored: [(name: String, fd: Int32)] = []
    private var listeners: [(name: String, fd: Int32)] = []
    private var reading = true
    public private(set) var pid: pid_t = 0

    public init(directory: TemporaryDirectory) throws {
        self.directory = directory
        notifyPath = directory.file("notify.sock")
        notifyFD = try UnixSocket.bindDatagram(path: notifyPath)
        let fd = notifyFD
        Thread.detachNewThread { [self] in
            while isReading {
                guard let datagram = UnixSocket.receiveDatagramWithFDs(fd, timeoutMilliseconds: 100) else { continue }
                received(datagram)
            }
        }
    }

    deinit {
        lock.withLock { reading = false }
        for (_, fd) in stored + listeners { close(fd) }
    }

    private var isReading: Bool { lock.withLock { reading } }

    private func received(_ datagram: ReceivedDatagram) {
        let fields = Self.fields(datagram.text)
        let arrived = ProcessInfo.processInfo.systemUptime
        lock.withLock {
            messages.append(datagram.text)
            arrivals.append(arrived)
            if fields["FDSTORE"] == "1", let name = fields["FDNAME"] {
                for fd in datagram.fds { stored.append((name, fd)) }
            } else {
                for fd in datagram.fds { close(fd) }
            }
            if fields["FDSTOREREMOVE"] == "1", let name = fields["FDNAME"] {
                for entry in stored where entry.name == name { close(entry.fd) }
                stored.removeAll { $0.name == name }
            }
        }
    }

    static func fields(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            result[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return result
    }

    /// Every datagram received so far, in order.
    public var notifications: [String] { lock.withLock { messages } }

    /// Every datagram received so far with when it arrived (`ProcessInfo.systemUptime`), in order:
    /// for tests about the time between notifications (watchdog pings).
    public var timedNotifications: [(arrived: Double, text: String)] {
        lock.withLock { Array(zip(arrivals, messages)).map { (arrived: $0.0, text: $0.1) } }
    }

    /// Names currently in the FD store.
    public var storedNames: [String] { lock.withLock { stored.map(\.name) } }

    /// Waits until a datagram satisfies `match`; returns it, or nil after `timeout` seconds.
    public func waitFor(timeout: Double = 10, after index: Int = 0, _ match: (String) -> Bool) -> (index: Int, text: String)? {
        var found: (index: Int, text: String)?
        eventually(timeout: timeout) {
            let snapshot = notifications
            guard index < snapshot.count, let position = snapshot[index...].firstIndex(where: match) else { return false }
            found = (position, snapshot[position])
            return true
        }
        return found
    }

    /// Creates the listening sockets the daemon will receive as `client` and `control`.
    public func listen(clientPath: String, controlPath: String) throws {
        try FileManager.default.createDirectory(atPath: (clientPath as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        listeners = [("client", try UnixSocket.listen(path: clientPath, mode: 0o666)),
                     ("control", try UnixSocket.listen(path: controlPath, mode: 0o600))]
    }

    /// Starts `binary` with the listeners, the stored fds and NOTIFY_SOCKET, as systemd would.
    public func start(_ binary: String, _ arguments: [String], environment extra: [String: String] = [:],
                      logPath: String) throws {
        let passed = lock.withLock { listeners + stored }
        var environment = ProcessInfo.processInfo.environment.filter {
            !["LISTEN_FDS", "LISTEN_FDNAMES", "LISTEN_PID", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"].contains($0.key)
        }
        environment["NOTIFY_SOCKET"] = notifyPath
        if !passed.isEmpty {
            environment["LISTEN_FDS"] = String(passed.count)
            environment["LISTEN_FDNAMES"] = passed.map(\.name).joined(separator: ":")
        }
        for (key, value) in extra { environment[key] = value }
        // LISTEN_PID must be the daemon's own pid: a shell sets it and execs the daemon.
        let shell = ["/bin/sh", "-c", "LISTEN_PID=$$ WATCHDOG_PID=$$ exec \"$0\" \"$@\"", binary] + arguments
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Copy every passed fd above the target range first, so dup2 to 3… cannot clobber a source.
        var high: [Int32] = []
        for (_, fd) in passed { high.append(fcntl(fd, F_DUPFD_CLOEXEC, 200)) }
        defer { for fd in high { close(fd) } }
        for (index, fd) in high.enumerated() { posix_spawn_file_actions_adddup2(&actions, fd, Int32(3 + index)) }
        let argv = shell.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let env = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in env { free(pointer) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, "/bin/sh", &actions, nil, argv, env)
        guard status == 0 else { throw DaemonError.exited(status: status, log: "posix_spawn failed") }
        pid = child
    }

    /// Sends `signal` to the running daemon.
    public func signal(_ signal: Int32) {
        if pid > 0 { kill(pid, signal) }
    }

    /// Waits for the daemon to exit; returns its wait status, or nil after `timeout` seconds.
    @discardableResult
    public func wait(timeout: Double = 15) -> Int32? {
        guard pid > 0 else { return 0 }
        var status: Int32 = 0
        guard eventually(timeout: timeout, { waitpid(pid, &status, WNOHANG) == pid }) else { return nil }
        pid = 0
        return status
    }

    /// SIGKILL and reap.
    public func kill9() {
        guard pid > 0 else { return }
        kill(pid, SIGKILL)
        _ = wait()
    }

    public func stop() {
        lock.withLock { reading = false }
        if pid > 0 {
            kill(pid, SIGKILL)
            _ = wait()
        }
    }
}
