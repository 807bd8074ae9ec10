import CSQLite
import StoreKitLedger
import StoreKitPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The durable record of every unit of work that SQLite has not made durable yet.
///
/// A unit of work (one batch of requests) is told to no client before its changes are on disk.
/// Committing it to SQLite with `synchronous=FULL` would append every page it touched to the WAL
/// (a payment touches one page of the table and of each index) and fsync all of them. Instead the
/// store appends the batch's data-changing statements (each statement's SQL once per record, then
/// the parameters of every run of it: some 100 bytes per request) to this log and `fdatasync`s
/// it: one small write per batch.
/// SQLite commits the same changes lazily (`synchronous=NORMAL`, no fsync), many batches at a time,
/// and the `Checkpointer` makes them durable in the database file; only then may the log forget them.
///
/// Layout: two segment files, `<database>-log.0` and `<database>-log.1`. Each starts with a
/// 40-byte header (magic, the database's identity, a salt, the first record's number, checksum),
/// then records: payload length (u32), magic (u32), LSN (u64), checksum (u64), payload padded to
/// 8 bytes. Records carry consecutive log sequence numbers (LSNs); the checksum covers the salt,
/// so a record left over from an earlier use of the segment never validates. Writing goes to one
/// segment until it is past `switchSize` and the other one holds nothing that is not durable yet;
/// then the other one is started over with a new salt. Segments are preallocated (zero-filled) and
/// reused, so an append overwrites blocks the file already has and its sync allocates nothing
/// (the inode is still written when the modification time moved: once per clock tick at most).
///
/// Recovery reads both segments, keeps the valid records in LSN order and returns those after the
/// database's own LSN, which the store applies before it serves. Not thread-safe except for
/// `durable`, which the checkpoint thread advances.
///
/// The log owns both segments' descriptors; they close when it is released. A `syncer` is lent
/// their numbers (`FileDescriptor.Lent`) with each request: the daemon stops it, after
/// `waitForSync`, before it releases the store and with it the log.
public final class CommitLog {
    /// The highest LSN whose changes are durable in the database file (set by the checkpointer).
    public final class DurableMark: Sendable {
        private let value = Atomic<UInt64>(0)
        private let committed = Mutex<(lsn: UInt64, frames: Int)>((0, 0))
        public init() {}

        private let committedListener = Mutex<(@Sendable () -> Void)?>(nil)

        /// The last SQLite commit: the LSN it holds and the WAL's frame count after it.
        public func noteCommitted(lsn: UInt64, frames: Int) {
            committed.withLock { $0 = (lsn, frames) }
            committedListener.withLock { $0 }?()
        }

        /// Calls `listener` after every `noteCommitted` (the checkpoint thread's wake-up).
        public func onCommit(_ listener: @escaping @Sendable () -> Void) {
            committedListener.withLock { $0 = listener }
        }

        public var lastCommitted: (lsn: UInt64, frames: Int) { committed.withLock { $0 } }

        /// After a checkpoint that copied the first `checkpointed` of the WAL's `frames` into the
        /// database file and fsynced it, given the commit noted before it started: everything up
        /// to that commit is durable if the checkpoint copied that commit's frames, or the whole
        /// WAL (which SQLite may have restarted since that commit, after copying it).
        public func checkpointed(_ checkpointed: Int, of frames: Int, since commit: (lsn: UInt64, frames: Int)) {
            if checkpointed >= commit.frames || checkpointed == frames { advance(to: commit.lsn) }
        }
        public func advance(to lsn: UInt64) {
            var current = value.load(ordering: .acquiring)
            while lsn > current {
                let (exchanged, original) = value.compareExchange(expected: current, desired: lsn, ordering: .acquiringAndReleasing)
                if exchanged { return }
                current = original
            }
        }
        public var lsn: UInt64 { value.load(ordering: .acquiring) }
    }

    public struct Record: Equatable, Sendable {
        public let lsn: UInt64
        public let payload: [UInt8]
    }

    /// What recovery found besides the records to apply, for the journal.
    public struct Recovery: Sendable {
        public var records: [Record] = []
        /// Records that cannot be applied (a gap before them).
        public var problems: [String] = []
        /// Segments written for another database (the database was restored from a backup or
        /// replaced): expected after a restore, so not a problem, but their records are kept.
        public var foreignSegments: [String] = []
    }

    /// One segment file: its descriptor and where appends go in it.
    struct Segment: ~Copyable {
        let path: String
        let file: FileDescriptor
        var salt: UInt64 = 0
        var firstLSN: UInt64 = 0
        /// LSN of the last record written since this segment was started; 0: none.
        var lastLSN: UInt64 = 0
        /// Where the next record goes.
        var end = CommitLog.headerSize
        /// Bytes the file has (zero-filled beyond `end`).
        var allocated = 0
    }

    static let headerSize = 40
    static let recordHeaderSize = 24
    static let headerMagic: UInt64 = 0x3230_474F_4C4B_5320   // " SKLOG02"
    static let recordMagic: UInt32 = 0x5244_4B53            // "SKDR"
    /// A segment is switched for the other once it holds this much.
    public static let defaultSwitchSize = 256 * 1024
    /// Largest payload accepted (a `storekitctl clear` of a big store can be large).
    static let maximumPayload = 1 << 30

    public let databasePath: String
    public let database: UInt64
    public let durable = DurableMark()
    let switchSize: Int
    private var segments: InlineArray<2, Segment>
    private(set) var active = 0
    /// The LSN the next append must carry.
    public private(set) var nextLSN: UInt64 = 1
    /// When set, `append` leaves the fdatasync to this thread (see CommitLogSyncer.swift) while
    /// `deferSync` is true. The loop clears `deferSync` when nothing else waits for it: then
    /// syncing at once is quicker than handing it over.
    public var syncer: CommitLogSyncer?
    public var deferSync = true
    private var syncedHere: UInt64 = 0

    /// The highest LSN on disk.
    public var syncedLSN: UInt64 { max(syncer?.syncedLSN ?? 0, syncedHere) }

    /// Blocks until everything appended is on disk, or the syncer failed: for shutdown.
    public func waitForSync() {
        while syncedLSN < nextLSN - 1 && syncer?.failure == nil { usleep(200) }
    }
    private var buffer: [UInt8] = []

    static func segmentPath(_ databasePath: String, _ index: Int) -> String { databasePath + "-log.\(index)" }

    /// Opens (creating when absent) both segments and locks them: one daemon per database.
    public init(databasePath: String, database: UInt64, switchSize: Int = CommitLog.defaultSwitchSize) throws(LedgerError) {
        self.databasePath = databasePath
        self.database = database
        self.switchSize = max(switchSize, 4096)
        var created = false
        func openSegment(_ index: Int) throws(LedgerError) -> Segment {
            let path = Self.segmentPath(databasePath, index)
            let existed = FileSystem.exists(path)
            let file: FileDescriptor
            do throws(Errno) {
                file = try FileDescriptor.open(path, .readWrite, options: [.create, .closeOnExec, .noFollow], permissions: 0o600)
            } catch {
                throw Self.error(path, "cannot open the commit log", error)
            }
            created = created || !existed
            let size = (try? file.status())?.st_size ?? 0
            return Segment(path: path, file: file, allocated: Int(size))
        }
        // Both opened before the lock is tried: a refusal closes them as it leaves this scope.
        let first = try openSegment(0)
        let second = try openSegment(1)
        if let refusal = Self.lock(first.file) {
            let reason = refusal == .wouldBlock ? "another process (storekitd?) has this database open" : refusal.description
            throw LedgerError(.busy, path: first.path, message: "cannot lock the commit log: \(reason)")
        }
        segments = [first, second]
        if created { try SQLiteLedger.syncDirectory(of: segments[0].path) }
    }

    /// How long a lock held by another open file description is waited for (ms).
    static let lockWait: Int64 = 1000

    /// Takes the exclusive lock, waiting up to `lockWait` ms for it. The lock belongs to the open
    /// file description, which a child forked by any thread of the process holding it shares until
    /// its exec closes it: a database closed and opened again at once can find it held for a moment.
    /// Nil once locked; else why not (`.wouldBlock`: still held by another at the deadline).
    private static func lock(_ file: borrowing FileDescriptor) -> Errno? {
        let deadline = Monotonic.milliseconds() + lockWait
        while true {
            do throws(Errno) {
                if try file.tryLockExclusive() { return nil }
            } catch {
                return error
            }
            guard Monotonic.milliseconds() < deadline else { return .wouldBlock }
            usleep(2_000)
        }
    }

    // MARK: Recovery

    /// The records after `appliedLSN` (the database's own), in order. Reads both segments whole.
    public func recover(after appliedLSN: UInt64) -> Recovery {
        var recovery = Recovery()
        var byLSN: [UInt64: [UInt8]] = [:]
        for index in segments.indices {
            guard let header = Self.parseHeader(Self.read(segments[index].file, from: 0, count: Self.headerSize)) else { continue }
            guard header.database == database else {
                if header.firstLSN != 0 { recovery.foreignSegments.append(segments[index].path) }
                continue
            }
            for record in Self.readRecords(segments[index].file, salt: header.salt, firstLSN: header.firstLSN) where record.lsn > appliedLSN {
                byLSN[record.lsn] = record.payload
            }
        }
        var lsn = appliedLSN + 1
        while let payload = byLSN.removeValue(forKey: lsn) {
            recovery.records.append(Record(lsn: lsn, payload: payload))
            lsn += 1
        }
        if let lowest = byLSN.keys.min() {
            recovery.problems.append("records \(lowest)…\(byLSN.keys.max() ?? lowest) follow a gap after \(lsn - 1) "
                                     + "and were not applied (\(byLSN.count) records)")
        }
        return recovery
    }

    /// Copies both segment files to `<segment>.kept-<UTC time>` (`storekitd.sqlite-log.0.kept-
    /// 20261204T225512Z`), for records recovery could not apply, before `start` writes over them.
    /// Nothing reads them again: operations.md says when they may go. Best effort: returns the
    /// paths written (a segment that cannot be read whole, or whose copy of this second exists,
    /// is not copied).
    public func keepCopies() -> [String] {
        var now = time_t(WallClock.seconds())
        var parts = tm()
        gmtime_r(&now, &parts)
        var text = [CChar](repeating: 0, count: 32)
        let length = strftime(&text, text.count, "%Y%m%dT%H%M%SZ", &parts)
        let suffix = String(decoding: text[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var kept: [String] = []
        for index in segments.indices {
            guard let size = (try? segments[index].file.status())?.st_size,
                  let bytes = try? segments[index].file.read(atAbsoluteOffset: 0, count: Int(size)) else { continue }
            let path = segments[index].path + ".kept-" + suffix
            guard let copy = try? FileDescriptor.open(path, .writeOnly, options: [.create, .exclusive, .closeOnExec, .noFollow],
                                                      permissions: 0o600) else { continue }
            if (try? copy.write(bytes, toAbsoluteOffset: 0)) != nil, (try? copy.synchronize()) != nil { kept.append(path) }
            try? copy.close()
        }
        return kept
    }

    /// Starts both segments over (new salts): everything before `nextLSN` must already be durable
    /// in the database. Then appends continue at `nextLSN`.
    public func start(nextLSN: UInt64) throws(LedgerError) {
        for index in segments.indices {
            // A segment that grew while checkpoints lagged goes back to its usual size.
            if segments[index].allocated > 2 * switchSize, (try? segments[index].file.resize(to: switchSize)) != nil {
                segments[index].allocated = switchSize
            }
            try preallocate(index, to: switchSize + Self.headerSize)
            try writeHeader(index, firstLSN: index == 0 ? nextLSN : 0)
            try sync(index)
        }
        active = 0
        self.nextLSN = nextLSN
        syncedHere = nextLSN - 1
        durable.advance(to: nextLSN - 1)
    }

    // MARK: Appending

    /// Writes one record and makes it durable (fdatasync) before returning, or, with a `syncer`,
    /// once `syncedLSN` reaches it.
    public func append(_ payload: UnsafeRawBufferPointer) throws(LedgerError) {
        guard payload.count <= Self.maximumPayload else {
            throw LedgerError(.other(SQLITE_TOOBIG), path: segments[active].path,
                             message: "a unit of work of \(payload.count) bytes is too large for the commit log")
        }
        let lsn = nextLSN
        let other = 1 - active
        if segments[active].end >= switchSize && segments[other].lastLSN <= durable.lsn {
            // Everything in the other segment is durable in the database: start it over, header
            // and first record in one write.
            segments[other].salt = Self.randomSalt()
            segments[other].firstLSN = lsn
            segments[other].lastLSN = 0
            encodeHeader(other)
            encodeRecord(lsn: lsn, payload: payload, salt: segments[other].salt)
            try write(other, at: 0, durably: !defersSync)
            makeDurable(other, through: lsn)
            segments[other].end = buffer.count
            active = other
        } else {
            buffer.removeAll(keepingCapacity: true)
            encodeRecord(lsn: lsn, payload: payload, salt: segments[active].salt)
            do {
                try write(active, at: segments[active].end, durably: !defersSync)
            } catch {
                // The bytes may have reached the disk although the write (or its sync) failed:
                // spoil the record's magic so that no recovery takes an unacknowledged record.
                let spoiled: UInt32 = 0
                withUnsafeBytes(of: spoiled) { raw in
                    _ = try? segments[active].file.write(raw, toAbsoluteOffset: segments[active].end + 4)
                }
                throw error
            }
            makeDurable(active, through: lsn)
            segments[active].end += buffer.count
        }
        segments[active].lastLSN = lsn
        nextLSN = lsn + 1
    }

    public func append(_ payload: [UInt8]) throws(LedgerError) {
        let result = payload.withUnsafeBytes { raw in Result { () throws(LedgerError) in try append(raw) } }
        try result.get()
    }

    /// The segment appends go to, and where its next record starts (for tests).
    public var activeSegment: Int { active }
    public func end(ofSegment index: Int) -> Int { segments[index].end }

    /// A segment's descriptor, lent to a test that makes its system calls fail
    /// (`SyscallFailures`); valid while the log is open.
    public func descriptor(ofSegment index: Int) -> FileDescriptor.Lent { segments[index].file.lent }

    // MARK: Encoding

    private func encodeHeader(_ index: Int) {
        buffer.removeAll(keepingCapacity: true)
        Self.put(&buffer, Self.headerMagic)
        Self.put(&buffer, database)
        Self.put(&buffer, segments[index].salt)
        Self.put(&buffer, segments[index].firstLSN)
        Self.put(&buffer, buffer.withUnsafeBytes { Self.checksum(seed: 0, UnsafeRawBufferPointer(rebasing: $0[0..<32])) })
    }

    private func encodeRecord(lsn: UInt64, payload: UnsafeRawBufferPointer, salt: UInt64) {
        let start = buffer.count
        Self.put32(&buffer, UInt32(payload.count))
        Self.put32(&buffer, Self.recordMagic)
        Self.put(&buffer, lsn)
        Self.put(&buffer, 0)
        buffer.append(contentsOf: payload)
        let padding = (8 - payload.count % 8) % 8
        buffer.append(contentsOf: repeatElement(0, count: padding))
        let sum = buffer.withUnsafeBytes { raw in
            Self.recordChecksum(salt: salt, header: UnsafeRawBufferPointer(rebasing: raw[start..<start + 16]),
                                payload: UnsafeRawBufferPointer(rebasing: raw[start + 24..<raw.count]))
        }
        withUnsafeBytes(of: sum.littleEndian) { buffer.replaceSubrange(start + 16..<start + 24, with: $0) }
    }

    static func recordChecksum(salt: UInt64, header: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer) -> UInt64 {
        checksum(seed: checksum(seed: salt, header), payload)
    }

    /// A fast 64-bit checksum over 8-byte little-endian words (the count must be a multiple of 8).
    /// It detects torn and stale records; it is not meant to resist a forger.
    static func checksum(seed: UInt64, _ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var state = seed ^ 0x9E37_79B9_7F4A_7C15
        var offset = 0
        while offset + 8 <= bytes.count {
            let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            state = (state ^ word) &* 0xBF58_476D_1CE4_E5B9
            state ^= state >> 31
            offset += 8
        }
        return state ^ UInt64(bytes.count)
    }

    static func put(_ buffer: inout [UInt8], _ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { buffer.append(contentsOf: $0) }
    }

    static func put32(_ buffer: inout [UInt8], _ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { buffer.append(contentsOf: $0) }
    }

    // MARK: Decoding

    struct Header {
        let database: UInt64
        let salt: UInt64
        let firstLSN: UInt64
    }

    static func parseHeader(_ bytes: [UInt8]) -> Header? {
        guard bytes.count >= headerSize else { return nil }
        return bytes.withUnsafeBytes { raw -> Header? in
            func word(_ offset: Int) -> UInt64 { UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
            guard word(0) == headerMagic, word(32) == checksum(seed: 0, UnsafeRawBufferPointer(rebasing: raw[0..<32])) else {
                return nil
            }
            return Header(database: word(8), salt: word(16), firstLSN: word(24))
        }
    }

    /// The valid records from the start of the segment: each must check out and carry the next
    /// LSN. Reads only as far as the records go, not the zero-filled rest of the file.
    static func readRecords(_ file: borrowing FileDescriptor, salt: UInt64, firstLSN: UInt64) -> [Record] {
        guard firstLSN != 0 else { return [] }
        var records: [Record] = []
        var offset = headerSize
        var expected = firstLSN
        while true {
            let header = read(file, from: offset, count: recordHeaderSize)
            guard header.count == recordHeaderSize else { break }
            let (length, magic, lsn, stored) = header.withUnsafeBytes { raw in
                (Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt32.self))),
                 UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 4, as: UInt32.self)),
                 UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)),
                 UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self)))
            }
            guard magic == recordMagic, lsn == expected, length <= maximumPayload else { break }
            let padded = length + (8 - length % 8) % 8
            let body = read(file, from: offset + recordHeaderSize, count: padded)
            guard body.count == padded else { break }
            let valid = header.withUnsafeBytes { head in
                body.withUnsafeBytes { payload in
                    recordChecksum(salt: salt, header: UnsafeRawBufferPointer(rebasing: head[0..<16]), payload: payload) == stored
                }
            }
            guard valid else { break }
            records.append(Record(lsn: lsn, payload: Array(body[0..<length])))
            offset += recordHeaderSize + padded
            expected += 1
        }
        return records
    }

    // MARK: Files

    private func writeHeader(_ index: Int, firstLSN: UInt64) throws(LedgerError) {
        segments[index].salt = Self.randomSalt()
        segments[index].firstLSN = firstLSN
        segments[index].lastLSN = 0
        segments[index].end = Self.headerSize
        encodeHeader(index)
        try write(index, at: 0)
    }

    /// Writes `buffer` at `offset`, growing the zero-filled file first when it would not fit.
    /// `durably`: the write returns once its bytes are on disk (`RWF_DSYNC`: the kernel syncs
    /// just this range, one system call instead of a write and an fdatasync).
    private func write(_ index: Int, at offset: Int, durably: Bool = false) throws(LedgerError) {
        if offset + buffer.count > segments[index].allocated {
            try preallocate(index, to: max(offset + buffer.count, segments[index].allocated + switchSize),
                            writeBackFrom: offset + buffer.count)
        }
        var flags: FileDescriptor.WriteFlags = durably && perWriteSync ? .dataSync : []
        while let failure = buffer.withUnsafeBytes({ raw -> Errno? in
            do throws(Errno) {
                try segments[index].file.write(raw, toAbsoluteOffset: offset, flags: flags)
                return nil
            } catch {
                return error
            }
        }) {
            guard !flags.isEmpty, failure == .notSupported || failure == .invalidArgument || failure == .notImplemented else {
                throw Self.error(segments[index].path, "cannot write the commit log", failure)
            }
            // A kernel or file system without RWF_DSYNC: write (the same bytes again), then fdatasync.
            perWriteSync = false
            flags = []
        }
        if durably && flags.isEmpty { try sync(index) }
    }

    /// False once the kernel refused `RWF_DSYNC`.
    private var perWriteSync = true

    /// Zero-fills the file up to `size` and starts writing the zeros back, so that later appends
    /// overwrite blocks the file system has allocated. (Zeros left in the page cache would be
    /// allocated by the first durable append into each page instead: an extra metadata write on
    /// the acknowledgement path, 1–3 ms on the benchmark machine, for every page of a grown
    /// segment.) The writeback is not waited for: the next durable append syncs what it allocated,
    /// once, and `start()` syncs the files it prepares. It starts at the page after
    /// `writeBackFrom`, where the record about to be written ends: that record's own write
    /// allocates the pages it covers, without first waiting for zeros written there.
    private func preallocate(_ index: Int, to size: Int, writeBackFrom: Int = 0) throws(LedgerError) {
        let from = segments[index].allocated
        guard from < size else { return }
        let zeros = [UInt8](repeating: 0, count: 64 * 1024)
        var offset = from
        while offset < size {
            let count = min(zeros.count, size - offset)
            let failure = zeros.withUnsafeBytes { raw -> Errno? in
                do throws(Errno) {
                    try segments[index].file.write(UnsafeRawBufferPointer(rebasing: raw[0..<count]), toAbsoluteOffset: offset)
                    return nil
                } catch {
                    return error
                }
            }
            if let failure { throw Self.error(segments[index].path, "cannot grow the commit log", failure) }
            offset += count
        }
        let writeBack = max(from, (writeBackFrom + 4095) / 4096 * 4096)
        if writeBack < size { _ = try? segments[index].file.startWriteback(from: writeBack, count: size - writeBack) }
        segments[index].allocated = size
    }

    private var defersSync: Bool { syncer != nil && deferSync }

    /// After record `lsn` was written to segment `index`: notes it durable (it was written with
    /// `RWF_DSYNC` or synced), or asks the syncer to sync it.
    private func makeDurable(_ index: Int, through lsn: UInt64) {
        if let syncer, deferSync {
            syncer.request(lsn, file: segments[index].file.lent)
        } else {
            syncedHere = lsn
        }
    }

    private func sync(_ index: Int) throws(LedgerError) {
        do throws(Errno) {
            try segments[index].file.synchronizeData()
        } catch {
            throw Self.error(segments[index].path, "cannot fsync the commit log", error)
        }
    }

    /// Up to `count` bytes from `offset`; fewer at the end of the file, none when it cannot be read.
    static func read(_ file: borrowing FileDescriptor, from offset: Int, count: Int) -> [UInt8] {
        (try? file.read(atAbsoluteOffset: offset, count: count)) ?? []
    }

    static func randomSalt() -> UInt64 {
        var salt: UInt64 = 0
        while salt == 0 { salt = UInt64.random(in: 1...UInt64.max) }
        return salt
    }

    static func error(_ path: String, _ what: String, _ errno: Errno) -> LedgerError {
        let code: LedgerError.Code = errno == .noSpace || errno == .diskQuotaExceeded ? .full : .io
        return LedgerError(code, path: path, message: "\(what): \(errno)")
    }
}
