@testable import StoreKitDaemon
import Testing

/// The rule the daemon is built around: no client hears of a change before it is on disk, and
/// clients hear of changes in the order they were made.
@Suite("durability gate")
struct DurabilityGateTests {
    @Test("an output whose unit of work is already durable passes at once")
    func durablePassesAtOnce() {
        var gate = DurabilityGate<String>()
        #expect(gate.enter("a", lsn: 5, durable: 5) == ["a"])
        #expect(gate.isEmpty)
    }

    @Test("an output waits until the sync reaches its LSN, not a record sooner")
    func waitsForItsLSN() {
        var gate = DurabilityGate<String>()
        #expect(gate.enter("a", lsn: 7, durable: 6).isEmpty)
        #expect(gate.release(durable: 6).isEmpty)
        #expect(gate.count == 1)
        #expect(gate.release(durable: 7) == ["a"])
        #expect(gate.isEmpty)
    }

    @Test("outputs leave in the order they entered, even when a later one is durable first")
    func keepsOrder() {
        var gate = DurabilityGate<String>()
        #expect(gate.enter("a", lsn: 3, durable: 2).isEmpty)
        // Durable already, but "a" waits before it: it waits too.
        #expect(gate.enter("b", lsn: 2, durable: 2).isEmpty)
        #expect(gate.enter("c", lsn: 4, durable: 2).isEmpty)
        #expect(gate.release(durable: 3) == ["a", "b"])
        #expect(gate.release(durable: 9) == ["c"])
    }

    @Test("entering releases what the sync reached meanwhile, oldest first")
    func enterReleasesEarlier() {
        var gate = DurabilityGate<Int>()
        #expect(gate.enter(1, lsn: 10, durable: 9).isEmpty)
        #expect(gate.enter(2, lsn: 11, durable: 11) == [1, 2])
    }

    @Test("after a failed sync nothing held may be acknowledged: all of it is dropped")
    func discardAll() {
        var gate = DurabilityGate<Int>()
        _ = gate.enter(1, lsn: 10, durable: 0)
        _ = gate.enter(2, lsn: 11, durable: 0)
        #expect(gate.discardAll() == 2)
        #expect(gate.release(durable: .max).isEmpty)
    }
}
