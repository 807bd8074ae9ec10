import StoreKitLedger
import StoreKitPostgres
import StoreKitSQLite

/// The ledger the daemon opened at start: the one place that names the backends. `Database=` a
/// libpq connection string opens PostgreSQL (a fleet's shared ledger, with its notification
/// connection); otherwise the SQLite file in the state directory. Everything after sees only
/// `Ledger` (and the fleet's `LedgerChangeFeed`).
struct OpenedLedger {
    let storage: any Ledger
    /// A fleet's wake-ups (PostgreSQL's `LISTEN`): other hosts changed something.
    let changeFeed: (any LedgerChangeFeed)?

    static func open(configuration: DaemonConfiguration, databasePath: String, logger: Logger) throws(LedgerError) -> OpenedLedger {
        let storage: any Ledger
        var changeFeed: (any LedgerChangeFeed)?
        if let conninfo = configuration.database {
            let member = configuration.fleetMember
            let ledger = try PostgresLedger(conninfo: conninfo, member: member)
            changeFeed = try FleetListener(ledger: ledger)
            logger.info("Opened database \(ledger.path) as host \(member.host) (accounts from \(member.accountFrom.rawValue)): "
                        + ledger.openReport, id: .recovery)
            storage = ledger
        } else {
            do {
                storage = try SQLiteLedger(path: databasePath)
            } catch {
                throw LedgerError(error.code, path: databasePath, message: error.message)
            }
            logger.info("Opened database \(databasePath): \(storage.openReport)", id: .recovery)
        }
        if !storage.openProblems.isEmpty {
            logger.error("Database \(storage.path): \(storage.openProblems.joined(separator: "; "))", id: .storageFailure)
        }
        if let notice = storage.openNotice { logger.notice("Database \(storage.path): \(notice)", id: .recovery) }
        let spaceLogger = logger
        storage.onLowSpaceChange { low, message in
            if low { spaceLogger.warning(message, id: .storageFailure) } else { spaceLogger.notice(message, id: .recovery) }
        }
        return OpenedLedger(storage: storage, changeFeed: changeFeed)
    }

    func close() {
        changeFeed?.close()
        storage.close()
    }
}
