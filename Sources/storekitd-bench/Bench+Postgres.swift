import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire

// The PostgreSQL ledger (`--only postgres`): storekitd on a PostgreSQL 15 of the bench's own,
// beside the same daemon on SQLite and the Redis peer, measured one after the other in the same
// run (purchase cycles, latency at a steady rate), then a fleet: two daemons on one database and
// the time a change made through one takes to reach an observer on the other. Beside each
// client count's cycles, the same server's own commit rate: pgbench's one-`INSERT` transactions
// at as many clients, so that the ledger's cycles read as a share of what the server commits at
// that concurrency on this machine, not only against SQLite's. PostgreSQL runs
// the way the tests run it (`PostgresServer`: initdb and pg_ctl as the user postgres in a
// temporary directory, a Unix socket only), so this phase needs root and postgresql-15; without
// them it is skipped with the reason.
extension Bench {
    /// PostgreSQL's settings that decide durability and commit cost, as the report states them.
    static let reportedSettings = ["fsync", "synchronous_commit", "wal_sync_method", "full_page_writes", "wal_level",
                                   "commit_delay", "shared_buffers", "max_wal_size"]

    func runPostgres() throws {
        if let reason = PostgresServer.unavailableReason {
            log("PostgreSQL ledger: skipped: \(reason)")
            ledgerNotes.append("Skipped: \(reason).")
            return
        }
        log("PostgreSQL ledger: starting PostgreSQL 15…")
        let loadBefore = Self.loadAverage()
        defer { ledgerNotes.append("Load average (1 min) at the start of this phase \(loadBefore), at its end \(Self.loadAverage()).") }
        let server = try PostgresServer()
        defer { server.remove() }
        try server.sql("CREATE DATABASE bench")
        try server.sql("CREATE DATABASE fleet")
        try server.sql("CREATE DATABASE commits")
        try server.sql("CREATE TABLE commit_rate (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, client integer NOT NULL, "
                       + "at timestamptz NOT NULL DEFAULT now())", database: "commits")
        let version = try server.sql("SHOW server_version")
        let list = Self.reportedSettings.map { "'\($0)'" }.joined(separator: ", ")
        let settings = try server.sql("SELECT string_agg(name || '=' || current_setting(name), ', ' ORDER BY name) FROM pg_settings WHERE name IN (\(list))")
        ledgerNotes.append("PostgreSQL \(version), Unix socket, data directory on the same disk as the SQLite ledger: \(settings) "
                           + "(the daemon also sets synchronous_commit = on in every transaction).")

        let ledger = try postgresDaemon("pg", host: "host-a", conninfo: server.connectionString(database: "bench"))
        defer { ledger.stop() }
        try ledger.start()
        try postgresCycles(on: ledger, server: server)
        try postgresLatency(on: ledger)
        ledger.stop()

        log("PostgreSQL ledger: cross-host delivery, two daemons on one database…")
        let hostA = try postgresDaemon("pg-host-a", host: "host-a", conninfo: server.connectionString(database: "fleet"))
        defer { hostA.stop() }
        let hostB = try postgresDaemon("pg-host-b", host: "host-b", conninfo: server.connectionString(database: "fleet"))
        defer { hostB.stop() }
        try hostA.start()
        try hostB.start()
        let (crossHost, sameHost) = try askToBuyDelivery(from: hostA, to: hostB, samples: quick ? 100 : 500)
        let (cross50, cross99) = Self.percentiles(crossHost)
        let (same50, same99) = Self.percentiles(sameHost)
        ledgerFigures.append(LedgerFigure(name: "cross-host delivery p50 (approve on A → push on B)", unit: "ms",
                                          postgres: cross50, sqlite: nil, redis: nil))
        ledgerFigures.append(LedgerFigure(name: "cross-host delivery p99 (approve on A → push on B)", unit: "ms",
                                          postgres: cross99, sqlite: nil, redis: nil))
        ledgerFigures.append(LedgerFigure(name: "same-host delivery p50 (approve on B → push on B)", unit: "ms",
                                          postgres: same50, sqlite: nil, redis: nil))
        ledgerFigures.append(LedgerFigure(name: "same-host delivery p99 (approve on B → push on B)", unit: "ms",
                                          postgres: same99, sqlite: nil, redis: nil))
        ledgerNotes.append("Delivery: \(crossHost.count + sameHost.count) Ask to Buy requests made by an observer's app on host B, "
                           + "approved alternately through host A's and host B's control socket, each timed from sending `approve` "
                           + "to the observer on B receiving the purchased transaction, then finished on B.")
    }

    /// The machine's 1-minute load average, as text (other builds on it make every figure noisy).
    static func loadAverage() -> String {
        var load = [Double](repeating: 0, count: 1)
        return getloadavg(&load, 1) == 1 ? String(format: "%.1f", load[0]) : "unknown"
    }

    /// A daemon on the PostgreSQL database `conninfo` names, as host `host` of a fleet.
    func postgresDaemon(_ name: String, host: String, conninfo: String) throws -> BenchDaemon {
        mkdir(directory + "/" + name, 0o755)
        return try BenchDaemon(directory: directory + "/" + name, binary: daemon.binary, appCount: Self.appCount,
                               dropIn: "[Store]\nDatabase=\(conninfo)\nHostName=\(host)\n")
    }

    /// Purchase cycles at 1, 8 and 100 clients: SQLite, PostgreSQL, then the peer, then
    /// PostgreSQL's own commit rate at as many clients, each after the disk settled, so that each
    /// meets the same machine as the others. Issue 33's targets: the PostgreSQL ledger at least
    /// 0.3× SQLite's cycles at 1 client, 0.5× at 8 and 100.
    func postgresCycles(on ledger: BenchDaemon, server: PostgresServer) throws {
        let pgbench = PostgresServer.binaries + "/pgbench"
        let canBench = FileManager.default.isExecutableFile(atPath: pgbench)
        if !canBench {
            ledgerNotes.append("PostgreSQL's own commit rate: not measured: \(pgbench) is missing (Debian's postgresql-15 installs it).")
        }
        for (clients, processes) in [(1, 1), (8, 8), (100, 4)] {
            log("PostgreSQL ledger: purchase cycles with \(clients) clients (SQLite, PostgreSQL, peer)…")
            settleDisk()
            let sqlite = try cycles(kind: "storekit", socket: daemon.clientSocket, clients: clients, processes: processes, firstApp: 0)
            settleDisk()
            let postgres = try cycles(kind: "storekit", socket: ledger.clientSocket, clients: clients, processes: processes, firstApp: 0)
            settleDisk()
            let peer = try cycles(kind: "redis", socket: redis.socketPath, clients: clients, processes: processes,
                                  firstApp: 1_000 + clients * 10)
            ledgerFigures.append(LedgerFigure(name: "purchase cycles/s, \(clients) client\(clients == 1 ? "" : "s")", unit: "cycles/s",
                                              postgres: postgres, sqlite: sqlite, redis: peer,
                                              minimumOverSQLite: clients == 1 ? 0.3 : 0.5))
            guard canBench else { continue }
            log("PostgreSQL ledger: PostgreSQL's own commit rate with \(clients) client\(clients == 1 ? "" : "s") (pgbench, one INSERT per transaction)…")
            settleDisk()
            do {
                commitRates.append(CommitRate(clients: clients, commits: try pgbenchCommits(pgbench, server: server, clients: clients),
                                              cycles: postgres))
            } catch {
                // The ledger's figures stand without it: said, not the phase's end.
                ledgerNotes.append("PostgreSQL's own commit rate at \(clients) client\(clients == 1 ? "" : "s"): not measured: \(error)")
            }
        }
        if canBench {
            ledgerNotes.append("PostgreSQL's own commit rate: pgbench -n -f SCRIPT -c N -j min(N,4) -T \(Int(cycleSeconds)) on the database "
                               + "commits of the same server, SCRIPT one autocommitted `INSERT INTO commit_rate (client) VALUES (:client_id)` "
                               + "(a bigint identity key, two columns), PGOPTIONS='-c synchronous_commit=on'; its tps without the "
                               + "connections' set-up. A purchase cycle is two of the ledger's commits (payment, finish): cycles/commits "
                               + "is the cycles over pgbench's commits as they are, cycles×2/commits the ledger's commits over them.")
        }
    }

    /// pgbench's transactions per second at `clients` clients, each transaction one `INSERT`
    /// committed on its own with synchronous_commit = on (the server's default, said again so
    /// that no setting of the cluster changes it): PostgreSQL's own rate of durable commits.
    func pgbenchCommits(_ pgbench: String, server: PostgresServer, clients: Int) throws -> Double {
        let script = directory + "/pgbench-insert.sql"
        try write(script, "INSERT INTO commit_rate (client) VALUES (:client_id);\n")
        let output = directory + "/pgbench-\(clients).out"
        let errors = directory + "/pgbench-\(clients).err"
        let environment = currentEnvironment().filter { !$0.hasPrefix("PGOPTIONS=") } + ["PGOPTIONS=-c synchronous_commit=on"]
        let pid = try spawn(pgbench, [pgbench, "-n", "-f", script, "-c", String(clients), "-j", String(min(clients, 4)),
                                      "-T", String(Int(cycleSeconds)), "-h", server.socketDirectory, "-U", PostgresServer.user,
                                      "commits"], environment: environment, stdoutPath: output, stderrPath: errors)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        // "tps = 1234.567890 (without initial connection time)"
        let tps = text.split(separator: "\n").first { $0.hasPrefix("tps = ") }
            .flatMap { Double($0.dropFirst(6).prefix { !$0.isWhitespace }) }
        guard status == 0, let tps else {
            let reason = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
            throw BenchError("pgbench with \(clients) clients failed (status \(status)): \(text)\(reason)")
        }
        return tps
    }

    /// Latency p50/p99 at 1,000 payments/s, or at the highest of 750, 500, 250 and 100/s that
    /// PostgreSQL sustains (said in a note); SQLite and the peer at the same rate. Each rate tried
    /// buys in an app of its own: the ledger's cost per payment grows with the queue's history
    /// (docs/performance.md), and one try's history would slow the next.
    func postgresLatency(on ledger: BenchDaemon) throws {
        let seconds = quick ? 1.0 : 5.0
        var chosen: (rate: Int, samples: [Double])?
        for (index, rate) in [1_000, 750, 500, 250, 100].enumerated() {
            log("PostgreSQL ledger: latency at \(rate) payments/s…")
            settleDisk()
            let samples = try storekitLatencySamples(socket: ledger.clientSocket, app: BenchDaemon.appID(101 + index),
                                                     count: Int(Double(rate) * seconds), interval: UInt64(1_000_000_000 / rate),
                                                     keyPrefix: "pglat-\(rate)")
            chosen = (rate, samples)
            if Self.sustained(samples, seconds: seconds) { break }
            ledgerNotes.append("Latency: PostgreSQL did not sustain \(rate) payments/s: the last tenth of the payments waited "
                               + "\(format(Self.backlogGrowth(samples))) ms longer than the first (p50 \(format(Self.percentiles(samples).0)) ms).")
        }
        guard let (rate, samples) = chosen else { return }
        if rate != 1_000 {
            ledgerNotes.append("Latency: the figures are at \(rate) payments/s, the highest rate tried that PostgreSQL sustained"
                               + (Self.sustained(samples, seconds: seconds) ? "" : " (none was)") + "; SQLite and the peer at the same rate.")
        }
        let count = Int(Double(rate) * seconds)
        let interval = UInt64(1_000_000_000 / rate)
        settleDisk()
        let (sqlite50, sqlite99) = Self.percentiles(try storekitLatencySamples(socket: daemon.clientSocket, app: BenchDaemon.appID(106),
                                                                              count: count, interval: interval, keyPrefix: "pglat-\(rate)"))
        settleDisk()
        let (redis50, redis99) = try redisLatency(stream: "pglatency-\(rate)", interval: interval, count: count)
        let (postgres50, postgres99) = Self.percentiles(samples)
        let label = rate == 1_000 ? "1,000" : String(rate)
        ledgerFigures.append(LedgerFigure(name: "latency p50 at \(label)/s", unit: "ms", postgres: postgres50, sqlite: sqlite50, redis: redis50))
        ledgerFigures.append(LedgerFigure(name: "latency p99 at \(label)/s", unit: "ms", postgres: postgres99, sqlite: sqlite99, redis: redis99))
    }

    /// Whether a run of `seconds` at a steady rate was kept up with: the backlog did not grow, and
    /// the median payment did not wait a fifth of the run (a daemon still busy with an earlier
    /// phase's backlog when the run starts makes the first tenth wait as long as the last, so
    /// the growth alone passed a run whose p50 was 15 s).
    static func sustained(_ samples: [Double], seconds: Double) -> Bool {
        backlogGrowth(samples) <= 5 + 0.02 * seconds * 1000 && percentiles(samples).0 <= 0.2 * seconds * 1000
    }

    /// How much longer (ms, median) the last tenth of a steady run's payments waited than the
    /// first tenth: near zero when the rate was kept up; a backlog makes every later payment wait
    /// longer (a daemon 2% short of the rate is 100 ms behind after 5 s).
    static func backlogGrowth(_ samples: [Double]) -> Double {
        let tenth = max(1, samples.count / 10)
        return percentiles(Array(samples.suffix(tenth))).0 - percentiles(Array(samples.prefix(tenth))).0
    }

    /// Ask to Buy requests made by an app observed on `b`, each approved through a control
    /// socket and timed from sending `approve` to `b`'s observer receiving the purchased
    /// transaction. Odd samples go through `a` (the change reaches `b` through PostgreSQL's
    /// LISTEN/NOTIFY), even ones through `b` itself (delivered by the daemon that made it), so
    /// that both are measured on the same machine at the same time. Returns (cross-host,
    /// same-host) samples in ms; a few first ones of each are left out (connections warming).
    func askToBuyDelivery(from a: BenchDaemon, to b: BenchDaemon, samples: Int) throws -> ([Double], [Double]) {
        let observer = try WireConnection(path: b.clientSocket)
        _ = try observer.hello(app: BenchDaemon.appID(7))
        try observer.send(.subscribe(requestID: 1))
        _ = try observer.awaitResult(1)
        let controls = [try WireConnection(path: a.controlSocket), try WireConnection(path: b.controlSocket)]
        for control in controls { _ = try control.hello(app: "") }
        let warmUp = 10
        var crossHost: [Double] = []
        var sameHost: [Double] = []
        var requestID: UInt32 = 1
        var controlID: UInt32 = 0
        for index in 0..<(2 * (samples + warmUp)) {
            requestID += 1
            try observer.send(.addPayment(.init(requestID: requestID, key: "ask-\(index)", productID: "bench.coins", quantity: 1,
                                                simulatesAskToBuy: true)))
            let id = try observer.awaitResult(requestID)   // the deferred transaction's id
            let throughA = index % 2 == 0
            let control = controls[throughA ? 0 : 1]
            controlID += 1
            let start = monotonicNanoseconds()
            try control.send(.control(requestID: controlID, command: "approve", arguments: ["id=\(id)"]))
            var delivered = false
            while !delivered {
                if case .updated(let records) = try observer.receive() {
                    delivered = records.contains { $0.id == id && $0.state == .purchased }
                }
            }
            let elapsed = Double(monotonicNanoseconds() - start) / 1e6
            try control.awaitControlResult(controlID)
            requestID += 1
            try observer.send(.finish(requestID: requestID, transactionID: id))
            _ = try observer.awaitResult(requestID)
            if index >= 2 * warmUp {
                if throughA { crossHost.append(elapsed) } else { sameHost.append(elapsed) }
            }
            usleep(2_000)
        }
        return (crossHost, sameHost)
    }
}

extension WireConnection {
    /// Receives until the control socket's answer to `requestID`; throws when it is not ok.
    func awaitControlResult(_ requestID: UInt32) throws {
        while true {
            if case .controlResult(let id, let code, let message, _) = try receive(), id == requestID {
                guard code == .ok else { throw BenchError("control request \(requestID) refused: \(code.name) \(message)") }
                return
            }
        }
    }
}
