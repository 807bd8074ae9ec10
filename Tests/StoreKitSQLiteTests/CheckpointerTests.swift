import Foundation
import StoreKitSQLite
import StoreKitTestSupport
import Testing

@Suite("Checkpointer: when the checkpoint thread runs")
struct CheckpointerTests {
    @Test("commits are checkpointed within the maximum delay; with nothing left to copy the thread sleeps without a timer")
    func idleThreadSleeps() throws {
        let fixture = StoreFixture()
        let store = try fixture.open()
        try store.disableAutomaticCheckpoints()
        let durable = store.commitLog.durable
        let checkpointer = Checkpointer(path: fixture.path, durable: durable)
        checkpointer.start()
        defer { checkpointer.stop() }

        func commitOne() throws -> UInt64 {
            try StoreFixture.unit(store) { try store.insert(makeRecord(id: store.allocateTransactionID())) }
            try store.save()
            return store.commitLog.nextLSN - 1
        }
        let first = try commitOne()
        #expect(eventually(timeout: 5) { durable.lsn >= first }, "durable \(durable.lsn), committed \(first)")

        // Everything is durable in the database file: a second without commits wakes nothing. Not
        // a wait for an event (there is none when nothing happens) but the window a timer, if the
        // thread had one, would show in.
        let before = checkpointer.wakeUps
        #expect(!eventually(timeout: 1) { checkpointer.wakeUps != before }, "woke \(checkpointer.wakeUps - before) times while idle")

        // The next commit wakes it again: no wake-up is lost while it sleeps without a timer.
        let second = try commitOne()
        #expect(eventually(timeout: 5) { durable.lsn >= second }, "durable \(durable.lsn), committed \(second)")
    }

    @Test("while a reader holds an old snapshot, a full WAL is checkpointed again at most every 100 ms, not at every commit")
    func pinnedWALIsNotRetriedPerCommit() throws {
        let fixture = StoreFixture()
        let store = try fixture.open()
        try store.disableAutomaticCheckpoints()
        let checkpointer = Checkpointer(path: fixture.path, durable: store.commitLog.durable)
        checkpointer.start()
        defer { checkpointer.stop() }
        // A reader's snapshot from before everything below: no checkpoint can copy past it.
        let reader = try SQLiteDatabase(path: fixture.path, readOnly: true)
        try reader.execute("BEGIN")
        _ = try reader.scalarInt("SELECT count(*) FROM transactions")
        defer { try? reader.execute("COMMIT") }
        // More than 4096 WAL frames of 1 KiB: long application usernames fill pages fast.
        for _ in 0..<40 {
            try StoreFixture.unit(store) {
                for _ in 0..<100 {
                    var record = makeRecord(id: store.allocateTransactionID())
                    record.applicationUsername = String(repeating: "u", count: 900)
                    try store.insert(record)
                }
            }
            try store.save()
        }
        // 150 small commits 2 ms apart (0.3 s): each one may make a checkpoint due, at most
        // every 100 ms while the reader keeps it from getting anywhere.
        // Bounded by the time the commits took, not by a fixed count, so that a slow or loaded
        // machine (longer than 0.3 s) allows proportionally more retries, and no more.
        let before = checkpointer.wakeUps
        let started = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<150 {
            try StoreFixture.unit(store) { try store.insert(makeRecord(id: store.allocateTransactionID())) }
            try store.save()
            usleep(2_000)
        }
        let woke = checkpointer.wakeUps - before
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        // Each 100 ms period may see the timed retry and one wake-up by a commit that found a
        // checkpoint due: two per period, plus a few for the start of the loop.
        let allowed = Int(elapsed / 0.05) + 5
        #expect(woke <= allowed, "the checkpoint thread woke \(woke) times for 150 commits in \(elapsed) s (at most \(allowed))")
        #expect(woke < 75, "the checkpoint thread woke \(woke) times for 150 commits: about once per commit")
    }

    /// The names of this process's threads, as the kernel has them.
    static func threadNames() -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
            .map { $0.trimmingCharacters(in: .newlines) }
    }

    @Test("the checkpoint and commit-log sync threads carry their names in the kernel (ps -T, top -H)")
    func threadsAreNamed() throws {
        let fixture = StoreFixture()
        let store = try fixture.open()
        let checkpointer = Checkpointer(path: fixture.path, durable: store.commitLog.durable)
        let syncer = CommitLogSyncer(onSynced: {})
        checkpointer.start()
        syncer.start(syncedThrough: 0)
        defer { checkpointer.stop(); syncer.stop() }
        #expect(eventually(timeout: 5) {
            let names = Self.threadNames()
            return names.contains("storekitd-ckpt") && names.contains("storekitd-sync")
        }, "threads: \(Self.threadNames())")
    }

    /// The `se.slice` line of each thread named `name` in /proc/self/task/*/sched (ns).
    static func slices(of name: String) -> [UInt64] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { task -> UInt64? in
            guard (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
                .trimmingCharacters(in: .newlines) == name,
                  let sched = try? String(contentsOfFile: "/proc/self/task/\(task)/sched", encoding: .utf8),
                  let line = sched.split(separator: "\n").first(where: { $0.hasPrefix("se.slice") }),
                  let value = line.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) else { return nil }
            return UInt64(value)
        }
    }

    /// Linux 6.12 and later honour a fair thread's own slice, and show it as `se.slice`.
    static var kernelHonoursSlices: Bool {
        var name = utsname()
        uname(&name)
        let release = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let parts = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        guard parts.count == 2, (parts[0], parts[1]) >= (6, 12) else { return false }
        return FileManager.default.fileExists(atPath: "/proc/self/sched")
    }

    @Test("the commit-log sync thread runs with the shortest slice, so that it need not wait for the loop's to end",
          .enabled(if: kernelHonoursSlices, "needs Linux 6.12 or later with /proc/PID/sched"))
    func syncThreadHasAShortSlice() throws {
        let syncer = CommitLogSyncer(onSynced: {})
        syncer.start(syncedThrough: 0)
        defer { syncer.stop() }
        #expect(eventually(timeout: 5) { !Self.slices(of: "storekitd-sync").isEmpty }, "threads: \(Self.threadNames())")
        let slices = Self.slices(of: "storekitd-sync")
        #expect(!slices.isEmpty && slices.allSatisfy { $0 == CommitLogSyncer.timeSlice }, "slices: \(slices)")
        // Other threads keep the kernel's default slice.
        let own = try String(contentsOfFile: "/proc/thread-self/sched", encoding: .utf8)
            .split(separator: "\n").first { $0.hasPrefix("se.slice") }?.split(separator: ":").last
            .map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(own != nil && own != String(CommitLogSyncer.timeSlice))
    }
}
