import CSQLite
import Foundation

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

    private func loop() {
        guard let database = try? SQLiteDatabase(path: path), (try? database.execute("PRAGMA synchronous=FULL")) != nil else {
            return
        }
        var last = Date()
        while true {
            condition.lock()
            if running { _ = condition.wait(until: Date().addingTimeInterval(interval)) }
            let keepGoing = running
            condition.unlock()
            // Few and large: a checkpoint's fsyncs delay the commit log's on the same disk, so it
            // runs once the WAL holds `walFrames`, or `maximumDelay` after the last one. A final
            // checkpoint on stop leaves a short WAL behind for the next start.
            let commit = durable?.lastCommitted
            if let commit, let durable, keepGoing {
                let due = commit.frames >= Self.walFrames || (commit.lsn > durable.lsn && -last.timeIntervalSinceNow >= Self.maximumDelay)
                guard due else { continue }
            }
            last = Date()
            if let result = database.checkpointPassive(), let commit { durable?.checkpointed(result.checkpointed, since: commit) }
            if !keepGoing { return }
        }
    }
}
