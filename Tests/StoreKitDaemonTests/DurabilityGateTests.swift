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

    @Test("an output with pushes being signed waits for them even when durable, and what follows waits behind it")
    func waitsForSignatures() {
        var gate = DurabilityGate<String>()
        #expect(gate.enter("a", lsn: 3, durable: 5, signing: 1).isEmpty)
        #expect(gate.enter("b", lsn: 4, durable: 5).isEmpty)
        #expect(gate.release(durable: 9).isEmpty)
        #expect(gate.signed(1, durable: 9) { $0 += "-signed" } == ["a-signed", "b"])
        #expect(gate.isEmpty)
    }

    @Test("signatures that arrive before the sync wait for it; an unknown ticket changes nothing")
    func signedBeforeDurable() {
        var gate = DurabilityGate<String>()
        #expect(gate.enter("a", lsn: 7, durable: 6, signing: 2).isEmpty)
        #expect(gate.signed(2, durable: 6) { $0 += "!" }.isEmpty)
        #expect(gate.signed(99, durable: 6) { $0 += "?" }.isEmpty)
        #expect(gate.release(durable: 7) == ["a!"])
    }

    @Test("a later unit's signatures done first do not let it pass an earlier one")
    func signaturesKeepOrder() {
        var gate = DurabilityGate<String>()
        _ = gate.enter("a", lsn: 1, durable: 0, signing: 1)
        _ = gate.enter("b", lsn: 2, durable: 0, signing: 2)
        #expect(gate.signed(2, durable: 2) { _ in }.isEmpty)
        #expect(gate.signed(1, durable: 2) { _ in } == ["a", "b"])
    }
}
