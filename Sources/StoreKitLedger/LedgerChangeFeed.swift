/// Wake-ups from the other writers of a shared ledger (a fleet's daemons on one PostgreSQL
/// database): a socket the serving loop watches, and what arrived on it. The rows stay the
/// truth (`Ledger.changesElsewhere` reads them), so a wake-up missed while the feed was down
/// loses nothing: after a reconnection everything watched is read again.
public protocol LedgerChangeFeed: AnyObject {
    /// The socket to watch for readability; -1 while disconnected.
    var socket: Int32 { get }
    var isConnected: Bool { get }
    /// Reads what arrived; true when another writer changed something (the ledger then has
    /// changes to read), or when the connection was lost (they may have been missed).
    func receive() -> Bool
    /// What arrived with the answers to the ledger's own statements, read without a system call
    /// (the socket no longer shows it); true when another writer changed something.
    func receiveBuffered() -> Bool
    /// Reconnects, backing off while it fails; true once connected.
    func reconnect(now: Int64) -> Bool
    func close()
}
