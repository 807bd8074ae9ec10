import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// A thread of the daemon's own, named as `ps -T`, `top -H` and `perf` show it.
///
/// pthreads directly, not Foundation's `Thread`: the daemon does not load Foundation (only
/// FoundationEssentials), whose libraries and ICU's data would be 6 MB of its resident set.
public enum NamedThread {
    private final class Start {
        let name: String
        let timeSlice: UInt64?
        let body: @Sendable () -> Void
        init(name: String, timeSlice: UInt64?, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.timeSlice = timeSlice
            self.body = body
        }
    }

    /// Runs `body` on a new, detached thread named `name` (at most 15 bytes). `timeSlice`: the
    /// thread's slice in the fair scheduler (ns, 100,000 at least), for a thread that runs briefly
    /// and must not wait for another thread's slice to end when it wakes. Kernels before 6.12
    /// keep their own slice; the thread runs either way.
    public static func start(_ name: String, timeSlice: UInt64? = nil, _ body: @escaping @Sendable () -> Void) {
        precondition(name.utf8.count <= 15, "a thread name has at most 15 bytes")
        let start = Unmanaged.passRetained(Start(name: name, timeSlice: timeSlice, body: body)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let status = pthread_create(&thread, &attributes, { context in
            guard let context else { return nil }
            let start = Unmanaged<Start>.fromOpaque(context).takeRetainedValue()
            storekit_name_thread(start.name)
            if let slice = start.timeSlice { _ = storekit_set_time_slice(slice) }
            start.body()
            return nil
        }, start)
        // Only without memory or past the thread limit (TasksMax=): nothing can run without the thread.
        precondition(status == 0, "cannot start thread \(name): \(String(cString: strerror(status)))")
    }
}

/// A mutex and its condition variable, whose timed waits run on the monotonic clock (a wall-clock
/// step never shortens or stretches them).
public final class Condition: @unchecked Sendable {   // the pthread objects are the synchronisation
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }

    /// Waits (holding the lock) until signalled; may wake without a signal, as pthreads may.
    public func wait() { pthread_cond_wait(condition, mutex) }

    /// Waits (holding the lock) until signalled or until the monotonic clock reads `deadline`
    /// (seconds, as `Monotonic.seconds()`); false when the deadline passed.
    @discardableResult
    public func wait(untilMonotonic deadline: Double) -> Bool {
        // Clamped to what a timespec holds (a deadline past it waits as if for ever), nanoseconds
        // rounded up: a wait never ends before its deadline.
        let clamped = deadline.isNaN ? 0 : min(max(deadline, 0), 1e15)
        var seconds = Int(clamped.rounded(.down))
        var nanoseconds = Int(((clamped - Double(seconds)) * 1e9).rounded(.up))
        if nanoseconds >= 1_000_000_000 {
            seconds += 1
            nanoseconds -= 1_000_000_000
        }
        var time = timespec(tv_sec: seconds, tv_nsec: nanoseconds)
        return pthread_cond_timedwait(condition, mutex, &time) == 0
    }

    public func signal() { pthread_cond_signal(condition) }
    public func broadcast() { pthread_cond_broadcast(condition) }

    /// Runs `body` holding the lock.
    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }

}

/// One or more threads of the daemon's own that take work under one lock, do it without the
/// lock, and end when stopped once there is no work left: the daemon's signers, the commit
/// log's sync, the saver and the checkpointer are each one, started and stopped in one place.
///
/// Each thread loops: under the lock, `next(stopping)` takes the next piece of work; while there
/// is none it waits until woken (`update`, `stop`) or until `deadline()` (monotonic seconds; nil:
/// no timer); once stopping, it ends when `next` finds none. The work runs without the lock.
public final class WorkerThread: @unchecked Sendable {   // `condition` guards `stopping` and the owner's state
    public let name: String
    public let threadCount: Int
    private let timeSlice: UInt64?
    private let condition = Condition()
    /// Guarded by `condition`.
    private var stopping = false

    /// `threads` named `name`, `name1`, `name2`, … (at most 15 bytes each); `timeSlice` as in
    /// `NamedThread.start`.
    public init(_ name: String, threads: Int = 1, timeSlice: UInt64? = nil) {
        precondition(threads >= 1, "a worker has at least one thread")
        self.name = name
        threadCount = threads
        self.timeSlice = timeSlice
    }

    /// Starts the threads. `woke` runs under the lock after every wait (for counting).
    public func start<Work>(
        next: @escaping @Sendable (_ stopping: Bool) -> Work?,
        deadline: @escaping @Sendable () -> Double? = { nil },
        woke: @escaping @Sendable () -> Void = {},
        run: @escaping @Sendable (Work) -> Void
    ) {
        for index in 0..<threadCount {
            NamedThread.start(index == 0 ? name : "\(name)\(index)", timeSlice: timeSlice) { [self] in
                condition.lock()
                while true {
                    if let work = next(stopping) {
                        condition.unlock()
                        run(work)
                        condition.lock()
                        continue
                    }
                    if stopping { break }
                    if let deadline = deadline() {
                        condition.wait(untilMonotonic: deadline)
                    } else {
                        condition.wait()
                    }
                    woke()
                }
                condition.unlock()
            }
        }
    }

    /// Runs `body` holding the lock and wakes every thread: what it changed may be work.
    @discardableResult
    public func update<T>(_ body: () throws -> T) rethrows -> T {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        return try body()
    }

    /// Wakes the threads if `shouldWake()`, checked holding the lock.
    public func wake(if shouldWake: () -> Bool) {
        condition.lock()
        if shouldWake() { condition.broadcast() }
        condition.unlock()
    }

    /// Runs `body` holding the lock, waking no one.
    public func read<T>(_ body: () throws -> T) rethrows -> T {
        try condition.withLock(body)
    }

    /// Waits (from another thread) until `done()`, checked holding the lock each time the
    /// workers' state changes; the work must call `update` when it may have made it true.
    public func wait(until done: () -> Bool) {
        condition.lock()
        while !done() { condition.wait() }
        condition.unlock()
    }

    /// The threads end once `next` finds no work (stopping). Does not wait for them.
    public func stop() {
        update { stopping = true }
    }
}
