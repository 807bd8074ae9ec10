/// The heart of the daemon: **no client hears of a change before it is on disk.**
///
/// The output of a unit of work (replies, pushes, journal entries) enters the gate with the LSN
/// of the unit's last commit-log record. It leaves when the commit log's sync has made that LSN
/// durable — at once when it already is — and outputs always leave in the order they entered,
/// so a client never hears of a later change before an earlier one.
struct DurabilityGate<Output> {
    private var waiting: [(lsn: UInt64, output: Output)] = []

    /// Outputs waiting for the sync.
    var count: Int { waiting.count }
    var isEmpty: Bool { waiting.isEmpty }

    /// Lets `output` (of the unit of work committed up to `lsn`) through when `durable` covers it
    /// and nothing waits before it; otherwise holds it. Returns what may be sent now.
    mutating func enter(_ output: Output, lsn: UInt64, durable: UInt64) -> [Output] {
        if waiting.isEmpty && durable >= lsn { return [output] }
        waiting.append((lsn, output))
        return release(durable: durable)
    }

    /// The held outputs whose units of work are now durable, oldest first.
    mutating func release(durable: UInt64) -> [Output] {
        let ready = waiting.prefix { $0.lsn <= durable }.count
        guard ready > 0 else { return [] }
        defer { waiting.removeFirst(ready) }
        return waiting[..<ready].map(\.output)
    }

    /// Drops every held output: the sync failed, so none of them may be acknowledged.
    mutating func discardAll() -> Int {
        defer { waiting.removeAll() }
        return waiting.count
    }
}
