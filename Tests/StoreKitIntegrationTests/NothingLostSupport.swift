import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

// Helpers of the "nothing lost" suites (crash consistency, full disk, corrupt databases, backup,
// SIGTERM under load): a daemon started the way a service manager starts it (default signal mask,
// optionally inside another mount namespace), the sqlite3 CLI, and a ledger of everything the
// daemon told its clients, checked against the database after every crash.

// MARK: - A daemon started like a service

/// A real `storekitd` on a `DaemonProcess`'s directories and configuration, started with the
/// default signal mask and dispositions (as systemd starts it, whatever the test runner blocks),
/// optionally behind a command prefix such as `nsenter -t PID -m --`.
final class SupervisedDaemon: @unchecked Sendable {
    let base: DaemonProcess
    /// Put before the daemon's command line (e.g. nsenter into a mount namespace).
    var launchPrefix: [String] = []
    private(set) var process: Process?
    private var exited = DispatchSemaphore(value: 0)

    init() throws {
        base = try DaemonProcess()
    }

    deinit { remove() }

    var databasePath: String { base.databasePath }
    var stateDirectory: String { base.stateDirectory }
    var pid: Int32 { process?.processIdentifier ?? 0 }
    var isRunning: Bool { process?.isRunning ?? false }

    /// Resets the signal mask and the dispositions storekitd relies on, then execs the daemon.
    static let unmaskScript = """
        import os, signal, sys
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
            signal.signal(s, signal.SIG_DFL)
        os.execv(sys.argv[1], sys.argv[1:])
        """

    /// Starts the daemon and waits until its control socket answers.
    func start(timeout: Double = 15) throws {
        try FileManager.default.createDirectory(atPath: base.runtimeDirectory, withIntermediateDirectories: true)
        let command = launchPrefix + ["/usr/bin/python3", "-c", Self.unmaskScript, Paths.binary("storekitd")] + base.arguments
        let environment = ProcessInfo.processInfo.environment.filter {
            !["NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC"].contains($0.key)
        }
        let (process, exited) = try base.launch(command, environment: environment)
        self.process = process
        self.exited = exited
        if try !base.waitUntilReady(process, timeout: timeout) {
            throw IntegrationFailure("storekitd exited with \(process.terminationStatus) while starting:\n\(base.log(tail: 20))")
        }
    }

    /// SIGKILL: a crash at whatever point the daemon is.
    func crash() {
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        _ = exited.wait(timeout: .now() + 10)
    }

    /// How a stop ended.
    struct Exit: CustomStringConvertible {
        var status: Int32
        var bySignal: Bool
        var seconds: Double
        var description: String { bySignal ? "killed by signal \(status) after \(seconds) s" : "exit \(status) after \(seconds) s" }
    }

    /// SIGTERM and wait (SIGKILL after `timeout`).
    @discardableResult
    func terminate(timeout: Double = 15) -> Exit {
        guard let process else { return Exit(status: 0, bySignal: false, seconds: 0) }
        let started = Date()
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            exited.wait()
        }
        return Exit(status: process.terminationStatus, bySignal: process.terminationReason == .uncaughtSignal,
                    seconds: Date().timeIntervalSince(started))
    }

    func remove() {
        crash()
        base.remove()
    }
}

// MARK: - sqlite3 CLI

/// Runs the sqlite3 command-line shell on `database` (as an outside observer would).
/// `prefix` runs it elsewhere, e.g. in another mount namespace (SQLite resolves symbolic links
/// such as /proc/PID/root, so a database there cannot be reached through that path).
func sqlite3(_ database: String, _ sql: String, readOnly: Bool = false, json: Bool = false, prefix: [String] = []) throws -> String {
    let options = (readOnly ? ["-readonly"] : []) + (json ? ["-json"] : [])
    let command = prefix + ["/usr/bin/sqlite3"] + options + [database, sql]
    let result = try ProcessRunner.run(command[0], Array(command.dropFirst()), timeout: 30)
    guard result.status == 0 else {
        throw IntegrationFailure("sqlite3 \(database) '\(sql)' failed (\(result.status)): \(result.stderr)")
    }
    return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// `PRAGMA integrity_check` through the sqlite3 CLI.
func integrityCheck(_ database: String, prefix: [String] = []) throws -> String {
    try sqlite3(database, "PRAGMA integrity_check;", prefix: prefix)
}

func fileBytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

// MARK: - What the clients were told

/// Everything the daemon told any client, per transaction: the furthest state and whether it
/// was finished. Thread-safe; shared by the client threads of a test.
final class ToldLedger: @unchecked Sendable {
    struct Told {
        var uid: UInt32
        var state: TransactionState
        var finished = false
        var sequence: UInt64
    }

    private let lock = NSLock()
    private var told: [UInt64: Told] = [:]
    /// Idempotency key → the transaction id the daemon answered with.
    private var answeredKeys: [String: UInt64] = [:]
    /// Keys sent whose answer never came (the daemon died or the connection broke).
    private var unansweredKeys: [String: UInt32] = [:]
    private var maximumSequence: [UInt32: UInt64] = [:]
    private var problems: [String] = []
    /// What changed since `takeChanges()` was last called.
    private var changedIDs = Set<UInt64>()
    private var changedKeys = Set<String>()

    func record(_ records: [TransactionRecord], finished: Bool = false) {
        lock.withLock {
            for record in records {
                var entry = told[record.id] ?? Told(uid: record.uid, state: record.state, sequence: record.sequence)
                if Self.rank(record.state) >= Self.rank(entry.state) { entry.state = record.state }
                if finished || record.finished { entry.finished = true }
                entry.sequence = max(entry.sequence, record.sequence)
                told[record.id] = entry
                changedIDs.insert(record.id)
                maximumSequence[record.uid] = max(maximumSequence[record.uid] ?? 0, record.sequence)
            }
        }
    }

    func markFinished(_ id: UInt64) {
        lock.withLock {
            told[id]?.finished = true
            changedIDs.insert(id)
        }
    }

    func sent(key: String, uid: UInt32) { lock.withLock { unansweredKeys[key] = uid } }

    func answered(key: String, id: UInt64?) {
        lock.withLock {
            unansweredKeys[key] = nil
            if let id {
                if let earlier = answeredKeys[key], earlier != id {
                    problems.append("key \(key) was answered with \(earlier) and later with \(id)")
                }
                answeredKeys[key] = id
                changedKeys.insert(key)
            }
        }
    }

    func problem(_ text: String) { lock.withLock { problems.append(text) } }

    var allProblems: [String] { lock.withLock { problems } }

    /// The entries and answered keys changed since the last call (all of them at the first).
    func takeChanges() -> (entries: [UInt64: Told], keys: [String: UInt64]) {
        lock.withLock {
            defer {
                changedIDs.removeAll()
                changedKeys.removeAll()
            }
            return (Dictionary(uniqueKeysWithValues: changedIDs.compactMap { id in told[id].map { (id, $0) } }),
                    Dictionary(uniqueKeysWithValues: changedKeys.compactMap { key in answeredKeys[key].map { (key, $0) } }))
        }
    }
    var entries: [UInt64: Told] { lock.withLock { told } }
    var keys: [String: UInt64] { lock.withLock { answeredKeys } }
    var pendingKeys: [String: UInt32] { lock.withLock { unansweredKeys } }
    func finishedIDs(uid: UInt32) -> Set<UInt64> {
        lock.withLock { Set(told.filter { $0.value.uid == uid && $0.value.finished }.keys) }
    }
    func highestSequence(uid: UInt32) -> UInt64 { lock.withLock { maximumSequence[uid] ?? 0 } }

    /// How far along StoreKit's state machine a state is (a later state never goes back).
    static func rank(_ state: TransactionState) -> Int {
        switch state {
        case .purchasing: 0
        case .deferred: 1
        default: 2
        }
    }

    /// Whether the stored `state` is `told` or a legal successor of it.
    static func reaches(_ state: String, from told: TransactionState) -> Bool {
        switch told {
        case .purchasing: true
        case .deferred: ["deferred", "purchased", "failed"].contains(state)
        default: state == told.name
        }
    }
}

/// A transaction row as the sqlite3 CLI reads it from the database file.
struct StoredRow {
    var id: UInt64
    var uid: UInt32
    var app: String
    var state: TransactionState
    var finished: Bool
    var sequence: UInt64
    var paymentKey: String?
}

/// The transaction rows of `database` (all, or those `condition` selects: an SQL expression).
func storedRows(_ database: String, where condition: String? = nil, prefix: [String] = []) throws -> [StoredRow] {
    let filter = condition.map { " WHERE " + $0 } ?? ""
    let json = try sqlite3(database, "SELECT id, uid, app, state, finished, sequence, payment_key FROM transactions\(filter) ORDER BY id;",
                           readOnly: true, json: true, prefix: prefix)
    guard !json.isEmpty else { return [] }
    guard let rows = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]] else {
        throw IntegrationFailure("sqlite3 -json answered \(json.prefix(200))")
    }
    return try rows.map { row in
        guard let id = row["id"] as? Int, let uid = row["uid"] as? Int, let app = row["app"] as? String,
              let state = (row["state"] as? Int).flatMap({ TransactionState(rawValue: UInt8($0)) }),
              let finished = row["finished"] as? Int, let sequence = row["sequence"] as? Int
        else { throw IntegrationFailure("unexpected row \(row)") }
        return StoredRow(id: UInt64(id), uid: UInt32(uid), app: app, state: state, finished: finished != 0,
                         sequence: UInt64(sequence), paymentKey: row["payment_key"] as? String)
    }
}

/// Checks the database file (through the sqlite3 CLI, with the daemon running) against what
/// clients were told; returns every violation found. One check reads every row; the checks of a
/// kept `LedgerCheck` read only the rows changed since the one before (each queue's rows above
/// its highest sequence seen) and compare a sum over the whole table with the rows kept, so
/// that a run of many checks (the torture test's cycles) costs what it adds, not its square.
final class LedgerCheck {
    /// Every row read so far, as last read.
    private var rows: [UInt64: StoredRow] = [:]
    /// Per queue ("uid/app"): the highest sequence read, and the sequences its rows hold.
    private var highestSequence: [String: UInt64] = [:]
    private var sequences: [String: [UInt64: UInt64]] = [:]   // sequence → id
    /// "uid/app/key" → id, and key → id.
    private var idByKey: [String: UInt64] = [:]
    private var idByPlainKey: [String: UInt64] = [:]
    private var keyViolations: [String] = []
    /// Per queue: rows, the sum of their sequences, finished rows (of `rows`).
    private var sums: [String: (count: Int, sequences: UInt64, finished: Int)] = [:]
    /// Answered keys checked so far, and the ids keys were answered with.
    private var answered: [String: UInt64] = [:]
    private var answeredIDs: [UInt64: String] = [:]
    /// A fresh check reads everything the told ledger holds; a kept one what changed since.
    private var first = true

    static func queue(_ uid: UInt32, _ app: String) -> String { "\(uid)/\(app)" }

    /// `integrity`: also run SQLite's full integrity check (it reads the whole file).
    func violations(_ daemon: SupervisedDaemon, _ ledger: ToldLedger, integrity: Bool = true) throws -> [String] {
        var violations: [String] = []
        // A control command makes the daemon commit to SQLite what its commit log already holds.
        _ = try daemon.base.ctl(["status"])
        let database = daemon.databasePath
        try read(changedRowsOf: database, into: &violations)

        // What clients were told since the last check (everything, at the first).
        let changes = first ? (entries: ledger.entries, keys: ledger.keys) : ledger.takeChanges()
        if first { _ = ledger.takeChanges() }
        first = false
        // Every transaction any client heard of exists, at least as far along as it was told
        // (the rows not read again are vouched for by the per-queue sums).
        for (id, told) in changes.entries {
            guard let row = rows[id] else {
                violations.append("transaction \(id) (told \(told.state.name)\(told.finished ? ", finished" : "")) is missing")
                continue
            }
            if !ToldLedger.reaches(row.state.name, from: told.state) {
                violations.append("transaction \(id) is \(row.state.name), but a client was told \(told.state.name)")
            }
            if told.finished && !row.finished { violations.append("transaction \(id) was acknowledged finished but is not") }
            if row.sequence < told.sequence {
                violations.append("transaction \(id) has sequence \(row.sequence), below the \(told.sequence) a client saw")
            }
        }

        // One row per idempotency key, and it is the one the daemon answered with.
        violations += keyViolations
        for (key, id) in changes.keys {
            if let other = answeredIDs[id], other != key { violations.append("payment keys \(other) and \(key) were answered with the same id \(id)") }
            answered[key] = id
            answeredIDs[id] = key
        }
        for (key, id) in answered where idByPlainKey[key] != id {
            violations.append("payment key \(key) was answered with \(id) but the database has \(idByPlainKey[key].map(String.init) ?? "nothing")")
        }

        // The queue's counter is at least every row's sequence.
        let counters = try sqlite3(database, "SELECT uid || '/' || app || ' ' || last FROM sequences;", readOnly: true)
        for line in counters.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let last = UInt64(parts[1]) else { continue }
            if let highest = highestSequence[String(parts[0])], highest > last {
                violations.append("queue \(parts[0]) counter \(last) is below its row sequence \(highest)")
            }
        }

        if integrity {
            let result = try integrityCheck(database)
            if result != "ok" { violations.append("integrity_check: \(result)") }
        }
        return violations
    }

    /// Reads the rows changed since the last read (all at the first), and checks that the rows
    /// not read again are still there as they were: count, sequences and finished rows per queue.
    private func read(changedRowsOf database: String, into violations: inout [String]) throws {
        let known = highestSequence.keys.sorted()
        func literal(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }
        let condition = known.isEmpty ? nil : (known.map { queue -> String in
            let separator = queue.firstIndex(of: "/")!
            return "(uid = \(queue[..<separator]) AND app = \(literal(String(queue[queue.index(after: separator)...]))) "
                + "AND sequence > \(highestSequence[queue]!))"
        } + ["(uid || '/' || app) NOT IN (\(known.map(literal).joined(separator: ", ")))"]).joined(separator: " OR ")
        for row in try storedRows(database, where: condition) {
            let queue = Self.queue(row.uid, row.app)
            if let earlier = rows[row.id] {
                let earlierQueue = Self.queue(earlier.uid, earlier.app)
                if sequences[earlierQueue]?[earlier.sequence] == earlier.id { sequences[earlierQueue]?[earlier.sequence] = nil }
                sums[earlierQueue]!.count -= 1
                sums[earlierQueue]!.sequences &-= earlier.sequence
                sums[earlierQueue]!.finished -= earlier.finished ? 1 : 0
            } else if let key = row.paymentKey {
                let keyed = queue + "/" + key
                if let other = idByKey[keyed], other != row.id {
                    keyViolations.append("payment key \(keyed) has two transactions (\(other), \(row.id))")
                }
                idByKey[keyed] = row.id
                if idByPlainKey[key] == nil { idByPlainKey[key] = row.id }
            }
            let sum = sums[queue] ?? (0, 0, 0)
            sums[queue] = (sum.count + 1, sum.sequences &+ row.sequence, sum.finished + (row.finished ? 1 : 0))
            if let other = sequences[queue]?[row.sequence], other != row.id {
                violations.append("sequence \(row.sequence) appears twice in queue \(queue) (\(other), \(row.id))")
            }
            sequences[queue, default: [:]][row.sequence] = row.id
            highestSequence[queue] = max(highestSequence[queue] ?? 0, row.sequence)
            rows[row.id] = row
        }
        // The whole table in one pass of SQLite's, against the rows kept: a row lost, changed or
        // added below a queue's highest sequence since it was read shows here.
        let expected = sums
        let stored = try sqlite3(database, "SELECT uid || '/' || app, count(*), sum(sequence), sum(finished) FROM transactions GROUP BY uid, app;",
                               readOnly: true)
        var found = Set<String>()
        for line in stored.split(separator: "\n") {
            let parts = line.split(separator: "|").map(String.init)
            guard parts.count == 4 else { continue }
            found.insert(parts[0])
            let want = expected[parts[0]] ?? (0, 0, 0)
            if Int(parts[1]) != want.count || UInt64(parts[2]) != want.sequences || Int(parts[3]) != want.finished {
                violations.append("queue \(parts[0]): the table holds \(parts[1]) rows (sequences \(parts[2]), \(parts[3]) finished); "
                                  + "the rows read hold \(want.count) (sequences \(want.sequences), \(want.finished) finished)")
            }
        }
        for queue in expected.keys where !found.contains(queue) { violations.append("queue \(queue) has no rows any more") }
    }
}

/// One full check: every row read (`LedgerCheck` of its own).
func ledgerViolations(_ daemon: SupervisedDaemon, _ ledger: ToldLedger) throws -> [String] {
    try LedgerCheck().violations(daemon, ledger)
}

// MARK: - Clients on threads

/// A stop flag and a join point for client threads.
final class ClientThreads: @unchecked Sendable {
    private let stopFlag = Atomic<Bool>(false)
    private let group = DispatchGroup()

    var stopping: Bool { stopFlag.load(ordering: .relaxed) }
    func stop() { stopFlag.store(true, ordering: .relaxed) }

    func spawn(_ name: String, _ body: @escaping @Sendable () -> Void) {
        group.enter()
        let thread = Thread { [group] in
            body()
            group.leave()
        }
        thread.name = name
        thread.start()
    }

    /// Waits for every thread; false when one is still running after `timeout`.
    func join(timeout: Double = 30) -> Bool { group.wait(timeout: .now() + timeout) == .success }
}

/// One observer connection that buys and finishes, telling the ledger everything it hears and
/// checking what it hears as it goes: no finished transaction delivered again, sequence numbers
/// rising on the connection. Its random choices (what to finish, and when) and its payment keys
/// come from `seed`.
final class BuyingClient {
    let uid: UInt32
    let ledger: ToldLedger
    let client: Client
    private var lastSequence: UInt64 = 0
    private var unfinished: [UInt64] = []
    private var generator: SeededRandomNumberGenerator

    /// Connects as `uid`, subscribes, and checks the snapshot against what was finished before.
    init(_ daemon: DaemonProcess, uid: UInt32, ledger: ToldLedger, seed: UInt64 = .random(in: .min ... .max)) throws {
        self.uid = uid
        self.ledger = ledger
        generator = SeededRandomNumberGenerator(seed: seed)
        client = try Client(daemon, asUID: uid)
        let finishedBefore = ledger.finishedIDs(uid: uid)
        let previousHighest = ledger.highestSequence(uid: uid)
        let snapshot = try client.subscribe()
        for record in snapshot where finishedBefore.contains(record.id) {
            ledger.problem("transaction \(record.id) of uid \(uid) was delivered again after it was finished")
        }
        ledger.record(snapshot)
        unfinished = snapshot.filter { $0.state.isFinishable }.map(\.id)
        lastSequence = max(previousHighest, snapshot.map(\.sequence).max() ?? 0)
    }

    /// Notes the pushes of a reply: each later than the last on this connection.
    private func take(_ reply: Reply) {
        for message in reply.pushes {
            switch message {
            case .updated(let records), .removed(let records):
                for record in records where record.uid == uid {
                    if record.sequence <= lastSequence {
                        ledger.problem("uid \(uid): sequence \(record.sequence) of \(record.id) after \(lastSequence)")
                    }
                    lastSequence = max(lastSequence, record.sequence)
                }
                if case .removed = message {
                    ledger.record(records, finished: true)
                    unfinished.removeAll { id in records.contains { $0.id == id } }
                } else {
                    ledger.record(records)
                    for record in records where record.state.isFinishable && !unfinished.contains(record.id) {
                        unfinished.append(record.id)
                    }
                }
            default:
                break
            }
        }
    }

    /// Pays with `key` (a new one unless given); the transaction id when the daemon said ok.
    @discardableResult
    func buy(_ product: String = Sample.coins, key given: String? = nil) throws -> (code: ResultCode, id: UInt64?) {
        let key = given ?? newKey()
        ledger.sent(key: key, uid: uid)
        let reply = try client.addPayment(product, key: key)
        take(reply)
        ledger.answered(key: key, id: reply.code == .ok ? reply.value : nil)
        return (reply.code, reply.code == .ok ? reply.value : nil)
    }

    /// A new payment key: 128 bits from the generator, in hex.
    private func newKey() -> String {
        String(format: "%016llx%016llx", generator.next(), generator.next())
    }

    /// Finishes `id`; true when acknowledged.
    @discardableResult
    func finish(_ id: UInt64) throws -> Bool {
        let reply = try client.finish(id)
        take(reply)
        if reply.code == .ok {
            ledger.markFinished(id)
            unfinished.removeAll { $0 == id }
            return true
        }
        return false
    }

    /// Finishes one of the unfinished transactions it knows, at random; false when none.
    @discardableResult
    func finishOne() throws -> Bool {
        guard !unfinished.isEmpty else { return false }
        let index = Int.random(in: 0..<unfinished.count, using: &generator)
        return try finish(unfinished[index])
    }

    /// Buys and finishes until `threads` stop or the connection fails (the daemon died).
    func run(until threads: ClientThreads, finishProbability: Double = 0.6) {
        do {
            while !threads.stopping {
                try buy()
                if Double.random(in: 0..<1, using: &generator) < finishProbability { try finishOne() }
            }
        } catch {
            // The daemon went away: the request in flight stays unanswered in the ledger.
        }
    }
}

