import StoreKitLedger

/// The fleet's wake-up: a connection of its own that `LISTEN`s on the ledger's `channel`, whose
/// socket the serving loop watches. A notification says which queues another daemon changed;
/// the rows stay the truth (`PostgresLedger.changesElsewhere` reads them by sequence), so a
/// notification missed while this connection was down loses nothing: after every reconnection
/// the ledger reads every watched queue again.
public final class FleetListener: LedgerChangeFeed {
    private let connection: PostgresConnection
    private let ledger: PostgresLedger
    /// When the next reconnection may be tried (monotonic ms), and the wait after a failed one.
    private var nextReconnect: Int64 = 0
    private var reconnectWait = PostgresLedger.reconnectInterval

    public init(conninfo: String, ledger: PostgresLedger) throws(LedgerError) {
        self.ledger = ledger
        connection = try PostgresConnection(conninfo: conninfo)
        try listen()
    }

    /// The channel is the schema's (its name is letters, digits and underscores: an identifier).
    private func listen() throws(LedgerError) {
        try connection.execute("LISTEN \(try PostgresLedger.channel(on: connection))")
    }

    /// The socket to watch for readability; -1 while disconnected.
    public var socket: Int32 { connection.socket }
    public var isConnected: Bool { !connection.isBroken }

    /// Reads the notifications that arrived; true when another daemon changed something (the
    /// ledger then has changes to read), or when the connection was lost (they may have been
    /// missed: everything is read again once it is back).
    public func receive() -> Bool {
        guard let payloads = connection.notifications() else {
            connection.close()
            ledger.noteMissedNotifications()
            return true
        }
        var elsewhere = false
        for payload in payloads where ledger.noteNotification(payload) { elsewhere = true }
        return elsewhere
    }

    /// Reconnects and listens again, backing off while it fails; true once connected (what was
    /// missed meanwhile is read again).
    public func reconnect(now: Int64) -> Bool {
        guard connection.isBroken, now >= nextReconnect else { return !connection.isBroken }
        do {
            try connection.reconnect()
            try listen()
            reconnectWait = PostgresLedger.reconnectInterval
            ledger.noteMissedNotifications()
            return true
        } catch {
            connection.close()
            nextReconnect = now + reconnectWait
            reconnectWait = min(reconnectWait * 2, PostgresLedger.longestReconnectInterval)
            return false
        }
    }

    public func close() { connection.close() }
}
