import Foundation
import StoreKitTestSupport
import StoreKitWire
import Testing

/// SIGTERM under load: the daemon stops taking requests, finishes (commits and answers) the ones
/// it read, drains its output and exits 0 within a bound; every request answered ok is in the
/// database after a restart, and a request it did not answer was not executed either.
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root: the clients connect as other uids (setresuid)"))
struct NothingLostShutdownTests {
    /// The daemon drains output for at most 2 s; starting to stop and exiting must fit in this.
    static let stopBound = 5.0

    @Test func sigtermUnderLoadFinishesWhatItAcceptedAndExitsZero() throws {
        let daemon = try SupervisedDaemon()
        defer { daemon.remove() }
        try daemon.start()
        daemon.base.openDirectoriesToOtherUsers()

        let ledger = ToldLedger()
        let threads = ClientThreads()
        let uids: [UInt32] = [72001, 72002, 72003, 72004, 72004]
        for (index, uid) in uids.enumerated() {
            threads.spawn("sigterm-\(index)") {
                guard let client = try? BuyingClient(daemon.base, uid: uid, ledger: ledger) else { return }
                client.run(until: threads, finishProbability: 0.5)
            }
        }
        #expect(eventually(timeout: 20) { ledger.keys.count >= 30 }, "the clients bought almost nothing")
        usleep(UInt32.random(in: 0...400_000))
        let acknowledgedBeforeSignal = ledger.keys.count
        let exit = daemon.terminate(timeout: 20)
        threads.stop()
        #expect(threads.join(), "a client thread hung after the daemon stopped")

        #expect(!exit.bySignal && exit.status == 0, "storekitd must exit 0 on SIGTERM: \(exit)\n\(daemon.base.log(tail: 5))")
        #expect(exit.seconds < Self.stopBound, "storekitd took \(exit.seconds) s to stop")
        #expect(daemon.base.log(tail: 5).contains("Stopped"), "no 'Stopped' line:\n\(daemon.base.log(tail: 5))")
        #expect(acknowledgedBeforeSignal >= 30, "the load was too light: \(acknowledgedBeforeSignal) payments")

        try daemon.start()
        var violations = try ledgerViolations(daemon, ledger) + ledger.allProblems
        // A request the daemon read was answered before it exited: so a payment nobody heard back
        // about must not have been made.
        let rows = try storedRows(daemon.databasePath)
        let storedKeys = Set(rows.compactMap(\.paymentKey))
        for key in ledger.pendingKeys.keys where storedKeys.contains(key) {
            violations.append("payment \(key) was executed but its answer never reached the client")
        }
        #expect(violations.isEmpty, "\(violations.prefix(20).joined(separator: "\n"))")
        daemon.terminate()
    }
}
