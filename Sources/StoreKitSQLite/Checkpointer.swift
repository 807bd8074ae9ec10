import CSQLite
import StoreKitPosix
import Synchronization

/// Copies committed WAL frames into the database file on a background thread.
///
/// With SQLite's automatic checkpoints, every ~1000th commit of the serving loop would also copy
/// and fsync the database file while every client waits. Here the writer turns them off
/// (`wal_autocheckpoint=0`) and this thread runs `wal_checkpoint(PASSIVE)` on its own connection:
/// it never blocks the writer, and SQLite restarts the WAL from its beginning once a checkpoint
/// has caught up.
///
/// It also tells the commit log how far the database file is durable: a checkpoint on this
/// connection (`synchronous=FULL`) fsyncs the WAL, copies it and fsyncs the database, so once it
/// copied the frames of the last SQLite commit noted before it began, every unit of work up to that
/// commit is in the database file and the commit log may reuse the space that held it.
public final class Checkpointer: @unchecked Sendable {
    private let path: String
    private let durable: CommitLog.DurableMark?
    /// The shortest time between checkpoints the WAL's size calls for; without a durable mark,
    /// the time between checkpoints.
    private let interval: Double
    private let thread = WorkerThread("storekitd-ckpt")
    /// Guarded by `thread`'s lock: whether the final checkpoint (on stop) was taken; when the last checkpoint started (monotonic seconds), the LSN it
    /// was for, and when the waiting thread wakes by itself (nil: only when signalled).
    private var last = Monotonic.seconds()
    private var tried: UInt64 = 0
    private var waitingUntil: Double?
    private var finalTaken = false
    private let wakeCount = Atomic<Int>(0)

    /// Times the thread woke up to look at the WAL (for tests: an idle daemon's stays put).
    public var wakeUps: Int { wakeCount.load(ordering: .relaxed) }

    /// WAL frames (1 KiB pages) that make a checkpoint due.
    static let walFrames = 4096
    /// Seconds after which new commits are checkpointed however few they are.
    static let maximumDelay: Double = 2

    public init(path: String, durable: CommitLog.DurableMark? = nil, interval: Double = 0.1) {
        self.path = path
        self.durable = durable
        self.interval = interval
    }

    /// Its own connection: opened by `start()`, then used by the thread only.
    private var database: SQLiteDatabase?

    /// Opens the checkpoints' connection and starts the thread (none if it cannot be opened).
    public func start() {
        guard let database = try? SQLiteDatabase(path: path), (try? database.execute("PRAGMA synchronous=FULL")) != nil else {
            return
        }
        self.database = database
        durable?.onCommit { [weak self] in self?.wake() }
        // Sleeps until a checkpoint is due, with no timer while there is nothing to copy: an idle
        // daemon's checkpoint thread does not wake up. A final checkpoint on stop leaves a short
        // WAL behind for the next start.
        thread.start(next: { [self] stopping -> Pass? in
            waitingUntil = nil
            if stopping {
                guard !finalTaken else { return nil }
                finalTaken = true
            } else if !isDue(since: last, tried: tried) {
                waitingUntil = deadline(since: last, tried: tried)
                return nil
            }
            let commit = durable?.lastCommitted
            last = Monotonic.seconds()
            tried = commit?.lsn ?? 0
            return Pass(commit: commit)
        }, deadline: { [self] in waitingUntil }, woke: { [self] in wakeCount.add(1, ordering: .relaxed) }) { [self] pass in
            if let result = self.database?.checkpointPassive(), let commit = pass.commit {
                durable?.checkpointed(result.checkpointed, of: result.frames, since: commit)
            }
        }
    }

    public func stop() { thread.stop() }

    /// One checkpoint, of the commits up to `commit` (nil without a durable mark).
    private struct Pass {
        let commit: (lsn: UInt64, frames: Int)?
    }

    /// After a commit: wakes the thread only if the commit brings the next checkpoint forward
    /// (it sleeps without a deadline, or the WAL grew past `walFrames`).
    func wake() {
        thread.wake {
            guard let next = deadline(since: last, tried: tried) else { return false }
            return waitingUntil.map { next < $0 } ?? true
        }
    }

    /// Few and large: a checkpoint's fsyncs delay the commit log's on the same disk, so one is due
    /// when commits are not yet durable in the database and the WAL holds `walFrames`, or
    /// `maximumDelay` after the last checkpoint. A checkpoint that could not copy everything (a
    /// reader holds an old snapshot) is tried again after a new commit, at most every `interval`,
    /// or after `maximumDelay`. Without a durable mark: every `interval`.
    private func isDue(since last: Double, tried: UInt64) -> Bool {
        let elapsed = Monotonic.seconds() - last
        guard let durable else { return elapsed >= interval }
        let commit = durable.lastCommitted
        guard commit.lsn > durable.lsn else { return false }
        return (commit.frames >= Self.walFrames && commit.lsn != tried && elapsed >= interval) || elapsed >= Self.maximumDelay
    }

    /// When (monotonic seconds) the next checkpoint falls due without a new commit; nil: not
    /// before one.
    private func deadline(since last: Double, tried: UInt64) -> Double? {
        guard let durable else { return last + interval }
        let commit = durable.lastCommitted
        guard commit.lsn > durable.lsn else { return nil }
        return last + (commit.frames >= Self.walFrames && commit.lsn != tried ? interval : Self.maximumDelay)
    }

}
