import CPosix
import Foundation
import StoreKitLedger
import StoreKitPosix
import StoreKitSQLite
import StoreKitTestSupport
import Testing

@Suite("CommitLog: appending, recovery, segments")
struct CommitLogTests {
    let directory = TemporaryDirectory("sklog")
    var path: String { directory.file("storekitd.sqlite") }

    static func payload(_ lsn: UInt64, size: Int = 100) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: Int(lsn) &* 31 &+ $0) }
    }

    func segment(_ index: Int) -> String { path + "-log.\(index)" }

    /// The log of database 7 at `path`, started at LSN 1.
    func startedLog(switchSize: Int = CommitLog.defaultSwitchSize) throws -> CommitLog {
        let log = try CommitLog(databasePath: path, database: 7, switchSize: switchSize)
        try log.start(nextLSN: 1)
        return log
    }

    /// Appends the records `lsns`, each with `payload(lsn, size:)`.
    static func append(_ lsns: ClosedRange<UInt64>, to log: CommitLog, size: Int = 100) throws {
        for lsn in lsns { try log.append(payload(lsn, size: size)) }
    }

    @Test("records come back in order, after the LSN the database already has")
    func roundTrip() throws {
        defer { directory.remove() }
        do {
            let log = try startedLog()
            for lsn in 1...3 as ClosedRange<UInt64> { try log.append(Self.payload(lsn, size: Int(lsn) * 13)) }
            #expect(log.nextLSN == 4)
        }
        let reopened = try CommitLog(databasePath: path, database: 7)
        let all = reopened.recover(after: 0)
        #expect(all.records.map(\.lsn) == [1, 2, 3])
        #expect(all.records.map(\.payload) == [1, 2, 3].map { Self.payload($0, size: Int($0) * 13) })
        #expect(all.problems.isEmpty)
        #expect(reopened.recover(after: 2).records.map(\.lsn) == [3])
        #expect(reopened.recover(after: 3).records.isEmpty)
    }

    @Test("a torn last record is not returned; the ones before it are")
    func tornTail() throws {
        defer { directory.remove() }
        var end = 0
        do {
            let log = try startedLog()
            try Self.append(1...3, to: log)
            end = log.end(ofSegment: 0)
        }
        // The last byte of the last record's payload never reached the disk.
        let handle = try #require(FileHandle(forUpdatingAtPath: segment(0)))
        try handle.seek(toOffset: UInt64(end - 5))
        try handle.write(contentsOf: Data([0xFF]))
        try handle.close()
        let recovery = try CommitLog(databasePath: path, database: 7).recover(after: 0)
        #expect(recovery.records.map(\.lsn) == [1, 2])
    }

    @Test("records from before a restart of the log are never replayed, and a gap is reported")
    func staleRecordsAndGaps() throws {
        defer { directory.remove() }
        do {
            let log = try startedLog()
            try Self.append(1...5, to: log)
            // The database took 1…5; the log starts over (new salts) at 6 and writes over them.
            try log.start(nextLSN: 6)
            try log.append(Self.payload(6, size: 10))
        }
        let log = try CommitLog(databasePath: path, database: 7)
        #expect(log.recover(after: 5).records.map(\.lsn) == [6])
        // A database that only reached 3 cannot be brought to 6: 4 and 5 are gone.
        let behind = log.recover(after: 3)
        #expect(behind.records.isEmpty)
        #expect(behind.problems.count == 1)
        #expect(behind.problems.first?.contains("gap after 3") == true)
    }

    @Test("segments alternate once the other one is durable, and nothing not yet durable is overwritten")
    func segmentsAreReusedOnlyWhenDurable() throws {
        defer { directory.remove() }
        do {
            let log = try startedLog(switchSize: 4096)
            // Records of ~1 KiB: four fill a segment. 1…4 go to segment 0, then (segment 1 is
            // empty) 5…30 to segment 1, which grows: segment 0 holds records not yet durable.
            try Self.append(1...30, to: log, size: 1000)
            #expect(log.activeSegment == 1)
            #expect(log.end(ofSegment: 1) > 25_000)
            #expect(log.recover(after: 0).records.map(\.lsn) == Array(1...30))

            // Up to 30 durable: segment 0 (1…4) is started over for 31…34; then segment 1
            // (…30) for 35…38; then segment 0 holds 31…34, not durable, so 39 and 40 stay.
            log.durable.advance(to: 30)
            try log.append(Self.payload(31, size: 1000))
            #expect(log.activeSegment == 0)
            try Self.append(32...40, to: log, size: 1000)
            #expect(log.activeSegment == 1)
            #expect(log.recover(after: 30).records.map(\.lsn) == Array(31...40))

            // Still only 30 durable: however full segment 1 gets, segment 0 is kept.
            try Self.append(41...60, to: log, size: 1000)
            #expect(log.activeSegment == 1)
            #expect(log.recover(after: 30).records.map(\.lsn) == Array(31...60))
        }
        let reopened = try CommitLog(databasePath: path, database: 7, switchSize: 4096)
        let recovery = reopened.recover(after: 30)
        #expect(recovery.records.map(\.lsn) == Array(31...60))
        #expect(recovery.records.map(\.payload) == (31...60).map { Self.payload($0, size: 1000) })
    }

    /// Delayed allocation, and FIEMAP's report of it, are ext4's (tmpfs has neither).
    static let temporaryFilesOnExt4 = storekit_file_system_type("/tmp") == 0xEF53

    @Test("a segment that grows has its blocks allocated at once, not by the first durable append into each page",
          .enabled(if: temporaryFilesOnExt4, "the temporary directory is not on ext4"))
    func grownSegmentsAreAllocated() throws {
        defer { directory.remove() }
        let log = try startedLog(switchSize: 65_536)
        // Nothing durable: segment 0 takes 1…64, segment 1 takes 65… and grows by 64 KiB, of
        // which the last records use the first few.
        try Self.append(1...135, to: log, size: 1000)
        #expect(log.activeSegment == 1)
        #expect(log.end(ofSegment: 1) > 65_536)
        for index in 0...1 {
            let fd = open(segment(index), O_RDONLY)
            defer { close(fd) }
            // Delayed allocation left for the appends would put a metadata write on their path.
            let delayed = storekit_has_delayed_allocation(fd)
            try #require(delayed >= 0, "FIEMAP: \(String(cString: strerror(errno)))")
            #expect(delayed == 0, "segment \(index) has extents waiting for allocation")
        }
    }

    @Test("another database's log is not applied, and says so")
    func anotherDatabase() throws {
        defer { directory.remove() }
        do {
            try Self.append(1...1, to: try startedLog())
        }
        let other = try CommitLog(databasePath: path, database: 8).recover(after: 0)
        #expect(other.records.isEmpty)
        #expect(other.problems.isEmpty)
        #expect(other.foreignSegments.count == 1)
    }

    @Test("a lock left for a moment with a child process (forked, not yet exec'd) is waited for")
    func lockHeldByChildIsWaitedFor() throws {
        defer { directory.remove() }
        // As a child forked by another thread holds it until its exec: here a child (cat) that
        // keeps a copy of the locked file description until its stdin is closed.
        let fd = open(segment(0), O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        try #require(flock(fd, LOCK_EX | LOCK_NB) == 0)
        var stdinPipe: [Int32] = [-1, -1]
        try #require(pipe(&stdinPipe) == 0)
        for end in stdinPipe { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdinPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fd, 3)
        var child: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/cat"), nil]
        defer { for argument in argv { free(argument) } }
        try #require(posix_spawn(&child, "/bin/cat", &actions, nil, argv, environ) == 0)
        defer {
            var status: Int32 = 0
            waitpid(child, &status, 0)
        }
        close(stdinPipe[0])
        close(fd)

        // The child lets go 50 ms after the open starts; the open waits for it.
        let writeEnd = stdinPipe[1]
        let started = Date()
        // A thread of its own: under a parallel test run, Dispatch's shared pool can be busy for
        // longer than the open's one second of waiting.
        Thread.detachNewThread {
            usleep(50_000)
            close(writeEnd)
        }
        let log = try CommitLog(databasePath: path, database: 7)
        #expect(Date().timeIntervalSince(started) >= 0.04)
        _ = log
    }

    @Test("one process at a time: a second log on the same database is refused with .busy")
    func locked() throws {
        defer { directory.remove() }
        let first = try CommitLog(databasePath: path, database: 7)
        var error: LedgerError?
        do { _ = try CommitLog(databasePath: path, database: 7) } catch let caught { error = caught }
        #expect(error?.code == .busy)
        #expect(error?.message.contains("another process") == true)
        _ = first
    }
}

/// The commit log where the disk fails it, through failures injected into its real system calls
/// (`SyscallFailures`, debug builds).
@Suite struct CommitLogDiskFailureTests {
    let directory = TemporaryDirectory("sklogfail")
    var path: String { directory.file("storekitd.sqlite") }

    @Test("a disk full while appending fails that append only: its record is never recovered, the next one is")
    func diskFullDuringAppend() throws {
        defer { directory.remove() }
        do {
            let log = try CommitLog(databasePath: path, database: 7)
            try log.start(nextLSN: 1)
            try log.append([1, 1, 1])
            let segment = log.descriptor(ofSegment: log.activeSegment).rawValue
            defer { SyscallFailures.clear(segment) }
            SyscallFailures.inject(.noSpace, into: .write, on: segment)
            #expect(throws: LedgerError.self) { try log.append([2, 2, 2]) }
            #expect(log.nextLSN == 2, "the failed append took no LSN")
            try log.append([3, 3, 3])
        }
        let recovery = try CommitLog(databasePath: path, database: 7).recover(after: 0)
        #expect(recovery.records.map(\.payload) == [[1, 1, 1], [3, 3, 3]])
        #expect(recovery.records.map(\.lsn) == [1, 2])
    }

    @Test("an I/O error on the sync thread's fdatasync stops it: reported, and no later LSN is declared synced")
    func failedSyncIsFinal() throws {
        defer { directory.remove() }
        let log = try CommitLog(databasePath: path, database: 7)
        try log.start(nextLSN: 1)
        let syncer = CommitLogSyncer(onSynced: {})
        syncer.start(syncedThrough: 0)
        defer { syncer.stop() }
        log.syncer = syncer
        log.deferSync = true
        let segment = log.descriptor(ofSegment: log.activeSegment).rawValue
        defer { SyscallFailures.clear(segment) }
        try log.append([1])
        log.waitForSync()
        #expect(syncer.syncedLSN == 1 && syncer.failure == nil)
        SyscallFailures.inject(Errno(rawValue: EIO), into: .fdatasync, on: segment)
        try log.append([2])
        log.waitForSync()   // returns once the failure is known
        #expect(syncer.failure?.contains("fdatasync of the commit log failed") == true, "\(syncer.failure ?? "none")")
        // The sync thread takes no work after a failure: the next append's request is never synced.
        try log.append([3])
        log.waitForSync()
        #expect(syncer.syncedLSN == 1, "nothing after the failure is declared synced")
    }
}
