import StoreKitLedger

/// The fleet's wake-up: the ledger's connection `LISTEN`s on the ledger's `channel`, and the
/// serving loop watches its socket between units of work. A notification says which queues
/// another daemon changed; the rows stay the truth (`PostgresLedger.changesElsewhere` reads them
/// by sequence), so a notification missed while the connection was down loses nothing: after
/// every reconnection the ledger reads every watched queue again.
///
/// The same connection as the units of work: a session's own notifications come back with its
/// `COMMIT`'s answer, not through another backend woken for each of them. Notifications that
/// arrive with a unit's answers wait in libpq until `receive()`, which the loop calls after
/// every unit of work as well as when the socket is readable.
public final class FleetListener: LedgerChangeFeed {
    private let ledger: PostgresLedger
    /// The connection whose socket the loop watches (`PostgresConnection.generation`); the
    /// loop registers a new one after the ledger reconnected.
    private var watched: UInt64

    public init(ledger: PostgresLedger) throws(LedgerError) {
        self.ledger = ledger
        try ledger.listen()
        watched = ledger.connection.generation
    }

    /// The socket to watch for readability; -1 while disconnected.
    public var socket: Int32 { ledger.connection.socket }
    /// False too once the ledger reconnected: the socket watched is gone, the new one is not watched yet.
    public var isConnected: Bool { !ledger.connection.isBroken && ledger.connection.generation == watched }

    /// Reads the notifications that arrived; true when another daemon changed something (the
    /// ledger then has changes to read), or when the connection was lost (they may have been
    /// missed: everything is read again once it is back).
    public func receive() -> Bool {
        let connection = ledger.connection
        guard connection.generation == watched, let payloads = connection.notifications() else {
            // A broken connection of ours is closed here (its socket leaves the loop's epoll with
            // it, and the ledger opens a new one); a replaced one was closed by the reconnection.
            if connection.generation == watched { connection.close() }
            ledger.noteMissedNotifications()
            return true
        }
        var elsewhere = false
        for payload in payloads where ledger.noteNotification(payload) { elsewhere = true }
        return elsewhere
    }

    /// The notifications the ledger's own statements read with their answers (no system call);
    /// true when another daemon changed something.
    public func receiveBuffered() -> Bool {
        let connection = ledger.connection
        guard connection.generation == watched, !connection.isBroken else { return false }
        var elsewhere = false
        for payload in connection.bufferedNotifications() where ledger.noteNotification(payload) { elsewhere = true }
        return elsewhere
    }

    /// Reconnects the ledger if its connection broke (backing off, as a unit of work would);
    /// true once connected, listening, and ready to be watched (what was missed meanwhile is
    /// read again).
    public func reconnect(now: Int64) -> Bool {
        do {
            try ledger.reconnectIfBroken()
        } catch {
            return false
        }
        watched = ledger.connection.generation
        return true
    }

    /// The connection is the ledger's, closed with it.
    public func close() {}
}
