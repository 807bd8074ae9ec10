import CSQLite
import Foundation
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
    private let interval: TimeInterval
    private let condition = NSCondition()
    private var running = true
    private var thread: Thread?
    /// Whether the waiting thread has a deadline (guarded by `condition`).
    private var hasDeadline = false
    private let wakeCount = Atomic<Int>(0)

    /// Times the thread woke up to look at the WAL (for tests: an idle daemon's stays put).
    public var wakeUps: Int { wakeCount.load(ordering: .relaxed) }

    /// WAL frames (1 KiB pages) that make a checkpoint due.
    static let walFrames = 4096
    /// Seconds after which new commits are checkpointed however few they are.
    static let maximumDelay: TimeInterval = 2

    public init(path: String, durable: CommitLog.DurableMark? = nil, interval: TimeInterval = 0.1) {
        self.path = path
        self.durable = durable
        self.interval = interval
    }

    public func start() {
        let thread = Thread { [self] in loop() }
        thread.name = "storekitd.checkpoint"
        self.thread = thread
        thread.start()
    }

    public func stop() {
        condition.lock()
        running = false
        condition.signal()
        condition.unlock()
    }

    /// After a commit: wakes the thread if the commit may change when the next checkpoint is
    /// due (it sleeps without a deadline, or the WAL is full enough); otherwise its deadline stands.
    func wake() {
        condition.lock()
        if !hasDeadline || (durable?.lastCommitted.frames ?? 0) >= Self.walFrames { condition.signal() }
        condition.unlock()
    }

    private func loop() {
        guard let database = try? SQLiteDatabase(path: path), (try? database.execute("PRAGMA synchronous=FULL")) != nil else {
            return
        }
        durable?.onCommit { [weak self] in self?.wake() }
        var last = Date()
        var tried: UInt64 = 0
        while true {
            // Sleeps until a checkpoint is due, with no timer while there is nothing to copy: an
            // idle daemon's checkpoint thread does not wake up. A final checkpoint on stop leaves
            // a short WAL behind for the next start.
            condition.lock()
            while running && !isDue(since: last, tried: tried) {
                if let deadline = deadline(since: last) {
                    hasDeadline = true
                    _ = condition.wait(until: deadline)
                } else {
                    hasDeadline = false
                    condition.wait()
                }
                wakeCount.add(1, ordering: .relaxed)
            }
            let keepGoing = running
            condition.unlock()
            let commit = durable?.lastCommitted
            last = Date()
            tried = commit?.lsn ?? 0
            if let result = database.checkpointPassive(), let commit { durable?.checkpointed(result.checkpointed, since: commit) }
            if !keepGoing { return }
        }
    }

    /// Few and large: a checkpoint's fsyncs delay the commit log's on the same disk, so one is due
    /// when commits not yet durable in the database fill `walFrames` of the WAL, or
    /// `maximumDelay` after the last checkpoint. A checkpoint that could not copy everything (a
    /// reader holds an old snapshot) is retried after a new commit or after `maximumDelay`, not
    /// at once. Without a durable mark: every `interval`.
    private func isDue(since last: Date, tried: UInt64) -> Bool {
        guard let durable else { return -last.timeIntervalSinceNow >= interval }
        let commit = durable.lastCommitted
        guard commit.lsn > durable.lsn else { return false }
        return (commit.frames >= Self.walFrames && commit.lsn != tried) || -last.timeIntervalSinceNow >= Self.maximumDelay
    }

    /// When the next checkpoint falls due without a new commit; nil: not before one.
    private func deadline(since last: Date) -> Date? {
        guard let durable else { return last.addingTimeInterval(interval) }
        return durable.lastCommitted.lsn > durable.lsn ? last.addingTimeInterval(Self.maximumDelay) : nil
    }
}
