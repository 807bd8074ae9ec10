import StoreKitPosix
import StoreKitPostgres
import StoreKitStore

/// The ledger the daemon opened at start, with what runs beside it until shutdown: for the
/// SQLite file its checkpointer thread, payment-key filter, commit-log sync thread and committer
/// thread; for PostgreSQL (`[Store] Database=`) nothing (its commit is durable when it returns).
struct OpenedLedger {
    let storage: any LedgerStorage
    private let sqlite: TransactionStore?
    private let checkpointer: Checkpointer?
    /// PostgreSQL's: the fleet's wake-up connection (`LISTEN`).
    let listener: FleetListener?

    static func open(configuration: DaemonConfiguration, databasePath: String, logger: Logger) throws(StoreError) -> OpenedLedger {
        if let conninfo = configuration.database {
            let member = configuration.fleetMember
            let ledger = try PostgresLedger(conninfo: conninfo, member: member)
            let listener = try FleetListener(conninfo: conninfo, ledger: ledger)
            logger.info("Opened database \(ledger.path) as host \(member.host) (accounts from \(member.accountFrom.rawValue)): "
                        + ledger.openReport, id: .recovery)
            return OpenedLedger(storage: ledger, sqlite: nil, checkpointer: nil, listener: listener)
        }
        let store: TransactionStore
        do {
            store = try TransactionStore(path: databasePath)
        } catch {
            throw StoreError(error.code, path: databasePath, message: error.message)
        }
        logger.info("Opened database \(databasePath): \(store.openReport)", id: .recovery)
        if !store.openProblems.isEmpty {
            logger.error("Database \(databasePath): \(store.openProblems.joined(separator: "; "))", id: .storageFailure)
        }
        if let notice = store.openNotice { logger.notice("Database \(databasePath): \(notice)", id: .recovery) }
        let spaceLogger = logger
        store.space.onTransition = { low, message in
            if low { spaceLogger.warning(message, id: .storageFailure) } else { spaceLogger.notice(message, id: .recovery) }
        }
        let checkpointer = Checkpointer(path: databasePath, durable: store.commitLog.durable)
        if (try? store.disableAutomaticCheckpoints()) != nil { checkpointer.start() }
        store.startPaymentKeyFilter()
        return OpenedLedger(storage: store, sqlite: store, checkpointer: checkpointer, listener: nil)
    }

    /// The commit log's fdatasync on its own thread (SQLite only): the loop goes on while the disk works.
    func startSyncer(wakeup: WakeupEvent) -> CommitLogSyncer? {
        guard let sqlite else { return nil }
        let syncer = CommitLogSyncer(onSynced: { wakeup.signal() })
        syncer.start(syncedThrough: sqlite.commitLog.nextLSN - 1)
        sqlite.commitLog.syncer = syncer
        return syncer
    }

    /// Saves' `COMMIT` on its own thread (SQLite only): the loop goes on with the units of work
    /// that need no statement meanwhile.
    func startCommitter(wakeup: WakeupEvent) -> Committer? {
        guard let sqlite else { return nil }
        let committer = Committer(onDone: { wakeup.signal() })
        committer.start()
        sqlite.committer = committer
        return committer
    }

    func close() {
        checkpointer?.stop()
        listener?.close()
        (storage as? PostgresLedger)?.close()
    }
}
