import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What a power cut can leave of the daemon's files, and what the daemon makes of it
/// (docs/powercut.md). A real storekitd serves a workload with `Tests/PowerCut/record.c`
/// preloaded, which records every write, sync, truncation, allocation, rename and unlink of its
/// state directory; then crash states are built from that record — a crash after any operation,
/// where what was synced stays, and of what was not, each write is kept, lost or torn at 512-byte
/// sectors at random — and the real daemon is started on each: it opens the state or refuses it
/// loudly, and when it opens it, every payment and finish acknowledged before the crash is there,
/// nothing more than was asked for, and SQLite's integrity check passes.
///
/// `POWERCUT_STATES` sets how many states (default 24: `make test`; `make torture-power` runs
/// 10,000), `POWERCUT_SEED` replays a run's choices, and the verdict goes to
/// `POWERCUT_VERDICT` (default `.build/powercut-verdict.txt`).
@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/gcc"), "gcc builds the recording library"),
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3"), "sqlite3 checks the states' integrity"),
       .enabled(if: ProcessInfo.processInfo.environment["STOREKIT_SANITIZER"] == nil,
                "the recording library is preloaded into the daemon, which a sanitizer's runtime must come first for"))
struct PowerCutTests {
    static var states: Int {
        ProcessInfo.processInfo.environment["POWERCUT_STATES"].flatMap { Int($0) }.map { max(1, $0) } ?? 24
    }

    static let seed: UInt64 = ProcessInfo.processInfo.environment["POWERCUT_SEED"].flatMap { UInt64($0) }
        ?? .random(in: .min ... .max)

    static var verdictPath: String {
        ProcessInfo.processInfo.environment["POWERCUT_VERDICT"] ?? Paths.repository + "/.build/powercut-verdict.txt"
    }

    static func say(_ text: String) {
        print("powercut: " + text)
        fflush(nil)
    }

    static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    // MARK: The record

    enum Operation {
        case create(String)
        case write(String, offset: Int, data: [UInt8])
        case sync(String)
        case truncate(String, size: Int)
        case allocate(String, offset: Int, length: Int)
        case rename(String, String)
        case exchange(String, String)
        case unlink(String)
    }

    struct Recorded {
        var operation: Operation
        var time: UInt64
    }

    /// Parses the recording library's log (record.c's format).
    static func parse(_ bytes: [UInt8]) throws -> [Recorded] {
        var operations: [Recorded] = []
        var index = 0
        func integer<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
            bytes[offset..<offset + MemoryLayout<T>.size].reversed().reduce(T(0)) { $0 << 8 | T($1) }
        }
        while index + 32 <= bytes.count {
            let op = integer(UInt32.self, at: index)
            let pathLength = Int(integer(UInt32.self, at: index + 4))
            let offset = Int(integer(UInt64.self, at: index + 8))
            let length = Int(integer(UInt64.self, at: index + 16))
            let time = integer(UInt64.self, at: index + 24)
            index += 32
            guard index + pathLength <= bytes.count else { break }
            let pathBytes = Array(bytes[index..<index + pathLength])
            index += pathLength
            let parts = pathBytes.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
            let path = parts[0]
            let operation: Operation
            switch op {
            case 1:
                guard index + length <= bytes.count else { return operations }   // the last record, cut by the kill
                operation = .write(path, offset: offset, data: Array(bytes[index..<index + length]))
                index += length
            case 2: operation = .sync(path)
            case 3: operation = .truncate(path, size: offset)
            case 4: operation = .allocate(path, offset: offset, length: length)
            case 5: operation = .rename(path, parts.count > 1 ? parts[1] : "")
            case 6: operation = .exchange(path, parts.count > 1 ? parts[1] : "")
            case 7: operation = .unlink(path)
            case 8: operation = .create(path)
            default: throw IntegrationFailure("unknown operation \(op) in the record")
            }
            operations.append(Recorded(operation: operation, time: time))
        }
        return operations
    }

    // MARK: Crash states

    /// A file as the page cache has it, as its last sync left it on disk, and what changed it since.
    struct FileState {
        var current: [UInt8] = []
        var durable: [UInt8] = []
        var pending: [Operation] = []
    }

    static func apply(_ operation: Operation, to bytes: inout [UInt8], sectors keep: ((Int) -> Bool)? = nil) {
        switch operation {
        case .write(_, let offset, let data):
            if bytes.count < offset + data.count { bytes += [UInt8](repeating: 0, count: offset + data.count - bytes.count) }
            guard let keep else {
                bytes.replaceSubrange(offset..<offset + data.count, with: data)
                return
            }
            // Torn: only some of its 512-byte sectors reached the disk.
            var start = 0
            while start < data.count {
                let end = min(data.count, (offset + start) / 512 * 512 + 512 - offset)
                if keep(start) { bytes.replaceSubrange(offset + start..<offset + end, with: data[start..<end]) }
                start = end
            }
        case .truncate(_, let size):
            if bytes.count > size { bytes.removeSubrange(size...) } else { bytes += [UInt8](repeating: 0, count: size - bytes.count) }
        case .allocate(_, let offset, let length):
            if bytes.count < offset + length { bytes += [UInt8](repeating: 0, count: offset + length - bytes.count) }
        default:
            break
        }
    }

    /// The files a power cut right after `operations[..<count]` leaves: names as the operations
    /// left them (the journal keeps metadata in order), the contents of each file as its last
    /// sync left them, plus each later change kept or not at random, and writes torn.
    static func crashState(_ operations: ArraySlice<Recorded>, using generator: inout SeededRandomNumberGenerator) -> [String: [UInt8]] {
        var files: [String: FileState] = [:]
        for recorded in operations {
            switch recorded.operation {
            case .create(let path):
                if files[path] == nil { files[path] = FileState() }
            case .write(let path, _, _), .truncate(let path, _), .allocate(let path, _, _):
                var file = files[path] ?? FileState()
                apply(recorded.operation, to: &file.current)
                file.pending.append(recorded.operation)
                files[path] = file
            case .sync(let path):
                guard var file = files[path] else { continue }
                file.durable = file.current
                file.pending.removeAll()
                files[path] = file
            case .rename(let from, let to):
                files[to] = files.removeValue(forKey: from)
            case .exchange(let a, let b):
                let first = files[a]
                files[a] = files[b]
                files[b] = first
            case .unlink(let path):
                files[path] = nil
            }
        }
        var result: [String: [UInt8]] = [:]
        for (path, file) in files {
            var bytes = file.durable
            let mode = Int.random(in: 0..<4, using: &generator)   // 0: nothing pending kept, 1: all, 2-3: each at random
            for operation in file.pending {
                switch mode {
                case 0: continue
                case 1: apply(operation, to: &bytes)
                default:
                    guard Bool.random(using: &generator) else { continue }
                    if case .write = operation, Int.random(in: 0..<4, using: &generator) == 0 {
                        var sectors = generator
                        apply(operation, to: &bytes) { _ in Bool.random(using: &sectors) }
                        _ = generator.next()
                    } else {
                        apply(operation, to: &bytes)
                    }
                }
            }
            result[path] = bytes
        }
        return result
    }

    // MARK: The workload

    struct Workload {
        /// Payment key → the transaction id and when the answer came (monotonic ns).
        var paid: [String: (id: UInt64, at: UInt64)] = [:]
        /// Transaction id → when its finish was answered.
        var finished: [UInt64: UInt64] = [:]
        var sent = 0
    }

    /// Payments and finishes over one connection, paced so that checkpoints fall among them.
    static func runWorkload(on daemon: DaemonProcess, seconds: Double) throws -> Workload {
        let connection = try daemon.connect()
        defer { connection.close() }
        var workload = Workload()
        var requestID: UInt32 = 1
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let key = UUID().uuidString
            requestID += 1
            workload.sent += 1
            try connection.send(.addPayment(.init(requestID: requestID, key: key, productID: Sample.coins, quantity: 1)))
            var id: UInt64?
            while id == nil {
                if case .result(let answered, let code, _, let value, let message) = try connection.receive(), answered == requestID {
                    guard code == .ok else { throw IntegrationFailure("payment refused: \(code.name) \(message)") }
                    id = value
                }
            }
            workload.paid[key] = (id!, monotonicNanoseconds())
            if workload.sent % 2 == 0 {
                requestID += 1
                try connection.send(.finish(requestID: requestID, transactionID: id!))
                while true {
                    if case .result(let answered, let code, _, _, _) = try connection.receive(), answered == requestID {
                        if code == .ok { workload.finished[id!] = monotonicNanoseconds() }
                        break
                    }
                }
            }
            usleep(UInt32.random(in: 2_000...20_000))
        }
        return workload
    }

    // MARK: Checking a state

    enum Outcome {
        case opened
        case refused(String)
        case violated([String])
    }

    /// Starts the real daemon on `files` and checks it against what was acknowledged before `crash`.
    static func check(_ files: [String: [UInt8]], recordedIn stateDirectory: String, crash: UInt64, workload: Workload) throws -> Outcome {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try FileManager.default.createDirectory(atPath: daemon.stateDirectory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        for (path, bytes) in files where path.hasPrefix(stateDirectory + "/") && !path.hasSuffix("-shm") {
            let relative = String(path.dropFirst(stateDirectory.count + 1))
            let target = daemon.stateDirectory + "/" + relative
            let parent = (target as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            guard FileManager.default.createFile(atPath: target, contents: Data(bytes), attributes: [.posixPermissions: 0o600]) else {
                throw IntegrationFailure("cannot write \(target)")
            }
        }
        do {
            try daemon.start()
        } catch {
            let lines = daemon.log(tail: 3).split(separator: "\n").filter { $0.contains("[error]") || $0.contains("[critical]") }
            guard let reason = lines.last else { return .violated(["the daemon did not start and said nothing: \(daemon.log(tail: 5))"]) }
            return .refused(String(reason))
        }
        var violations: [String] = []
        // A state opened but unreadable is a violation to report with the others, not an error
        // that ends the test (the harness's own state without the commit log and the WAL may
        // well read as malformed: it must count as a loss seen).
        let stored: [ListedTransaction]
        do {
            stored = try daemon.transactions()
        } catch {
            _ = daemon.stop()
            return .violated(["opened, then its transactions could not be read: \(error)"])
        }
        let byID = Dictionary(stored.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        if byID.count != stored.count { violations.append("a transaction id appears twice") }
        for (key, paid) in workload.paid where paid.at < crash {
            guard let row = byID[String(paid.id)] else {
                violations.append("payment \(key) (transaction \(paid.id)) was acknowledged before the cut but is missing")
                continue
            }
            if row.state != "purchased" { violations.append("transaction \(paid.id) is \(row.state), acknowledged purchased") }
            if let at = workload.finished[paid.id], at < crash, !row.finished {
                violations.append("transaction \(paid.id) was acknowledged finished before the cut but is not")
            }
        }
        if stored.count > workload.sent { violations.append("\(stored.count) transactions, but only \(workload.sent) payments were sent") }
        _ = daemon.stop()
        let integrity = try integrityCheck(daemon.databasePath)
        if integrity != "ok" { violations.append("integrity_check: \(integrity.prefix(300))") }
        return violations.isEmpty ? .opened : .violated(violations)
    }

    // MARK: The test

    @Test("crash states built from a real daemon's writes and syncs: each opened with every acknowledged payment and finish, or refused loudly")
    func powerCutStates() throws {
        let seed = Self.seed
        Self.say("seed \(seed) (POWERCUT_SEED=\(seed) replays its choices), \(Self.states) states")
        var generator = SeededRandomNumberGenerator(seed: seed)
        let work = TemporaryDirectory("skpowercut")
        defer { work.remove() }
        let library = work.file("record.so")
        let build = try ProcessRunner.run("/usr/bin/gcc", ["-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o", library,
                                                           Paths.repository + "/Tests/PowerCut/record.c", "-ldl", "-lpthread"])
        try #require(build.status == 0, "gcc: \(build.stderr)")

        // The record: a daemon from an empty state directory, payments and finishes, kill -9.
        let recorded = try DaemonProcess()
        defer { recorded.remove() }
        try FileManager.default.createDirectory(atPath: recorded.stateDirectory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let stateDirectory = try #require(realpath(recorded.stateDirectory, nil).map { pointer in
            defer { free(pointer) }
            return String(cString: pointer)
        })
        let log = work.file("operations")
        recorded.extraEnvironment = ["LD_PRELOAD": library, "POWERCUT_DIR": stateDirectory, "POWERCUT_LOG": log]
        try recorded.start()
        let workload = try Self.runWorkload(on: recorded, seconds: 3)
        recorded.kill()
        let operations = try Self.parse(Array(try Data(contentsOf: URL(fileURLWithPath: log))))
        let syncs = operations.filter { if case .sync = $0.operation { true } else { false } }.count
        Self.say("recorded \(operations.count) operations (\(syncs) syncs) while \(workload.paid.count) payments and "
                 + "\(workload.finished.count) finishes were acknowledged")
        try #require(workload.paid.count > 20 && syncs > 20, "the workload was too light to test anything")

        // The harness sees a loss: the state after the last operation with everything kept, but
        // the commit log and the WAL gone (synced writes lost, which no power cut does).
        var keepAll = SeededRandomNumberGenerator(seed: 1)
        let lost = Self.crashState(operations[...], using: &keepAll).filter { !$0.key.contains("-log.") && !$0.key.hasSuffix("-wal") }
        if case .opened = try Self.check(lost, recordedIn: stateDirectory, crash: .max, workload: workload) {
            Issue.record("the check did not notice the commit log and the WAL gone")
        }

        // The states: a crash after a random operation, with random choices of what reached the disk.
        var opened = 0
        var refusals: [String: Int] = [:]
        var violations: [String] = []
        let started = Date()
        for state in 1...Self.states {
            let count = Int.random(in: 0...operations.count, using: &generator)
            let crash = count < operations.count ? operations[count].time : UInt64.max
            var choices = SeededRandomNumberGenerator(seed: generator.next())
            let files = Self.crashState(operations[..<count], using: &choices)
            switch try Self.check(files, recordedIn: stateDirectory, crash: crash, workload: workload) {
            case .opened:
                opened += 1
            case .refused(let reason):
                // Grouped by what it says, numbers aside.
                refusals[reason.replacingOccurrences(of: "[0-9]+", with: "N", options: .regularExpression), default: 0] += 1
            case .violated(let found):
                violations.append("state \(state) (a cut after operation \(count) of \(operations.count)): " + found.prefix(5).joined(separator: "; "))
            }
            if state % 100 == 0 || state == Self.states {
                Self.say("state \(state) of \(Self.states), \(Int(Date().timeIntervalSince(started))) s: \(opened) opened, "
                         + "\(refusals.values.reduce(0, +)) refused, \(violations.count) violations")
            }
        }
        let verdict = (violations.isEmpty ? "PASSED" : "FAILED") + ": seed \(seed), \(Self.states) crash states from \(operations.count) "
            + "recorded operations (\(syncs) syncs, \(workload.paid.count) payments and \(workload.finished.count) finishes acknowledged): "
            + "\(opened) opened with everything acknowledged before the cut, \(refusals.values.reduce(0, +)) refused"
            + (refusals.isEmpty ? "" : " (" + refusals.map { "\($0.value)× \($0.key)" }.joined(separator: "; ") + ")")
            + ", \(violations.count) violations" + (violations.isEmpty ? "" : ": " + violations.prefix(5).joined(separator: " | "))
        Self.say(verdict)
        try? (verdict + "\n").write(toFile: Self.verdictPath, atomically: true, encoding: .utf8)
        #expect(violations.isEmpty, "\(violations.prefix(5).joined(separator: "\n"))")
    }
}
