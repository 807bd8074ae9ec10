import CSQLite
import StoreKitLedger
import StoreKitPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

// Lending the connection to the saver's thread for a save's COMMIT, and what a save writes.

extension SQLiteDatabase {

    /// The connection, once a loan of it has ended (waiting for the job if it has not).
    var handle: OpaquePointer {
        if loan != nil { takeBack() }
        return connection
    }

    /// Rows changed through the connection so far (`sqlite3_total_changes`), read without taking
    /// a lent connection back: safe whenever no job runs on it (tests check what the loop ran).
    var totalChanges: Int32 { sqlite3_total_changes(connection) }

    /// Whether the connection is lent (its job may have ended without being taken back yet).
    var isLent: Bool { loan != nil }

    /// What a job on a lent connection did: `COMMIT`'s result and, after it, the WAL's size and
    /// the checkpoint that restarted it, if one ran (see `commit(_:restartingWALPast:)`).
    struct CommitOutcome: Sendable {
        var status: Int32
        var message: String
        var systemErrno: Int32
        var checkpoint: (frames: Int, checkpointed: Int)?
    }

    /// The connection while it is lent, and the job's outcome once it is done.
    final class Loan: @unchecked Sendable {   // the connection is used by one thread at a time: the lock hands it over
        fileprivate let connection: OpaquePointer
        private let condition = Condition()
        private var outcome: CommitOutcome?   // guarded by `condition`

        fileprivate init(connection: OpaquePointer) { self.connection = connection }

        fileprivate func finish(_ result: CommitOutcome) {
            condition.withLock { outcome = result }
            condition.broadcast()
        }

        var isDone: Bool { condition.withLock { outcome != nil } }

        func wait() -> CommitOutcome {
            condition.lock()
            defer { condition.unlock() }
            while outcome == nil { condition.wait() }
            return outcome!
        }
    }

    /// Lends the connection to `thread` for `job`; the loop must not use it until the job is done.
    /// Between statements only: no statement is running and none is started until it is back.
    func lend(to thread: Saver, _ job: @escaping @Sendable (OpaquePointer) -> CommitOutcome) {
        precondition(loan == nil, "the connection is lent already")
        let lent = Loan(connection: connection)
        loan = lent
        thread.run { lent.finish(job(lent.connection)) }
    }

    /// Takes a lent connection back, waiting for its job, and reports the outcome.
    func takeBack() {
        guard let lent = loan else { return }
        let outcome = lent.wait()
        loan = nil
        onLoanReturned?(outcome)
    }

    /// Takes the connection back if its job is done; false while it is still running.
    @discardableResult
    func takeBackIfDone() -> Bool {
        guard let lent = loan else { return true }
        guard lent.isDone else { return false }
        takeBack()
        return true
    }

    /// Before a statement uses the connection: takes it back, then lets the store prepare it.
    func prepareForUse() throws(LedgerError) {
        if loan != nil { takeBack() }
        guard let willUse, !inWillUse else { return }
        inWillUse = true
        defer { inWillUse = false }
        try willUse()
    }

    /// A save's `COMMIT`, on whichever thread has the connection; then, past `restartFrames`
    /// frames in the WAL, a passive checkpoint of what the checkpointer did not copy, so that
    /// SQLite starts the WAL over (under steady load the background checkpoint never catches up
    /// with the last commit, and SQLite restarts the WAL only when one has).
    /// `writes` run first, in the transaction: a failed one rolls it back and is the outcome.
    static func commit(
        _ connection: OpaquePointer, writing writes: Writes, restartingWALPast restartFrames: Int, walCounter: WALCounter?
    ) -> CommitOutcome {
        if let failed = run(writes, on: connection) {
            sqlite3_exec(connection, "ROLLBACK", nil, nil, nil)
            return failed
        }
        let status = sqlite3_exec(connection, "COMMIT", nil, nil, nil)
        var outcome = CommitOutcome(status: status, message: "", systemErrno: 0)
        guard status == SQLITE_OK else {
            outcome.message = "COMMIT: " + String(cString: sqlite3_errmsg(connection))
            outcome.systemErrno = sqlite3_system_errno(connection)
            return outcome
        }
        if let frames = walCounter?.frames.load(ordering: .relaxed), frames > restartFrames {
            outcome.checkpoint = SQLiteDatabase.checkpointPassive(connection)
        }
        return outcome
    }

    /// Statements gathered on the loop, with their values, to run later in order on whichever
    /// thread has the connection then: what a save writes before its `COMMIT` (`commit(_:writing:…)`).
    struct Writes: @unchecked Sendable {   // the handles are used only by whoever holds the connection
        fileprivate var items: [(handle: OpaquePointer, values: [BoundValue])] = []
    }

    /// Adds a run of `sql` with `values` bound to its parameters 1, 2, … to `writes`.
    func add(_ sql: String, _ values: [BoundValue], to writes: inout Writes) throws(LedgerError) {
        writes.items.append((try cachedHandle(sql), values))
    }

    /// Runs `writes` on `connection` in order; the outcome of the first that failed, if one did.
    static func run(_ writes: Writes, on connection: OpaquePointer) -> CommitOutcome? {
        for (handle, values) in writes.items {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
            for (offset, value) in values.enumerated() {
                let index = Int32(offset + 1)
                switch value {
                case .null: sqlite3_bind_null(handle, index)
                case .integer(let number): sqlite3_bind_int64(handle, index, number)
                case .text(let text): sqlite3_bind_text(handle, index, text, -1, transient)
                }
            }
            var status = sqlite3_step(handle)
            while status == SQLITE_ROW { status = sqlite3_step(handle) }
            guard status == SQLITE_DONE else {
                let failed = CommitOutcome(status: status, message: "writing a saved row: " + String(cString: sqlite3_errmsg(connection)),
                                           systemErrno: sqlite3_system_errno(connection))
                sqlite3_reset(handle)
                return failed
            }
            sqlite3_reset(handle)
        }
        return nil
    }
}
