import StoreKitLedger
import StoreKitPosix
import CSQLite

// How units of work reach the disk: the commit log first (durable, one small fsync per unit of
// work), then SQLite (lazily, many units of work per commit, made durable by the checkpointer).
// A log record is the unit of work's data-changing statements with their parameters
// (SQLiteDatabase.recorded); applying it runs them again on the database state they were made on.

extension SQLiteLedger {
    /// `settings` key of the database's identity (hex); the commit log carries it, so that a log is
    /// never applied to another database (or to a restored backup, which gets a new identity).
    static let identityKey = "commitlog.database"
    /// `settings` key of the LSN of the last unit of work the database holds.
    static let lsnKey = "commitlog.lsn"
    /// The SQLite transaction is committed at the latest this long after it began (ms).
    public static let saveInterval: Int64 = 100

    public var commitLog: CommitLog {
        guard let log else { preconditionFailure("the commit log is opened with the store") }
        return log
    }

    /// The database's identity, which its commit log carries; nil before it has one.
    func storedIdentity() throws(LedgerError) -> UInt64? {
        try setting(Self.identityKey).flatMap { UInt64($0, radix: 16) }
    }

    /// The LSN of the last unit of work in the database (committed or not yet saved).
    public func appliedLSN() throws(LedgerError) -> UInt64 {
        try setting(Self.lsnKey).flatMap { UInt64($0) } ?? 0
    }

    /// True while units of work are durable in the commit log but not committed to SQLite.
    public var hasUnsavedChanges: Bool { unsavedSince != nil && !inTransaction }

    /// Whether `save()` should run now: units of work have waited `saveInterval` ms.
    public func saveIsDue(now: Int64) -> Bool {
        guard let unsavedSince, !inTransaction else { return false }
        return now - unsavedSince >= Self.saveInterval
    }

    /// Commits the SQLite transaction holding the units of work since the last save. No fsync
    /// (`synchronous=NORMAL`): they are durable in the commit log already, and the checkpointer
    /// makes them durable in the database file. Call between units of work only.
    public func save() throws(LedgerError) {
        guard let (lsn, writes) = try prepareSave() else { return }
        let outcome = SQLiteDatabase.commit(database.handle, writing: writes, restartingWALPast: Self.walRestartFrames,
                                            walCounter: database.walCounter)
        try finishSave(outcome, lsn: lsn)
        unsavedSince = nil
    }

    /// Saves like `save()`, with its `COMMIT` on the saver's thread: the loop goes on with
    /// the units of work that need no statement (Saver.swift) and takes the connection back
    /// when the saver wakes it (`takeBackConnection()`) or a statement needs it. A failure
    /// is kept for `takeSaveOutcome()`, and the units of work wait for the next save. Without a
    /// saver, or low on space (every commit is followed by a checkpoint on the loop), the
    /// same as `save()`.
    public func startSave() throws(LedgerError) {
        guard let saver, !space.isLow else { return try save() }
        guard let (lsn, writes) = try prepareSave() else { return }
        lentSave = (lsn, unsavedSince ?? Monotonic.milliseconds())
        unsavedSince = nil
        let restart = Self.walRestartFrames
        let counter = database.walCounter
        database.lend(to: saver) { connection in
            SQLiteDatabase.commit(connection, writing: writes, restartingWALPast: restart, walCounter: counter)
        }
    }

    /// Takes the connection back from the saver if its `COMMIT` is done (the loop, when the
    /// saver woke it).
    public func takeBackConnection() {
        database.takeBackIfDone()
    }

    /// How the last save whose `COMMIT` ran off the loop ended, once; nil when none ended since.
    public func takeSaveOutcome() -> Result<Void, LedgerError>? {
        defer { saveOutcome = nil }
        return saveOutcome
    }

    /// A lent connection is back (`SQLiteDatabase.onLoanReturned`).
    func saveReturned(_ outcome: SQLiteDatabase.CommitOutcome) {
        guard let lent = lentSave else { return }
        lentSave = nil
        if inTransaction { unitsThatWaitedForSaves += 1 }
        do throws(LedgerError) {
            try finishSave(outcome, lsn: lent.lsn)
            saveOutcome = .success(())
        } catch {
            saveOutcome = .failure(error)
            unsavedSince = min(unsavedSince ?? lent.since, lent.since)
        }
    }

    /// What a save does before its `COMMIT`, on the loop: opens the SQLite transaction if it is
    /// not, and gathers what waits in memory (held rows, moved counters, the LSN) for the
    /// `COMMIT`'s thread to write first. The held rows count as written once all is gathered: if
    /// writing them fails, the transaction is rolled back, and a lost transaction drops every held row
    /// (its units of work are applied again from the commit log). Returns the LSN saved and the
    /// writes; nil when nothing waits.
    private func prepareSave() throws(LedgerError) -> (UInt64, SQLiteDatabase.Writes)? {
        precondition(!inTransaction, "save inside a unit of work")
        database.takeBack()
        noticeLostTransaction()
        // Units of work lost with SQLite's transaction are applied again and committed now:
        // whoever saves (a backup, a checkpoint) expects every acknowledged change in SQLite.
        if needsCatchUp { try catchUp() }
        guard unsavedSince != nil || sqliteOpen else { return nil }
        let lsn = commitLog.nextLSN - 1
        var writes = SQLiteDatabase.Writes()
        do throws(LedgerError) {
            try openSQLiteTransaction()
            let rows = try gatherHeldRows(into: &writes)
            for values in movedSequenceValues() { try database.add(Self.sequenceUpsertSQL, values, to: &writes) }
            try database.add(Self.settingUpsertSQL, [.text(Self.lsnKey), .text(String(lsn))], to: &writes)
            // Everything is gathered: from here the rows and counters count as written.
            let now = heldRowClock()
            for id in rows { held.noteWritten(id: id, at: now) }
            movedSequences.removeAll(keepingCapacity: true)
        } catch {
            noticeLostTransaction()
            throw error
        }
        return (lsn, writes)
    }

    /// After a save's `COMMIT`, wherever it ran: tells the checkpointer how far the WAL goes.
    private func finishSave(_ outcome: SQLiteDatabase.CommitOutcome, lsn: UInt64) throws(LedgerError) {
        guard outcome.status == SQLITE_OK else {
            // In a unit of work (the connection was taken back for one of its statements), the
            // unit fails if the transaction is lost, and its rollback notices the loss.
            if !inTransaction { noticeLostTransaction() }
            throw database.error(outcome.status, outcome.message, systemErrno: outcome.systemErrno)
        }
        sqliteOpen = false
        if !inTransaction { keepKeyFilterUseful() }
        if let frames = database.walFrames {
            let committed = (lsn: lsn, frames: frames)
            commitLog.durable.noteCommitted(lsn: committed.lsn, frames: committed.frames)
            if let result = outcome.checkpoint {
                commitLog.durable.checkpointed(result.checkpointed, of: result.frames, since: committed)
            }
        }
        space.afterCommit(database)
    }

    /// WAL size (frames of 1 KiB pages) past which a save checkpoints after its `COMMIT`, when the
    /// checkpointer (which starts at `Checkpointer.walFrames`) has not caught up.
    static let walRestartFrames = 8192

    /// Commits what waits in the SQLite transaction and releases the commit log (and its lock), so
    /// that the database can be opened again; the store must not be used afterwards.
    public func shutDown() throws(LedgerError) {
        defer { log = nil }
        try save()
    }

    /// Flushes, then copies the WAL into the database file (fsynced), so that the commit log may
    /// reuse its space. For tools that use a store without a `Checkpointer`.
    public func checkpoint() throws(LedgerError) {
        try save()
        let lsn = try appliedLSN()
        if let result = database.checkpointPassive(), result.frames == result.checkpointed {
            commitLog.durable.advance(to: lsn)
        }
    }

    /// SQLite rolls a transaction back by itself on some errors (a full disk, an I/O error); the
    /// units of work it held are still in the commit log and are applied again by `catchUp()`.
    /// Not while the connection is lent: the save's outcome tells then.
    func noticeLostTransaction() {
        guard sqliteOpen, !database.isLent, sqlite3_get_autocommit(database.handle) != 0 else { return }
        sqliteOpen = false
        inTransaction = false
        unitOpenInSQLite = false
        needsCatchUp = true
        held.removeAll()
    }

    /// Re-applies, in a new SQLite transaction, the units of work of the commit log that the
    /// database lost with its transaction. Throws (and is tried again at the next unit of work)
    /// when it cannot.
    func catchUp() throws(LedgerError) {
        var recovery = commitLog.recover(after: try appliedLSN())
        // Only what was appended successfully: a failed append may have left a valid record.
        recovery.records.removeAll { $0.lsn >= commitLog.nextLSN }
        try database.execute("BEGIN IMMEDIATE")
        do throws(LedgerError) {
            try apply(recovery.records)
            let reached = try appliedLSN()
            guard reached + 1 == commitLog.nextLSN else {
                throw LedgerError(.corrupt, path: commitLog.databasePath, message: "the commit log reaches \(reached), "
                                 + "not \(commitLog.nextLSN - 1): \(recovery.problems.joined(separator: "; "))")
            }
        } catch {
            try? database.execute("ROLLBACK")
            throw error
        }
        sqliteOpen = true
        if unsavedSince == nil { unsavedSince = Monotonic.milliseconds() }
        needsCatchUp = false
        forgetCachedCounters()
    }

    /// Runs the records' statements, then sets what they do not carry: the database's LSN and
    /// the per-queue sequence counters (at least every row's sequence).
    func apply(_ records: [CommitLog.Record]) throws(LedgerError) {
        guard let last = records.last else { return }
        for record in records { try database.replay(record.payload) }
        try setSetting(Self.lsnKey, String(last.lsn))
        try database.execute("""
            INSERT INTO sequences(uid, app, last)
                SELECT uid, app, max(sequence) FROM transactions WHERE true GROUP BY uid, app
                ON CONFLICT(uid, app) DO UPDATE SET last = max(last, excluded.last)
            """)
    }

    // MARK: Open

    /// Applies (and commits, fsynced) the records of `log` after the database's LSN; returns a
    /// note for the open report.
    func replayCommitLog(_ log: CommitLog) throws(LedgerError) -> String {
        self.log = log
        let recovery = log.recover(after: try appliedLSN())
        var report = ""
        if !recovery.records.isEmpty {
            try database.immediateTransaction { () throws(LedgerError) in try apply(recovery.records) }
            let count = recovery.records.count
            report = "; applied \(count) unit\(count == 1 ? "" : "s") of work from the commit log"
        }
        guard !recovery.problems.isEmpty || !recovery.foreignSegments.isEmpty else { return report }
        // Keep what could not be applied: the log is started over next.
        let kept = log.keepCopies()
        let keptText = kept.isEmpty ? "" : "; its segments were kept as \(kept.joined(separator: ", "))"
        if !recovery.problems.isEmpty {
            openProblems = ["commit log: " + recovery.problems.joined(separator: "; ") + keptText]
            report += "; COMMIT LOG: " + recovery.problems.joined(separator: "; ")
        } else {
            // A restore (operations.md §3) leaves the old database's log: said once, not an error.
            openNotice = "the commit log was written for another database (this one was restored from a backup or "
                + "replaced) and was not applied" + keptText
                + (kept.isEmpty ? "" : " (nothing reads them again: delete them once the restored database is checked)")
            report += "; the commit log was another database's and was not applied"
        }
        return report
    }

    /// Gives a database without one its identity, then starts the log's segments over after the
    /// database's LSN (everything before is in the database, fsynced) and stops fsyncing commits.
    func startCommitLog(identity existing: UInt64?) throws(LedgerError) {
        if existing == nil {
            try database.immediateTransaction { () throws(LedgerError) in
                try setSetting(Self.identityKey, String(CommitLog.randomSalt(), radix: 16))
            }
        }
        let identity = try storedIdentity() ?? 0
        if log?.database != identity {
            log = nil   // releases the lock first
            log = try CommitLog(databasePath: path, database: identity)
        }
        try commitLog.start(nextLSN: try appliedLSN() + 1)
        try database.execute("PRAGMA synchronous=NORMAL")
    }
}
