@testable import StoreKitDaemon
import Testing

/// The rule the daemon is built around: no client hears of a change before it is on disk, and
/// clients hear of changes in the order they were made. The tests before the lanes' use one lane.
@Suite("durability gate")
struct DurabilityGateTests {
    @Test("an output whose unit of work is already durable passes at once")
    func durablePassesAtOnce() {
        var gate = DurabilityGate<Int, String>()
        #expect(gate.enter("a", lane: 0, lsn: 5, durable: 5) == ["a"])
        #expect(gate.isEmpty)
    }

    @Test("an output waits until the sync reaches its LSN, not a record sooner")
    func waitsForItsLSN() {
        var gate = DurabilityGate<Int, String>()
        #expect(gate.enter("a", lane: 0, lsn: 7, durable: 6).isEmpty)
        #expect(gate.release(durable: 6).isEmpty)
        #expect(gate.count == 1)
        #expect(gate.release(durable: 7) == ["a"])
        #expect(gate.isEmpty)
    }

    @Test("outputs leave in the order they entered, even when a later one is durable first")
    func keepsOrder() {
        var gate = DurabilityGate<Int, String>()
        #expect(gate.enter("a", lane: 0, lsn: 3, durable: 2).isEmpty)
        // Durable already, but "a" waits before it: it waits too.
        #expect(gate.enter("b", lane: 0, lsn: 2, durable: 2).isEmpty)
        #expect(gate.enter("c", lane: 0, lsn: 4, durable: 2).isEmpty)
        #expect(gate.release(durable: 3) == ["a", "b"])
        #expect(gate.release(durable: 9) == ["c"])
    }

    @Test("entering releases what the sync reached meanwhile, oldest first")
    func enterReleasesEarlier() {
        var gate = DurabilityGate<Int, Int>()
        #expect(gate.enter(1, lane: 0, lsn: 10, durable: 9).isEmpty)
        #expect(gate.enter(2, lane: 0, lsn: 11, durable: 11) == [1, 2])
    }

    @Test("after a failed sync nothing held may be acknowledged: all of it is dropped")
    func discardAll() {
        var gate = DurabilityGate<Int, Int>()
        gate.beginUnit()
        _ = gate.enter(1, lane: 0, lsn: 10, durable: 0)
        gate.beginUnit()
        _ = gate.enter(2, lane: 0, lsn: 11, durable: 0)
        #expect(gate.discardAll() == 2)
        #expect(gate.release(durable: .max).isEmpty)
    }

    @Test("an output with pushes being signed waits for them even when durable, and what follows waits behind it")
    func waitsForSignatures() {
        var gate = DurabilityGate<Int, String>()
        #expect(gate.enter("a", lane: 0, lsn: 3, durable: 5, signing: 1).isEmpty)
        #expect(gate.enter("b", lane: 0, lsn: 4, durable: 5).isEmpty)
        #expect(gate.release(durable: 9).isEmpty)
        #expect(gate.signed(1, durable: 9) { $0 += "-signed" } == ["a-signed", "b"])
        #expect(gate.isEmpty)
    }

    @Test("signatures that arrive before the sync wait for it; an unknown ticket changes nothing")
    func signedBeforeDurable() {
        var gate = DurabilityGate<Int, String>()
        #expect(gate.enter("a", lane: 0, lsn: 7, durable: 6, signing: 2).isEmpty)
        #expect(gate.signed(2, durable: 6) { $0 += "!" }.isEmpty)
        #expect(gate.signed(99, durable: 6) { $0 += "?" }.isEmpty)
        #expect(gate.release(durable: 7) == ["a!"])
    }

    @Test("a later unit's signatures done first do not let it pass an earlier one")
    func signaturesKeepOrder() {
        var gate = DurabilityGate<Int, String>()
        _ = gate.enter("a", lane: 0, lsn: 1, durable: 0, signing: 1)
        _ = gate.enter("b", lane: 0, lsn: 2, durable: 0, signing: 2)
        #expect(gate.signed(2, durable: 2) { _ in }.isEmpty)
        #expect(gate.signed(1, durable: 2) { _ in } == ["a", "b"])
    }

    // MARK: Lanes (the daemon's are uids)

    @Test("a lane waiting for its signatures does not hold back another lane's durable output")
    func lanesDoNotWaitForEachOther() {
        var gate = DurabilityGate<Int, String>()
        gate.beginUnit()
        #expect(gate.enter("flood", lane: 1, lsn: 3, durable: 3, signing: 7).isEmpty)
        #expect(gate.enter("victim", lane: 2, lsn: 3, durable: 3) == ["victim"])
        gate.beginUnit()
        #expect(gate.enter("victim 2", lane: 2, lsn: 4, durable: 3).isEmpty)
        #expect(gate.release(durable: 4) == ["victim 2"])
        #expect(gate.count == 1)
        #expect(gate.signed(7, durable: 4) { $0 += " signed" } == ["flood signed"])
        #expect(gate.isEmpty)
    }

    @Test("within a lane, order holds: a part signed later still waits behind the earlier one")
    func orderWithinALane() {
        var gate = DurabilityGate<Int, String>()
        gate.beginUnit()
        _ = gate.enter("a", lane: 1, lsn: 1, durable: 1, signing: 1)
        gate.beginUnit()
        #expect(gate.enter("b", lane: 1, lsn: 2, durable: 2).isEmpty)
        #expect(gate.enter("c", lane: 2, lsn: 2, durable: 2) == ["c"])
        #expect(gate.signed(1, durable: 2) { _ in } == ["a", "b"])
    }

    @Test("parts of several lanes ready together leave in the order their units entered")
    func readyTogetherKeepEntryOrder() {
        var gate = DurabilityGate<Int, String>()
        for (unit, lane) in [(1, 3), (2, 1), (3, 2), (4, 3)] {
            gate.beginUnit()
            _ = gate.enter("unit \(unit)", lane: lane, lsn: UInt64(unit), durable: 0)
        }
        #expect(gate.release(durable: 4) == ["unit 1", "unit 2", "unit 3", "unit 4"])
    }

    @Test("a part that passes at once leaves after what became durable before it, of any lane")
    func passingPartFollowsEarlierOnes() {
        var gate = DurabilityGate<Int, String>()
        gate.beginUnit()
        _ = gate.enter("earlier", lane: 1, lsn: 5, durable: 4)
        gate.beginUnit()
        #expect(gate.enter("later", lane: 2, lsn: 6, durable: 6) == ["earlier", "later"])
    }

    @Test("a failed sync counts the units of work dropped, not their parts")
    func discardCountsUnits() {
        var gate = DurabilityGate<Int, String>()
        gate.beginUnit()
        _ = gate.enter("a", lane: 1, lsn: 1, durable: 0)
        _ = gate.enter("b", lane: 2, lsn: 1, durable: 0, signing: 1)
        gate.beginUnit()
        _ = gate.enter("c", lane: 1, lsn: 2, durable: 0)
        #expect(gate.count == 3)
        #expect(gate.discardAll() == 2)
        #expect(gate.signed(1, durable: .max) { _ in }.isEmpty)
        #expect(gate.isEmpty)
    }
}
