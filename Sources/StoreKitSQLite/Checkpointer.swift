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
    private let condition = Condition()
    private var running = true
    /// Guarded by `condition`: when the last checkpoint started (monotonic seconds), the LSN it
    /// was for, and when the waiting thread wakes by itself (nil: only when signalled).
    private var last = Monotonic.seconds()
    private var tried: UInt64 = 0
    private var waitingUntil: Double?
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

    public func start() {
        NamedThread.start("storekitd-ckpt") { [self] in loop() }
    }

    public func stop() {
        condition.lock()
        running = false
        condition.signal()
        condition.unlock()
    }

    /// After a commit: wakes the thread only if the commit brings the next checkpoint forward
    /// (it sleeps without a deadline, or the WAL grew past `walFrames`).
    func wake() {
        condition.lock()
        if let next = deadline(since: last, tried: tried), waitingUntil.map({ next < $0 }) ?? true {
            condition.signal()
        }
        condition.unlock()
    }

    private func loop() {
        guard let database = try? SQLiteDatabase(path: path), (try? database.execute("PRAGMA synchronous=FULL")) != nil else {
            return
        }
        durable?.onCommit { [weak self] in self?.wake() }
        while true {
            // Sleeps until a checkpoint is due, with no timer while there is nothing to copy: an
            // idle daemon's checkpoint thread does not wake up. A final checkpoint on stop leaves
            // a short WAL behind for the next start.
            condition.lock()
            while running && !isDue(since: last, tried: tried) {
                waitingUntil = deadline(since: last, tried: tried)
                if let waitingUntil {
                    condition.wait(untilMonotonic: waitingUntil)
                } else {
                    condition.wait()
                }
                wakeCount.add(1, ordering: .relaxed)
            }
            waitingUntil = nil
            let keepGoing = running
            let commit = durable?.lastCommitted
            last = Monotonic.seconds()
            tried = commit?.lsn ?? 0
            condition.unlock()
            if let result = database.checkpointPassive(), let commit {
                durable?.checkpointed(result.checkpointed, of: result.frames, since: commit)
            }
            if !keepGoing { return }
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
