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
public final class Saver: @unchecked Sendable {   // `condition` guards the job queue
    private let condition = Condition()
    /// Guarded by `condition`.
    private var jobs: [@Sendable () -> Void] = []
    private var running = true
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
        NamedThread.start("storekitd-save") { [self] in loop() }
    }

    /// Ends the thread once the queued jobs are done.
    public func stop() {
        condition.lock()
        running = false
        condition.signal()
        condition.unlock()
    }

    func run(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while running && jobs.isEmpty { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            beforeJob?()
            job()
            onDone()
        }
    }
}
