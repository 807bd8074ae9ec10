import StoreKitPosix
import Synchronization

/// Runs the commit log's `fdatasync` on a thread of its own: pipelined group commit.
///
/// Without it the loop writes a unit of work's record and waits for the disk before it reads the
/// next requests. With it the loop writes the record, asks for a sync and goes on executing the
/// next unit of work while the disk works; the answers of a unit of work are held until
/// `syncedLSN` reaches its LSN (`onSynced` tells the loop). Each sync covers every record written
/// before it started, so under load one fdatasync makes several units of work durable.
///
/// A failed fdatasync cannot be retried safely (the kernel may have dropped the dirty pages), so it
/// is reported through `failure` and no LSN after it is ever declared synced.
///
/// It owns no descriptor: the commit log lends its segments' numbers with each request and keeps
/// them open until it is released, which the daemon does only after `stop()`.
public final class CommitLogSyncer: @unchecked Sendable {
    private let condition = Condition()
    /// Guarded by `condition`.
    private var requested: UInt64 = 0
    private var files: Set<FileDescriptor.Lent> = []
    private var running = true
    private var failureMessage: String?

    private let synced = Atomic<UInt64>(0)
    private let onSynced: @Sendable () -> Void

    /// `onSynced` runs on the sync thread after each sync (and after a failure).
    public init(onSynced: @escaping @Sendable () -> Void) {
        self.onSynced = onSynced
    }

    /// The highest LSN that is on disk.
    public var syncedLSN: UInt64 { synced.load(ordering: .acquiring) }

    /// Why syncing stopped, if it did.
    public var failure: String? {
        condition.lock()
        defer { condition.unlock() }
        return failureMessage
    }

    public func start(syncedThrough lsn: UInt64) {
        synced.store(lsn, ordering: .releasing)
        NamedThread.start("storekitd-sync") { [self] in loop() }
    }

    public func stop() {
        condition.lock()
        running = false
        condition.signal()
        condition.unlock()
    }

    /// Asks for everything written to `file` up to `lsn` to be made durable.
    func request(_ lsn: UInt64, file: FileDescriptor.Lent) {
        condition.lock()
        requested = max(requested, lsn)
        files.insert(file)
        condition.signal()
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while running && requested <= syncedLSN { condition.wait() }
            if !running && requested <= syncedLSN {
                condition.unlock()
                return
            }
            let target = requested
            let dirty = files
            files.removeAll()
            condition.unlock()

            var failed: String?
            for file in dirty {
                do throws(Errno) {
                    try file.synchronizeData()
                } catch {
                    failed = "fdatasync of the commit log failed: \(error)"
                }
            }
            if let failed {
                condition.lock()
                failureMessage = failed
                running = false
                condition.unlock()
                onSynced()
                return
            }
            synced.store(target, ordering: .releasing)
            onSynced()
        }
    }
}
