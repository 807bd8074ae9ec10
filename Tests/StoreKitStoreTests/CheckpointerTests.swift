import Foundation
import StoreKitStore
import Testing

@Suite("Checkpointer: when the checkpoint thread runs")
struct CheckpointerTests {
    /// Polls `condition` for up to `seconds`.
    static func eventually(within seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }

    @Test("commits are checkpointed within the maximum delay; with nothing left to copy the thread sleeps without a timer")
    func idleThreadSleeps() throws {
        let fixture = StoreFixture()
        let store = try fixture.open()
        try store.disableAutomaticCheckpoints()
        let durable = store.commitLog.durable
        let checkpointer = Checkpointer(path: fixture.path, durable: durable)
        checkpointer.start()
        defer { checkpointer.stop() }

        func commitOne() throws -> UInt64 {
            try StoreFixture.unit(store) { try store.insert(makeRecord(id: store.allocateTransactionID())) }
            try store.flush()
            return store.commitLog.nextLSN - 1
        }
        let first = try commitOne()
        #expect(Self.eventually(within: 5) { durable.lsn >= first }, "durable \(durable.lsn), committed \(first)")

        // Everything is durable in the database file: a second without commits wakes nothing.
        let before = checkpointer.wakeUps
        usleep(1_000_000)
        #expect(checkpointer.wakeUps == before, "woke \(checkpointer.wakeUps - before) times while idle")

        // The next commit wakes it again: no wake-up is lost while it sleeps without a timer.
        let second = try commitOne()
        #expect(Self.eventually(within: 5) { durable.lsn >= second }, "durable \(durable.lsn), committed \(second)")
    }
}
