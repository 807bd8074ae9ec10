import StoreKitStore
import StoreKitPosix
import StoreKitWire

/// The serving loop's narrow view of the durable store, and nothing more of it:
///
/// - **units of work**: `begin`, then requests run (through the engine), then `commit`, which
///   appends the unit to the commit log; it is durable once the log's sync passes its LSN;
/// - **durability positions**: the LSN of the last committed unit, the LSN the sync thread made
///   durable, and its failure (the `DurabilityGate` releases replies by them);
/// - **saving to the database**: held rows are written into the SQLite transaction as they age,
///   and the SQLite transaction is committed (`save`) when the loop is idle or the transaction
///   is old; a failed save is retried every `saveRetryDelay` ms and said when its reason changes
///   (the commit log keeps every change meanwhile).
///
/// docs/architecture.md draws the whole write path.
///
/// All of the above is the SQLite ledger's (`TransactionStore`). Another backend (PostgreSQL) is
/// durable when its `commit()` returns: then the LSN is the count of committed units of work,
/// the durable LSN equals it, and there is nothing to save, hold or sync.
final class Ledger {
    private let storage: any LedgerStorage
    /// The SQLite ledger, when it is the one: its commit log, held rows, saves and disk space.
    let sqlite: TransactionStore?
    private let logger: Logger
    /// Units of work committed by a backend whose commit is durable when it returns.
    private var durableCommits: UInt64 = 0

    init(store: any LedgerStorage, logger: Logger) {
        self.storage = store
        self.sqlite = store as? TransactionStore
        self.logger = logger
    }

    /// The database file, or the PostgreSQL database.
    var path: String { storage.path }

    // MARK: Units of work

    func begin() throws(StoreError) {
        do {
            try storage.begin()
        } catch {
            noteUnreachable(error)
            throw error
        }
    }

    /// Appends the unit of work to the commit log. `deferSync`: leave the fdatasync to the sync
    /// thread (the loop has other work meanwhile) instead of syncing before returning.
    func commit(deferSync: Bool) throws(StoreError) {
        guard let store = sqlite else {
            do {
                try storage.commit()
            } catch {
                noteUnreachable(error)
                throw error
            }
            durableCommits += 1
            if unreachable != nil {
                unreachable = nil
                logger.notice("\(storage.path) is reachable again", id: .recovery)
            }
            return
        }
        store.commitLog.deferSync = deferSync
        try store.commit()
    }

    /// Why the database server cannot be reached (stopped, restarting, the network); nil while it
    /// can. Only for a backend other than the SQLite file: its I/O errors are the disk's.
    private(set) var unreachable: String?

    /// What a client is told of a request the store could not record: `storageFull` for a full
    /// disk, `storeUnreachable` when the database server (not a file) cannot be reached, else
    /// `storageFailure`.
    func resultCode(for error: StoreError) -> ResultCode {
        if error.code == .full { return .storageFull }
        return sqlite == nil && error.code == .io ? .storeUnreachable : .storageFailure
    }

    /// Said once when it starts (and once when it ends, by `commit`); the requests refused
    /// meanwhile are journaled at debug priority only (`isPartOfOutage`).
    private func noteUnreachable(_ error: StoreError) {
        guard sqlite == nil, error.code == .io, unreachable == nil else { return }
        unreachable = Self.oneLine(error.message)
        logger.error("\(storage.path) is unreachable; requests are refused until it is back (tried again at every "
                     + "unit of work): \(Self.oneLine(error.message))", id: .storageFailure)
    }

    /// Whether `error` belongs to an outage of the database server that the journal has already
    /// been told of (noting it if it is the first): its caller logs it at debug priority only.
    func isPartOfOutage(_ error: StoreError) -> Bool {
        noteUnreachable(error)
        return sqlite == nil && error.code == .io && unreachable != nil
    }

    /// `text` on one line: libpq's messages end in, and may hold, newlines, which would cut a
    /// `STATUS=` short (systemd keeps its first line) and end journal lines in a line break.
    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: { $0.isNewline }).map { $0.trimmingWhitespace() }.filter { !$0.isEmpty }.joined(separator: " ")
    }

    func rollback() { storage.rollback() }
    func savepoint() throws(StoreError) { try storage.savepoint() }
    func releaseSavepoint() throws(StoreError) { try storage.releaseSavepoint() }
    func rollbackToSavepoint() { storage.rollbackToSavepoint() }

    // MARK: Durability

    /// The LSN of the last unit of work committed to the log.
    var committedLSN: UInt64 { sqlite.map { $0.commitLog.nextLSN - 1 } ?? durableCommits }

    /// Every unit of work up to this LSN is on disk.
    var durableLSN: UInt64 { sqlite?.commitLog.syncedLSN ?? durableCommits }

    /// Why the sync thread stopped; nil while it syncs.
    var syncFailure: String? { sqlite?.commitLog.syncer?.failure }

    /// The commit log's files (for messages).
    var commitLogPath: String { sqlite?.commitLog.databasePath ?? storage.path }

    /// Blocks until every committed unit of work is durable (at shutdown).
    func waitUntilDurable() { sqlite?.commitLog.waitForSync() }

    // MARK: Saving to the database

    /// Units of work are in the SQLite transaction but not yet committed to the database file.
    var hasUnsavedChanges: Bool { sqlite?.hasUnsavedChanges ?? false }

    /// The SQLite transaction is old enough to be saved even while the loop is busy.
    func saveIsDue(now: Int64) -> Bool { sqlite?.saveIsDue(now: now) ?? false }

    /// How long the loop waits after a failed save before it tries again by itself (ms).
    static let saveRetryDelay: Int64 = 1000

    /// New rows wait in memory for their finish this long (ms) before they go into the SQLite
    /// transaction, a few at every turn.
    static let heldRowAge: Int64 = 25

    /// When the loop may next save by itself after a failure (0: at once).
    private(set) var saveRetryAt: Int64 = 0
    /// When the last failure was said, and its reason; nil while saves succeed.
    private var lastSaveFailure: (time: Int64, message: String)?
    /// `debug-fail-saves MS` (test hooks): every save fails until then.
    var savesFailUntil: Int64 = .min
    private var lastHeldRowFailure: Int64 = .min / 2

    /// Commits the SQLite transaction (no fsync: its units of work are durable in the commit
    /// log). `retrying`: a save the loop makes by itself, which waits `saveRetryDelay` ms after a
    /// failed one instead of being tried at every turn, and whose `COMMIT` runs on the committer's
    /// thread while the loop goes on (its outcome comes back through `collectSave()`). Without
    /// `retrying` the save is complete when this returns (a backup reads the file next).
    @discardableResult
    func save(retrying: Bool = false) -> Bool {
        guard let store = sqlite else { return true }
        let now = Monotonic.milliseconds()
        if !store.hasUnsavedChanges { saveRetryAt = 0 }
        if retrying && now < saveRetryAt { return false }
        do throws(StoreError) {
            if now < savesFailUntil {
                throw StoreError(.io, path: store.path, message: "saves fail on purpose (debug-fail-saves)")
            }
            if retrying {
                try store.startSave()
                noteOffLoopSave(store)   // the one before, if it ended meanwhile
                return true
            }
            // How the last save off the loop ended is said first.
            defer { noteOffLoopSave(store) }
            try store.save()
        } catch {
            noteSaveFailure(error, now: now)
            return false
        }
        noteSaved()
        return true
    }

    /// Takes the connection back from a save's `COMMIT` off the loop once it is done, and says
    /// how it went (the committer's wake-up).
    func collectSave() {
        guard let store = sqlite else { return }
        store.takeBackConnection()
        noteOffLoopSave(store)
    }

    /// What the saves off the loop let the loop do, for the journal at stop.
    var offLoopSaveSummary: String? {
        guard let store = sqlite, store.committer != nil else { return nil }
        return "\(store.unitsDuringSaves) units of work began while a save's COMMIT had the database connection; "
            + "\(store.unitsThatWaitedForSaves) of them waited for it"
    }

    private func noteOffLoopSave(_ store: TransactionStore) {
        switch store.takeSaveOutcome() {
        case .success?: noteSaved()
        case .failure(let error)?: noteSaveFailure(error, now: Monotonic.milliseconds())
        case nil: break
        }
    }

    private func noteSaved() {
        saveRetryAt = 0
        if lastSaveFailure != nil {
            lastSaveFailure = nil
            logger.notice("Saved to \(path) again")
        }
    }

    /// A failure is said when its reason changes and at most every 10 s otherwise; the first
    /// save after failures is said too.
    private func noteSaveFailure(_ error: StoreError, now: Int64) {
        saveRetryAt = now + Self.saveRetryDelay
        if let last = lastSaveFailure, last.message == error.message, now - last.time < 10_000 { return }
        lastSaveFailure = (now, error.message)
        let retry = "tried again in \(Self.saveRetryDelay) ms, said again in 10 s"
        logger.error("Failed to save to \(path) (the commit log keeps the changes; \(retry)): \(error.message)",
                     id: .storageFailure)
    }

    /// Writes rows held longer than `heldRowAge` into the SQLite transaction. A failure is tried
    /// again at every turn and said at most every 10 s.
    func writeHeldRows(now: Int64) {
        guard let store = sqlite else { return }
        do {
            try store.writeRows(heldLongerThan: Self.heldRowAge, now: now)
        } catch {
            guard now - lastHeldRowFailure >= 10_000 else { return }
            lastHeldRowFailure = now
            logger.error("Failed to write new transactions into \(store.path) (the commit log keeps them; "
                         + "tried again at every turn, said again in 10 s): \(error.message)", id: .storageFailure)
        }
    }

    // MARK: Status

    func unfinishedCount() -> Int? { try? storage.unfinishedCount() }

    /// Why the file system counts as nearly full; nil when it is not.
    var lowSpaceReason: String? { sqlite?.space.lowSpaceReason }
}
