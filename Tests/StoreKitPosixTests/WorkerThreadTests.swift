import Foundation
import StoreKitPosix
import Synchronization
import Testing

/// The one loop of the daemon's long-lived threads (`WorkerThread`): work taken under the lock,
/// run without it, every queued piece run before the threads end, deadlines honoured.
@Suite struct WorkerThreadTests {
    /// The names of this process's threads, as the kernel knows them.
    static func threadNames() -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
            .map { $0.trimmingWhitespace() }
    }

    /// Polls `condition` every millisecond for up to `seconds`.
    static func eventually(within seconds: Double = 10, _ condition: () -> Bool) -> Bool {
        let deadline = Monotonic.seconds() + seconds
        while !condition() {
            if Monotonic.seconds() > deadline { return false }
            usleep(1_000)
        }
        return true
    }

    /// A queue of numbers and what the threads did with them, guarded by the worker's lock.
    final class Work: @unchecked Sendable {
        var queued: [Int] = []
        var ran: [Int] = []
    }

    @Test("every piece queued before stop runs once, on the named threads, and then the threads end")
    func queuedWorkRunsThenThreadsEnd() {
        let worker = WorkerThread("sk-worktest", threads: 3)
        let work = Work()
        worker.start(next: { _ in work.queued.isEmpty ? nil : work.queued.removeFirst() }) { number in
            // Run without the lock: taking it here would deadlock otherwise.
            worker.update { work.ran.append(number) }
        }
        #expect(Self.eventually { Set(Self.threadNames()).isSuperset(of: ["sk-worktest", "sk-worktest1", "sk-worktest2"]) })
        worker.update { work.queued.append(contentsOf: 0..<500) }
        worker.stop()
        worker.wait { work.ran.count == 500 }
        #expect(worker.read { work.ran.sorted() } == Array(0..<500))
        #expect(Self.eventually { !Self.threadNames().contains { $0.hasPrefix("sk-worktest") } },
                "the threads ended: \(Self.threadNames())")
    }

    @Test("a deadline wakes a thread that nobody signals; without one it sleeps until woken")
    func deadlineWakesTheThread() {
        let worker = WorkerThread("sk-worktest-d")
        let start = Monotonic.seconds()
        let dueAt = start + 0.1
        let ran = Mutex<Double?>(nil)
        let wakeUps = Atomic<Int>(0)
        let done = Mutex(false)
        worker.start(next: { _ -> Double? in
            !done.withLock({ $0 }) && Monotonic.seconds() >= dueAt ? Monotonic.seconds() : nil
        }, deadline: { done.withLock { $0 } ? nil : dueAt }, woke: { wakeUps.add(1, ordering: .relaxed) }) { time in
            ran.withLock { $0 = time }
            done.withLock { $0 = true }
        }
        #expect(Self.eventually { ran.withLock { $0 } != nil })
        let after = (ran.withLock { $0 } ?? .infinity) - start
        #expect(after >= 0.1 && after < 5, "ran \(after) s after the start")
        // Now without a deadline: no further wake-ups while nothing happens.
        let woken = wakeUps.load(ordering: .relaxed)
        usleep(200_000)
        #expect(wakeUps.load(ordering: .relaxed) == woken)
        worker.stop()
        #expect(Self.eventually { !Self.threadNames().contains("sk-worktest-d") })
    }

    @Test("on stop, `next` is told so: a final piece of work can be taken once")
    func stopIsToldToNext() {
        let worker = WorkerThread("sk-worktest-s")
        let finals = Mutex(0)
        let taken = Mutex(false)
        worker.start(next: { stopping -> Bool? in
            guard stopping else { return nil }
            return taken.withLock { wasTaken in
                defer { wasTaken = true }
                return wasTaken ? nil : true
            }
        }) { _ in finals.withLock { $0 += 1 } }
        worker.stop()
        #expect(Self.eventually { finals.withLock { $0 } == 1 })
        #expect(Self.eventually { !Self.threadNames().contains("sk-worktest-s") }, "the thread ended after its final piece")
        #expect(finals.withLock { $0 } == 1)
    }
}
