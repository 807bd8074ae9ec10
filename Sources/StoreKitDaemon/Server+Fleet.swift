import StoreKitEngine
import StoreKitLedger

// A fleet of daemons sharing one PostgreSQL ledger (docs/fleet.md): hearing the others'
// notifications, and telling this host's observers what they changed.

extension Server {
    /// The fleet's connection is readable, or a unit of work ended (its answers may have
    /// brought notifications with them): notifications, or the connection's loss. A lost
    /// connection's socket is closed, which takes it out of the epoll set.
    func hearFleet() {
        guard let fleet, fleetWatched else { return }
        if fleet.receive() { fleetChangesDue = true }
        if !fleet.isConnected {
            fleetWatched = false
            statusStale = true
            logger.warning("Lost the fleet's notification connection to \(ledger.path); reconnecting (changes made by "
                           + "other hosts meanwhile are read once it is back)", id: .storageFailure)
        }
    }

    /// Notifications the ledger's own statements read with their answers (after a unit of work,
    /// a status line, a look at the schedule): the next turn runs the unit that reads the changes
    /// without waiting in epoll (`fleetHeardLate`).
    /// A connection lost (or replaced) during a statement is seen here too: its socket left the
    /// epoll set when it was closed, and no readiness will say so.
    func hearBufferedFleet() {
        guard fleetWatched, let fleet else { return }
        if fleet.receiveBuffered() {
            fleetChangesDue = true
            fleetHeardLate = true
        }
        if !fleet.isConnected {
            fleetWatched = false
            fleetChangesDue = true
            statusStale = true
            logger.warning("Lost the fleet's notification connection to \(ledger.path); reconnecting (changes made by "
                           + "other hosts meanwhile are read once it is back)", id: .storageFailure)
        }
    }

    /// Watches the fleet's connection again once it is back (reconnecting it, backing off).
    func reconnectFleet(now: Int64) {
        guard let fleet, !fleetWatched, fleet.reconnect(now: now) else { return }
        do {
            try epoll.add(fleet.socket, events: .readable, token: Token.fleet)
            fleetWatched = true
            fleetChangesDue = true
            statusStale = true
            logger.notice("Listening to the fleet on \(ledger.path) again", id: .recovery)
        } catch {
            logger.debug("Cannot watch the fleet's connection yet (\(error)); tried again in a second")
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
