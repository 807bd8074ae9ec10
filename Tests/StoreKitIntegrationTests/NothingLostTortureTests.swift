import Foundation
import StoreKitTestSupport
import StoreKitWire
import Testing

/// Crash consistency under load: cycles of (clients buying and finishing concurrently, kill -9 at
/// a random moment, restart), each followed by checking the database against everything any
/// client was told. `STOREKIT_TORTURE_CYCLES` sets the number of cycles (default 5; `make torture`
/// runs many). Every random choice (when to kill, what each client finishes and when, its payment
/// keys) comes from one seed, printed at the start and in every failure:
/// `STOREKIT_TORTURE_SEED=N` runs with seed N again (the threads' timing still varies).
///
/// A cycle reads only the rows changed since the one before (`LedgerCheck`), and SQLite's full
/// integrity check runs every `integrityEvery` cycles and after the last, so a long run costs
/// the same per cycle at its end as at its start. Progress is printed every ten cycles; the
/// verdict is printed and written to `STOREKIT_TORTURE_VERDICT` (default
/// `.build/torture-verdict.txt`), whatever the outcome.
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root: the clients connect as other uids (setresuid)"))
struct NothingLostTortureTests {
    static var cycles: Int {
        ProcessInfo.processInfo.environment["STOREKIT_TORTURE_CYCLES"].flatMap { Int($0) }.map { max(1, $0) } ?? 5
    }

    /// `STOREKIT_TORTURE_SEED`, or a new one.
    static let seed: UInt64 = ProcessInfo.processInfo.environment["STOREKIT_TORTURE_SEED"].flatMap { UInt64($0) }
        ?? .random(in: .min ... .max)

    /// Cycles between two full integrity checks of the database.
    static let integrityEvery = 25

    static var verdictPath: String {
        ProcessInfo.processInfo.environment["STOREKIT_TORTURE_VERDICT"] ?? Paths.repository + "/.build/torture-verdict.txt"
    }

    /// Prints `text` and writes it to the verdict file.
    static func verdict(_ text: String) {
        progress(text)
        try? (text + "\n").write(toFile: verdictPath, atomically: true, encoding: .utf8)
    }

    /// Prints a line at once, also when standard output is a file or a pipe (`make torture > log`).
    static func progress(_ text: String) {
        print("torture: " + text)
        fflush(nil)   // every stream: `stdout` itself is a global Swift 6 will not touch
    }

    /// Two connections share uid 71001 (one queue, pushes to both), the others have a queue each.
    static let uids: [UInt32] = [71001, 71001, 71002, 71003]

    @Test func killNineUnderLoadLosesNothing() throws {
        let seed = Self.seed
        Self.progress("seed \(seed) (STOREKIT_TORTURE_SEED=\(seed) replays its choices), \(Self.cycles) cycles")
        var cycleSeeds = SeededRandomNumberGenerator(seed: seed)
        let daemon = try SupervisedDaemon()
        defer { daemon.remove() }
        // The clients leave some purchases unfinished every cycle: over 1,000 cycles a queue would
        // reach MaxUnfinishedPerQueue= (10,000) and retries be refused for quota, which is not
        // what this test is about.
        let dropIns = (daemon.base.configFile as NSString).deletingLastPathComponent + "/storekitd.conf.d"
        try FileManager.default.createDirectory(atPath: dropIns, withIntermediateDirectories: true)
        try "[Limits]\nMaxUnfinishedPerQueue=10000000\n".write(toFile: dropIns + "/torture.conf", atomically: true, encoding: .utf8)
        let ledger = ToldLedger()
        let check = LedgerCheck()
        try daemon.start()
        daemon.base.openDirectoriesToOtherUsers()
        var totalAcknowledged = 0
        let started = Date()
        func elapsed() -> String { String(format: "%.0f s", Date().timeIntervalSince(started)) }
        for cycle in 1...Self.cycles {
            // Each cycle's choices from a seed of its own: the same whatever earlier cycles' timing.
            var generator = SeededRandomNumberGenerator(seed: cycleSeeds.next())
            let crashAfter = UInt32.random(in: 150_000...650_000, using: &generator)
            let clientSeeds = Self.uids.map { _ in generator.next() }

            // Payments whose answer the last crash swallowed are sent again with the same key, as
            // the library does after reconnecting: the daemon returns the transaction it made, or
            // makes it now — one transaction either way (checked below).
            var retryProblems: [String] = []
            for (key, uid) in ledger.pendingKeys.sorted(by: { $0.key < $1.key }) {
                let retry = try BuyingClient(daemon.base, uid: uid, ledger: ledger, seed: generator.next())
                let (code, _) = try retry.buy(key: key)
                if code != .ok { retryProblems.append("retry of key \(key) answered \(code.name)") }
                retry.client.close()
            }

            let threads = ClientThreads()
            for (index, uid) in Self.uids.enumerated() {
                threads.spawn("torture-\(cycle)-\(index)") {
                    guard let client = try? BuyingClient(daemon.base, uid: uid, ledger: ledger, seed: clientSeeds[index]) else { return }
                    client.run(until: threads)
                    client.client.close()
                }
            }
            usleep(crashAfter)   // the moment of the crash
            daemon.crash()
            threads.stop()
            #expect(threads.join(), "seed \(seed), cycle \(cycle): a client thread hung after the crash")

            try daemon.start()
            let integrity = cycle % Self.integrityEvery == 0 || cycle == Self.cycles
            let violations = retryProblems + (try check.violations(daemon, ledger, integrity: integrity)) + ledger.allProblems
            #expect(violations.isEmpty, "seed \(seed), cycle \(cycle) of \(Self.cycles):\n\(violations.prefix(20).joined(separator: "\n"))")
            if !violations.isEmpty {
                Self.verdict("FAILED: seed \(seed), cycle \(cycle) of \(Self.cycles) after \(elapsed()): "
                             + violations.prefix(20).joined(separator: "; "))
                return
            }
            totalAcknowledged = ledger.keys.count
            if cycle % 10 == 0 || cycle == Self.cycles {
                Self.progress("cycle \(cycle) of \(Self.cycles), \(elapsed()), \(totalAcknowledged) payments acknowledged, none lost")
            }
        }
        let finished = ledger.entries.values.filter(\.finished).count
        Self.verdict("PASSED: seed \(seed), \(Self.cycles) kill -9 cycles in \(elapsed()), \(totalAcknowledged) payments and "
                     + "\(finished) finishes acknowledged, none lost; a full check of every row against the database at the end: "
                     + (try ledgerViolations(daemon, ledger).isEmpty ? "clean" : "VIOLATIONS"))
        #expect(try ledgerViolations(daemon, ledger).isEmpty, "seed \(seed): the final full check")
        #expect(totalAcknowledged > Self.cycles * 5, "seed \(seed): the load was too light to test anything: \(totalAcknowledged) payments")
        daemon.terminate()
    }

    @Test("the kept check, which reads only what changed, still finds a row lost after an earlier check read it")
    func keptCheckFindsAnOldRowLost() throws {
        let daemon = try SupervisedDaemon()
        defer { daemon.remove() }
        try daemon.start()
        let ledger = ToldLedger()
        let check = LedgerCheck()
        let first = try daemon.base.buyOutsideApp(Sample.levelPack)
        _ = try daemon.base.buyOutsideApp(Sample.seasonPass)
        #expect(try check.violations(daemon, ledger).isEmpty)
        daemon.terminate()
        _ = try sqlite3(daemon.databasePath, "DELETE FROM transactions WHERE id = \(first.id);")
        try daemon.start()
        let violations = try check.violations(daemon, ledger, integrity: false)
        #expect(violations.contains { $0.contains("the table holds 1 rows") }, "\(violations)")
    }
}
