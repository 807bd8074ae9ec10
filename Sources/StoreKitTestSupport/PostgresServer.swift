import Foundation

/// A real PostgreSQL 15 (Debian's `postgresql-15`) for tests: a cluster made with `initdb` in a
/// temporary directory, run by `pg_ctl` as the unprivileged user `postgres` (PostgreSQL refuses
/// root), listening on a Unix socket in that directory only (no TCP). `stop()`/`start()` play
/// PostgreSQL going away and coming back; `remove()` stops it and deletes the directory.
///
/// `shared()` is one server for the whole test process (initdb takes ~0.7 s), stopped and removed
/// when the process exits; each test takes a schema of its own on it (`freshConnectionString`).
public final class PostgresServer: @unchecked Sendable {
    public static let binaries = "/usr/lib/postgresql/15/bin"
    /// The superuser initdb makes; the socket allows it without a password (`-A trust`), and
    /// only users of this machine reach the socket.
    public static let user = "storekit"

    /// Why no PostgreSQL can run here (for a skip with a reason); nil when one can.
    public static var unavailableReason: String? {
        if geteuid() != 0 { return "needs root: PostgreSQL runs as user postgres (runuser), which only root may become" }
        for tool in ["\(binaries)/initdb", "\(binaries)/pg_ctl", "/usr/bin/psql", "/usr/sbin/runuser"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            return "\(tool) is missing (make test installs postgresql-15)"
        }
        if getpwnam("postgres") == nil { return "there is no user postgres (the postgresql-15 package makes it)" }
        return nil
    }

    public let directory: TemporaryDirectory
    /// Where the socket is: libpq's `host=`.
    public var socketDirectory: String { directory.path }
    public var dataDirectory: String { directory.file("data") }
    public var logFile: String { directory.file("log") }

    /// Makes and starts a cluster. Throws when PostgreSQL cannot run here or did not start.
    public init() throws {
        if let reason = Self.unavailableReason { throw Failure(message: reason) }
        directory = TemporaryDirectory("skpg")
        do {
            guard let postgres = getpwnam("postgres") else { throw Failure(message: "no user postgres") }
            guard chown(directory.path, postgres.pointee.pw_uid, postgres.pointee.pw_gid) == 0, chmod(directory.path, 0o755) == 0 else {
                throw Failure(message: "cannot give \(directory.path) to user postgres: errno \(errno)")
            }
            try asPostgres("initdb", ["-D", dataDirectory, "-A", "trust", "-U", Self.user, "-E", "UTF8", "--no-sync"])
            try start()
        } catch {
            directory.remove()
            throw error
        }
    }

    /// Starts (or starts again) the server and waits until it accepts connections.
    public func start() throws {
        try asPostgres("pg_ctl", ["-D", dataDirectory, "-l", logFile, "-w", "-t", "30", "start",
                                  "-o", "-k \(socketDirectory) -c listen_addresses= -c max_connections=200"])
    }

    /// Stops the server: `immediate` is a crash (no shutdown checkpoint), else a fast shutdown.
    public func stop(immediate: Bool = false) throws {
        try asPostgres("pg_ctl", ["-D", dataDirectory, "-m", immediate ? "immediate" : "fast", "-w", "-t", "30", "stop"])
    }

    /// Stops the server (if it runs) and deletes its directory.
    public func remove() {
        if FileManager.default.fileExists(atPath: dataDirectory + "/postmaster.pid") {
            _ = try? asPostgres("pg_ctl", ["-D", dataDirectory, "-m", "immediate", "-w", "stop"])
        }
        directory.remove()
    }

    /// A libpq connection string for `database`; `schema`: tables go there (its search_path).
    public func connectionString(database: String = "postgres", schema: String? = nil, user: String = PostgresServer.user) -> String {
        var conninfo = "host=\(socketDirectory) user=\(user) dbname=\(database)"
        if let schema { conninfo += " options='-c search_path=\(schema)'" }
        return conninfo
    }

    /// Runs SQL through `psql` (stops at the first error); its output, unaligned, without headers.
    @discardableResult
    public func sql(_ statements: String, database: String = "postgres", user: String = PostgresServer.user) throws -> String {
        let (status, output) = try run(["/usr/bin/psql", connectionString(database: database, user: user), "-X", "-q", "-A", "-t",
                                        "-v", "ON_ERROR_STOP=1", "-c", statements])
        guard status == 0 else { throw Failure(message: "psql failed (\(status)): \(output)") }
        return output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A new, empty schema for one test, and the connection string that uses it.
    public func freshConnectionString(label: String = "t") throws -> String {
        let schema = label + "_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        try sql("CREATE SCHEMA \(schema)")
        return connectionString(schema: schema)
    }

    private func asPostgres(_ tool: String, _ arguments: [String]) throws {
        let (status, output) = try run(["/usr/sbin/runuser", "-u", "postgres", "--", "\(Self.binaries)/\(tool)"] + arguments)
        guard status == 0 else {
            let log = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
            throw Failure(message: "\(tool) \(arguments.joined(separator: " ")) failed (\(status)): \(output)\(log.suffix(2000))")
        }
    }

    /// Runs `argv` to its end with posix_spawn and waitpid on this thread: no other thread is
    /// needed to notice the exit (tests may hold every thread of the pool meanwhile). pg_ctl's
    /// own `-t` bounds how long it waits for the server.
    private func run(_ argv: [String]) throws -> (status: Int32, output: String) {
        let outputPath = directory.file("run-\(UUID().uuidString).out")
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let arguments = argv.map { strdup($0) } + [nil]
        defer { for pointer in arguments { free(pointer) } }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, argv[0], &actions, nil, arguments, environ)
        guard spawned == 0 else { throw Failure(message: "cannot run \(argv[0]): errno \(spawned)") }
        var status: Int32 = 0
        while waitpid(child, &status, 0) == -1 && errno == EINTR {}
        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // WIFEXITED / WEXITSTATUS, which do not import.
        return ((status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f), output)
    }

    public struct Failure: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    // MARK: One server per test process

    private static let sharedLock = NSLock()
    nonisolated(unsafe) private static var sharedServer: Result<PostgresServer, Failure>?

    /// The process's server, started at the first call and removed when the process exits.
    public static func shared() throws -> PostgresServer {
        sharedLock.lock()
        defer { sharedLock.unlock() }
        if let sharedServer { return try sharedServer.get() }
        let made: Result<PostgresServer, Failure>
        do {
            made = .success(try PostgresServer())
            atexit {
                if case .success(let server)? = PostgresServer.sharedServer { server.remove() }
            }
        } catch {
            made = .failure(error as? Failure ?? Failure(message: "\(error)"))
        }
        sharedServer = made
        return try made.get()
    }
}
