/// The heart of the daemon: **no client hears of a change before it is on disk.**
///
/// The output of a unit of work (replies, pushes, journal entries) enters the gate with the LSN
/// of the unit's last commit-log record, and with a signing ticket when its pushes are still being
/// signed (`Signer`). It leaves when the commit log's sync has made that LSN durable and its pushes
/// are signed — at once when both already hold — and outputs always leave in the order they
/// entered, so a client never hears of a later change before an earlier one.
struct DurabilityGate<Output> {
    private var waiting: [(lsn: UInt64, ticket: UInt64?, output: Output)] = []

    /// Outputs waiting for the sync or their signatures.
    var count: Int { waiting.count }
    var isEmpty: Bool { waiting.isEmpty }

    /// Lets `output` (of the unit of work committed up to `lsn`) through when `durable` covers it,
    /// it awaits no signatures and nothing waits before it; otherwise holds it. Returns what may
    /// be sent now.
    mutating func enter(_ output: Output, lsn: UInt64, durable: UInt64, signing ticket: UInt64? = nil) -> [Output] {
        if waiting.isEmpty && durable >= lsn && ticket == nil { return [output] }
        waiting.append((lsn, ticket, output))
        return release(durable: durable)
    }

    /// The output waiting for `ticket`'s signatures gets them (`update`); returns what may be
    /// sent now.
    mutating func signed(_ ticket: UInt64, durable: UInt64, _ update: (inout Output) -> Void) -> [Output] {
        if let index = waiting.firstIndex(where: { $0.ticket == ticket }) {
            update(&waiting[index].output)
            waiting[index].ticket = nil
        }
        return release(durable: durable)
    }

    /// The held outputs whose units of work are now durable and signed, oldest first.
    mutating func release(durable: UInt64) -> [Output] {
        let ready = waiting.prefix { $0.lsn <= durable && $0.ticket == nil }.count
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
