/// The heart of the daemon: **no client hears of a change before it is on disk.**
///
/// The output of a unit of work (replies, pushes, journal entries) enters the gate with the LSN
/// of the unit's last commit-log record, in parts, one per **lane** (the daemon's lanes are uids),
/// each with a signing ticket when its pushes are still being signed (`Signer`). A part leaves
/// when the commit log's sync has made its LSN durable and its pushes are signed — at once when
/// both already hold — and the parts of one lane always leave in the order they entered, so a
/// client never hears of a later change before an earlier one. Lanes do not wait for each other:
/// one uid's pushes being signed never hold back another uid's answers. Parts that become ready
/// together leave in the order they entered, whatever their lanes.
struct DurabilityGate<Lane: Hashable, Output> {
    private struct Entry {
        /// Numbers the units of work (all parts of one share it), in the order they entered.
        var unit: UInt64
        var lsn: UInt64
        var ticket: UInt64?
        var output: Output
    }

    private var lanes: [Lane: [Entry]] = [:]
    /// The lane of each part still being signed.
    private var signing: [UInt64: Lane] = [:]
    private var units: UInt64 = 0

    /// Parts waiting for the sync or their signatures.
    private(set) var count = 0
    var isEmpty: Bool { count == 0 }

    /// Starts the next unit of work: the parts entered until the next call belong to it.
    mutating func beginUnit() { units += 1 }

    /// Lets `output` (a part, in `lane`, of the unit of work committed up to `lsn`) through when
    /// `durable` covers it, it awaits no signatures and nothing of its lane waits before it;
    /// otherwise holds it. Returns what may be sent now, of any lane.
    mutating func enter(_ output: Output, lane: Lane, lsn: UInt64, durable: UInt64, signing ticket: UInt64? = nil) -> [Output] {
        if lanes[lane] == nil && durable >= lsn && ticket == nil { return release(durable: durable) + [output] }
        lanes[lane, default: []].append(Entry(unit: units, lsn: lsn, ticket: ticket, output: output))
        if let ticket { signing[ticket] = lane }
        count += 1
        return release(durable: durable)
    }

    /// The part waiting for `ticket`'s signatures gets them (`update`); returns what may be
    /// sent now.
    mutating func signed(_ ticket: UInt64, durable: UInt64, _ update: (inout Output) -> Void) -> [Output] {
        if let lane = signing.removeValue(forKey: ticket), let index = lanes[lane]?.firstIndex(where: { $0.ticket == ticket }) {
            update(&lanes[lane]![index].output)
            lanes[lane]![index].ticket = nil
        }
        return release(durable: durable)
    }

    /// The held parts whose units of work are now durable and signed, each lane's oldest first;
    /// across lanes in the order they entered.
    mutating func release(durable: UInt64) -> [Output] {
        guard count > 0 else { return [] }
        var ready: [Entry] = []
        var lanesReleased = 0
        for (lane, entries) in lanes {
            let prefix = entries.prefix { $0.lsn <= durable && $0.ticket == nil }.count
            guard prefix > 0 else { continue }
            ready += entries[..<prefix]
            lanesReleased += 1
            if prefix == entries.count {
                lanes[lane] = nil
            } else {
                lanes[lane]!.removeFirst(prefix)
            }
        }
        count -= ready.count
        if lanesReleased > 1 { ready.sort { $0.unit < $1.unit } }
        return ready.map(\.output)
    }

    /// Drops every held part: the sync failed, so none of them may be acknowledged. Returns how
    /// many units of work they belonged to.
    mutating func discardAll() -> Int {
        defer {
            lanes.removeAll()
            signing.removeAll()
            count = 0
        }
        return Set(lanes.values.joined().map(\.unit)).count
    }
}
