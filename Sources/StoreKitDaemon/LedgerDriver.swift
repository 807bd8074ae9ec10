import StoreKitLedger
import StoreKitPosix
import StoreKitWire

/// The serving loop's narrow view of the ledger, and nothing more of it:
///
/// - **units of work**: `begin`, then requests run (through the engine), then `commit`; a unit
///   is durable once the ledger's durable position passes its position (SQLite: the commit
///   log's sync; PostgreSQL: at once, its `COMMIT` returned);
/// - **durability positions**: the last committed unit, the last durable one, and why units can
///   no longer be made durable (the `DurabilityGate` releases replies by them);
/// - **saving**: a ledger whose database holds units some time after they are durable (SQLite:
///   held rows, then its open transaction) is saved when the loop is idle or the changes are
///   old; a failed save is retried every `saveRetryDelay` ms and said when its reason changes;
/// - **outages** of a database server: said once when they start and once when they end.
///
/// docs/architecture.md draws the whole write path.
final class LedgerDriver {
    private let storage: any Ledger
    private let logger: Logger

    init(store: any Ledger, logger: Logger) {
        self.storage = store
        self.logger = logger
    }

    /// The database file, or the PostgreSQL database.
    var path: String { storage.path }

    // MARK: Units of work

    func begin() throws(LedgerError) {
        try begin(readingAhead: ReadAhead())
    }

    /// Begins a unit of work whose requests will ask what `plan` says (`Ledger.begin(readingAhead:)`).
    func begin(readingAhead plan: ReadAhead) throws(LedgerError) {
        do {
            try storage.begin(readingAhead: plan)
        } catch {
            noteUnreachable(error)
            throw error
        }
    }

    /// Whether units of work should say what they will ask before they begin.
    var readsAhead: Bool { storage.readsAhead }

    /// Sends the writes the ledger deferred; the first failure is thrown while the unit can be run again.
    func flushWrites() throws(LedgerError) { try storage.flushWrites() }

    /// Commits the unit of work. `deferSync`: the loop has other work, so the ledger may make it
    /// durable on its own thread instead of before returning.
    func commit(deferSync: Bool) throws(LedgerError) {
        do {
            try storage.commit(deferringSync: deferSync)
        } catch {
            noteUnreachable(error)
            throw error
        }
        if unreachable != nil {
            unreachable = nil
            logger.notice("\(storage.path) is reachable again", id: .recovery)
        }
    }

    /// Why the database server cannot be reached (stopped, restarting, the network); nil while it
    /// can. Only for a database server's ledger: a file's I/O errors are the disk's.
    private(set) var unreachable: String?

    /// What a client is told of a request the ledger could not record: `storageFull` for a full
    /// disk, `storeUnreachable` when the database server (not a file) cannot be reached, else
    /// `storageFailure`.
    func resultCode(for error: LedgerError) -> ResultCode {
        if error.code == .full { return .storageFull }
        return storage.isDatabaseServer && error.code == .io ? .storeUnreachable : .storageFailure
    }

    /// Said once when it starts (and once when it ends, by `commit`); the requests refused
    /// meanwhile are journaled at debug priority only (`isPartOfOutage`).
    private func noteUnreachable(_ error: LedgerError) {
        guard storage.isDatabaseServer, error.code == .io, unreachable == nil else { return }
        unreachable = Self.oneLine(error.message)
        logger.error("\(storage.path) is unreachable; requests are refused until it is back (tried again at every "
                     + "unit of work): \(Self.oneLine(error.message))", id: .storageFailure)
    }

    /// Whether `error` belongs to an outage of the database server that the journal has already
    /// been told of (noting it if it is the first): its caller logs it at debug priority only.
    func isPartOfOutage(_ error: LedgerError) -> Bool {
        noteUnreachable(error)
        return storage.isDatabaseServer && error.code == .io && unreachable != nil
    }

    /// `text` on one line: libpq's messages end in, and may hold, newlines, which would cut a
    /// `STATUS=` short (systemd keeps its first line) and end journal lines in a line break.
    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: { $0.isNewline }).map { $0.trimmingWhitespace() }.filter { !$0.isEmpty }.joined(separator: " ")
    }

    func rollback() { storage.rollback() }
    func savepoint() throws(LedgerError) { try storage.savepoint() }
    func releaseSavepoint() throws(LedgerError) { try storage.releaseSavepoint() }
    func rollbackToSavepoint() { storage.rollbackToSavepoint() }

    // MARK: Durability

    /// The position (LSN) of the last unit of work committed.
    var committedLSN: UInt64 { storage.committedPosition }

    /// Every unit of work up to this LSN is durable.
    var durableLSN: UInt64 { storage.durablePosition }

    /// Why units can no longer be made durable; nil while they can.
    var syncFailure: String? { storage.durabilityFailure }

    /// Where units are made durable (for messages).
    var commitLogPath: String { storage.durableLogPath }

    /// Blocks until every committed unit of work is durable (at shutdown).
    func waitUntilDurable() { storage.waitUntilDurable() }

    // MARK: Saving to the database

    /// Committed units of work are not in the database yet.
    var hasUnsavedChanges: Bool { storage.hasUnsavedChanges }

    /// The unsaved changes are old enough to be saved even while the loop is busy.
    func saveIsDue(now: Int64) -> Bool { storage.saveIsDue(now: now) }
    /// How long the loop waits after a failed save before it tries again by itself (ms).
    static let saveRetryDelay: Int64 = 1000

    /// New rows wait in memory for their finish this long (ms) before they go into the SQLite
    /// transaction, a few at every turn.
    static let heldRowAge: Int64 = 25

    /// When the loop may next save by itself after a failure (0: at once).
    private(set) var saveRetryAt: Int64 = 0
    /// When the last failure was said, and its reason; nil while saves succeed.
    private var lastSaveFailure: (time: Int64, message: String)?
    #if STOREKIT_TEST_HOOKS
    /// `debug-fail-saves MS` (TestHooks): every save fails until then.
    var savesFailUntil: Int64 = .min
    #endif
    private var lastHeldRowFailure: Int64 = .min / 2

    /// Commits the SQLite transaction (no fsync: its units of work are durable in the commit
    /// log). `retrying`: a save the loop makes by itself, which waits `saveRetryDelay` ms after a
    /// failed one instead of being tried at every turn, and whose `COMMIT` runs on the saver's
    /// thread while the loop goes on (its outcome comes back through `collectSave()`). Without
    /// `retrying` the save is complete when this returns (a backup reads the file next).
    @discardableResult
    func save(retrying: Bool = false) -> Bool {
        let store = storage
        let now = Monotonic.milliseconds()
        if !store.hasUnsavedChanges { saveRetryAt = 0 }
        if retrying && now < saveRetryAt { return false }
        do throws(LedgerError) {
            #if STOREKIT_TEST_HOOKS
            if now < savesFailUntil {
                throw LedgerError(.io, path: store.path, message: "saves fail on purpose (debug-fail-saves)")
            }
            #endif
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
    /// how it went (the saver's wake-up).
    func collectSave() {
        storage.takeBackConnection()
        noteOffLoopSave(storage)
    }

    /// What the saves off the loop let the loop do, for the journal at stop.
    var offLoopSaveSummary: String? { storage.saveSummary }

    private func noteOffLoopSave(_ store: any Ledger) {
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
    private func noteSaveFailure(_ error: LedgerError, now: Int64) {
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
        do {
            try storage.writeRows(heldLongerThan: Self.heldRowAge, now: now)
        } catch {
            guard now - lastHeldRowFailure >= 10_000 else { return }
            lastHeldRowFailure = now
            logger.error("Failed to write new transactions into \(storage.path) (the commit log keeps them; "
                         + "tried again at every turn, said again in 10 s): \(error.message)", id: .storageFailure)
        }
    }

    // MARK: Status

    func unfinishedCount() -> Int? { try? storage.unfinishedCount() }

    /// Why the file system counts as nearly full; nil when it is not.
    var lowSpaceReason: String? { storage.lowSpaceReason }
}
