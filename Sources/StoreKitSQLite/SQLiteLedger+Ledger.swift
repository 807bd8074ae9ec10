import StoreKitLedger

// The SQLite file as a `Ledger`: a unit of work is durable when its commit-log record is synced,
// its rows reach the file at the next save, and the file has one writer, this daemon.

extension SQLiteLedger: Ledger {
    public var externalGeneration: UInt64 { 0 }
    public var hasChangesElsewhere: Bool { false }
    public func changesElsewhere(of queues: Set<QueueKey>) throws(LedgerError) -> ChangesElsewhere { ChangesElsewhere() }

    public func commit(deferringSync: Bool) throws(LedgerError) {
        commitLog.deferSync = deferringSync
        try commit()
    }

    public var committedPosition: UInt64 { commitLog.nextLSN - 1 }
    public var durablePosition: UInt64 { commitLog.syncedLSN }
    public var durabilityFailure: String? { commitLog.syncer?.failure }
    public var durableLogPath: String { commitLog.databasePath }
    public func waitUntilDurable() { commitLog.waitForSync() }
    public var isDatabaseServer: Bool { false }

    public var saveSummary: String? {
        guard saver != nil else { return nil }
        return "\(unitsDuringSaves) units of work began while a save's COMMIT had the database connection; "
            + "\(unitsThatWaitedForSaves) of them waited for it"
    }

    /// The commit log's sync thread, the saver's thread, and the checkpointer (started when
    /// SQLite's own checkpoints could be turned off) with the payment-key filter's build.
    public func startBackgroundWork(wakeup: @escaping @Sendable () -> Void) {
        let syncer = CommitLogSyncer(onSynced: wakeup)
        syncer.start(syncedThrough: commitLog.nextLSN - 1)
        commitLog.syncer = syncer
        let saver = Saver(onDone: wakeup)
        saver.start()
        self.saver = saver
        let checkpointer = Checkpointer(path: path, durable: commitLog.durable)
        if (try? disableAutomaticCheckpoints()) != nil {
            checkpointer.start()
            self.checkpointer = checkpointer
        }
        startPaymentKeyFilter()
    }

    public func stopBackgroundWork() {
        checkpointer?.stop()
        checkpointer = nil
        saver?.stop()
        commitLog.syncer?.stop()
    }

    public func close() {}

    public var integrityCheck: (@Sendable () throws -> String?)? {
        let path = path
        return { try IntegrityCheck.run(path: path) }
    }

    public var lowSpaceReason: String? { space.lowSpaceReason }

    public func onLowSpaceChange(_ handler: @escaping (_ low: Bool, _ message: String) -> Void) {
        space.onTransition = handler
    }
}
