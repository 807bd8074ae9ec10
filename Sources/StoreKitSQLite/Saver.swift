import StoreKitPosix

/// Runs a save's `COMMIT` on a thread of its own, while the serving loop goes on.
///
/// A save writes the held rows, the moved sequence counters and the LSN into the SQLite
/// transaction on the loop, then lends the connection to this thread for the `COMMIT` (which
/// writes every page the transaction changed to the WAL) and, when the WAL has grown long, the
/// checkpoint that restarts it. Meanwhile the loop runs the units of work that need no SQLite
/// statement (a purchase's new row is held in memory, its finish too): they go to the commit log
/// as always. A unit that needs a statement waits for the connection to come back
/// (`SQLiteDatabase.handle`). Nothing is made durable here: the commit log already is.
public final class Saver: @unchecked Sendable {   // `thread`'s lock guards the job queue
    private let thread = WorkerThread("storekitd-save")
    /// Guarded by `thread`'s lock.
    private var jobs: [@Sendable () -> Void] = []
    private let onDone: @Sendable () -> Void
    /// For tests: runs on the thread before each job.
    let beforeJob: (@Sendable () -> Void)?

    /// `onDone` runs on the saver's thread after each job (the loop's wake-up).
    public init(onDone: @escaping @Sendable () -> Void) {
        self.onDone = onDone
        beforeJob = nil
    }

    init(onDone: @escaping @Sendable () -> Void, beforeJob: @escaping @Sendable () -> Void) {
        self.onDone = onDone
        self.beforeJob = beforeJob
    }

    public func start() {
        thread.start(next: { [self] _ in jobs.isEmpty ? nil : jobs.removeFirst() }) { [self] job in
            beforeJob?()
            job()
            onDone()
        }
    }

    /// Ends the thread once the queued jobs are done.
    public func stop() { thread.stop() }

    func run(_ job: @escaping @Sendable () -> Void) {
        thread.update { jobs.append(job) }
    }
}
