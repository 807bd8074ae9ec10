import StoreKitEngine
import StoreKitLedger

// A fleet of daemons sharing one PostgreSQL ledger (docs/fleet.md): hearing the others'
// notifications, and telling this host's observers what they changed.

extension Server {
    /// The fleet's connection is readable: notifications (or its loss).
    func hearFleet() {
        guard let fleet else { return }
        let socket = fleet.socket
        if fleet.receive() { fleetChangesDue = true }
        if !fleet.isConnected {
            epoll.remove(socket)
            statusStale = true
            logger.warning("Lost the fleet's notification connection to \(ledger.path); reconnecting (changes made by "
                           + "other hosts meanwhile are read once it is back)", id: .storageFailure)
        }
    }

    /// Reconnects the fleet's notification connection when it was lost (backing off).
    func reconnectFleet(now: Int64) {
        guard let fleet, !fleet.isConnected, fleet.reconnect(now: now) else { return }
        do {
            try epoll.add(fleet.socket, events: .readable, token: Token.fleet)
            fleetChangesDue = true
            statusStale = true
            logger.notice("Listening to the fleet on \(ledger.path) again", id: .recovery)
        } catch {
            fleet.close()
        }
    }

    /// Inside a unit of work: what other hosts changed in the queues observed here, pushed to
    /// this host's observers; queues with no observer and work waiting here start their apps'
    /// observer units. A failure leaves it all for the next unit of work.
    func readChangesElsewhere(into output: inout UnitOutput) {
        guard fleetChangesDue || engine.store.hasChangesElsewhere else { return }
        let observed = Set(observers.compactMap { $0.value.isEmpty ? nil : $0.key })
        if isolated(&output, onFailure: { _, _ in }, { (output: inout UnitOutput) throws(LedgerError) in
            let changes = try engine.changesElsewhere(observed: observed)
            for effect in changes.effects { route(effect, into: &output) }
            output.unobserved += changes.waiting
        }) {
            fleetChangesDue = false
        }
    }
}
