import StoreKitPosix
#if canImport(Glibc)
import Glibc
#endif

/// What the store does when the file system holding the database fills up.
///
/// SQLite itself stays consistent on a full disk (a commit that cannot be written is rolled back
/// and reported as `SQLITE_FULL`), but on its own it would refuse everything, finishing included,
/// because every commit appends to the WAL. So the store keeps a small **reserve file**
/// (`storekitd.sqlite-reserve`, `reserveSize` bytes, allocated with `posix_fallocate`) beside the
/// database and watches the free space (`statvfs`) before every unit of work (every 50 ms while
/// it is ample):
///
/// - Free space below `lowWater`, or any `SQLITE_FULL`/`ENOSPC`: **low-space mode**. The reserve
///   is deleted (its space goes to SQLite), new transactions (payments, restores, renewals) are
///   refused with `LedgerError.Code.full`, and after every commit a passive checkpoint lets the
///   next commit reuse the WAL file from its start, so finishing, reading and observing go on
///   inside space the database already holds.
/// - At most once a second while low: when the free space (counting what truncating the WAL
///   would give back) reaches `highWater`, the WAL is truncated, the reserve is allocated again
///   and the mode ends by itself.
///
/// Single-threaded: used by the store from the daemon's serving loop only.
public final class DiskSpaceGuard {
    /// Bytes kept in the reserve file.
    public static let defaultReserveSize = 512 * 1024

    public let reservePath: String
    public let reserveSize: Int
    /// Below this many free bytes the store goes into low-space mode.
    public let lowWater: Int
    /// Low-space mode ends when this many bytes are free: the reserve plus room to spare.
    public var highWater: Int { reserveSize + 2 * lowWater }

    /// Why new transactions are refused now; nil when there is room.
    public private(set) var lowSpaceReason: String?
    public var isLow: Bool { lowSpaceReason != nil }
    /// Times the store went into low-space mode (for status and tests).
    public private(set) var lowSpaceEpisodes = 0

    /// Told about every change of mode (`low` true: entered), for the daemon's journal.
    public var onTransition: ((_ low: Bool, _ message: String) -> Void)?

    private let databasePath: String
    private let directory: String
    /// The directory, open for `fstatvfs`: measuring before every unit of work then costs no
    /// path lookup (which was most of a `statvfs`). Nil if it could not be opened.
    private let directoryFile: FileDescriptor?
    private var lastRecoveryAttempt: Int64 = 0
    private var checkpointWanted = false
    /// When the free space was last measured before a unit of work, and whether it was ample.
    private var lastMeasured: Int64 = 0
    private var lastMeasureAmple = false
    /// Free space this many times `lowWater` is ample: it is measured again at most every
    /// `ampleInterval` ms instead of before every unit of work (an `fstatvfs` each, 4.5% of the
    /// serving loop's time under a flood of small units). What fills the disk meanwhile fails a
    /// write with `SQLITE_FULL`, which enters low-space mode as well (`noteFull`).
    static let ampleFactor = 64
    static let ampleInterval: Int64 = 50

    init(databasePath: String, reserveSize: Int) {
        self.databasePath = databasePath
        reservePath = databasePath + "-reserve"
        self.reserveSize = max(0, reserveSize)
        lowWater = max(64 * 1024, self.reserveSize / 4)
        if let slash = databasePath.lastIndex(of: "/") {
            let parent = String(databasePath[..<slash])
            directory = parent.isEmpty ? "/" : parent
        } else {
            directory = "."
        }
        directoryFile = try? FileDescriptor.open(directory, .readOnly, options: [.pathOnly, .directory, .closeOnExec])
    }

    // MARK: Measuring

    /// Bytes an unprivileged writer may still allocate in the database's file system.
    public func freeBytes() -> Int? {
        let statistics: statvfs?
        switch directoryFile {
        case .some(let file): statistics = try? file.fileSystemStatistics()
        case .none: statistics = try? FileSystem.statistics(ofFileSystemAt: directory)
        }
        guard let statistics else { return nil }
        return Int(statistics.f_bavail) * Int(statistics.f_frsize)
    }

    static func fileSize(_ path: String) -> Int {
        (try? FileSystem.status(of: path)).map { Int($0.st_size) } ?? 0
    }

    // MARK: The reserve file

    private var hasReserve: Bool { FileSystem.exists(reservePath) }

    private func releaseReserve() {
        try? FileSystem.remove(reservePath)
    }

    /// Allocates the reserve; false (and no file left) when the space is not there.
    private func createReserve() -> Bool {
        guard reserveSize > 0 else { return true }
        if Self.fileSize(reservePath) >= reserveSize { return true }
        guard let reserve = try? FileDescriptor.open(reservePath, .writeOnly, options: [.create, .closeOnExec, .noFollow],
                                                     permissions: 0o600) else { return false }
        let synced = (try? reserve.allocate(count: reserveSize)) != nil && (try? reserve.synchronize()) != nil
        try? reserve.close()
        if !synced { try? FileSystem.remove(reservePath) }
        return synced
    }

    // MARK: Called by the store

    /// Before the database is opened: a file system that filled up while the daemon was down
    /// gets the reserve back, so that SQLite can create its -wal and -shm files.
    func prepareForOpen() {
        guard hasReserve, let free = freeBytes(), free < lowWater else { return }
        releaseReserve()
        enterLowSpace("only \(free) bytes were free at start")
    }

    /// After a successful open: takes the reserve (or starts in low-space mode without it).
    func opened() {
        guard !isLow else { return }
        guard let free = freeBytes() else { return }
        let missing = max(0, reserveSize - Self.fileSize(reservePath))
        if free - missing < lowWater || !createReserve() {
            releaseReserve()
            enterLowSpace("only \(free) bytes are free")
        }
    }

    /// SQLite reported `SQLITE_FULL` (or the OS `ENOSPC`).
    func noteFull() {
        if !isLow { enterLowSpace("a write failed: the file system is full") }
        checkpointWanted = true
    }

    /// Before `BEGIN`: notices low space before a commit fails, and its end.
    func beforeUnitOfWork(_ database: SQLiteDatabase) {
        if !isLow {
            let now = Monotonic.milliseconds()
            if !lastMeasureAmple || now - lastMeasured >= Self.ampleInterval, let free = freeBytes() {
                lastMeasured = now
                lastMeasureAmple = free >= lowWater * Self.ampleFactor
                if free < lowWater { enterLowSpace("only \(free) bytes are free") }
            }
        }
        guard isLow else { return }
        let now = Monotonic.milliseconds()
        if now - lastRecoveryAttempt >= 1000 {
            lastRecoveryAttempt = now
            if tryToLeaveLowSpace(database) { return }
        }
        if checkpointWanted {
            checkpointWanted = false
            checkpoint(database, mode: "PASSIVE")
        }
    }

    /// After a commit in low-space mode: copy the WAL into the database now, so that the next
    /// commit starts the WAL over in space it already has instead of growing it.
    func afterCommit(_ database: SQLiteDatabase) {
        if isLow { checkpoint(database, mode: "PASSIVE") }
    }

    /// Why a new transaction may not be stored now, nil when it may.
    var newTransactionRefusal: String? {
        guard let lowSpaceReason else { return nil }
        return "the file system holding \(databasePath) is almost full (\(lowSpaceReason)): new transactions are "
            + "refused until space is freed; finishing, reading and observing go on"
    }

    // MARK: Modes

    private func enterLowSpace(_ reason: String) {
        lowSpaceReason = reason
        lastMeasureAmple = false
        lowSpaceEpisodes += 1
        lastRecoveryAttempt = Monotonic.milliseconds()
        checkpointWanted = true
        releaseReserve()
        onTransition?(true, "Low on disk space for \(databasePath) (\(reason)): new transactions are refused, "
                      + "finishing and reading go on")
    }

    private func tryToLeaveLowSpace(_ database: SQLiteDatabase) -> Bool {
        guard let free = freeBytes() else { return false }
        let wal = Self.fileSize(databasePath + "-wal")
        guard free + wal >= highWater else { return false }
        // Give the WAL's space back (it was kept to be reused while space was short).
        if free < highWater { checkpoint(database, mode: "TRUNCATE") }
        guard let after = freeBytes(), after >= highWater, createReserve() else { return false }
        lowSpaceReason = nil
        checkpointWanted = false
        onTransition?(false, "Disk space for \(databasePath) is back (\(after) bytes free): new transactions are accepted again")
        return true
    }

    /// A checkpoint that never waits for readers (the background integrity check may be one);
    /// failures are ignored: it is an optimisation, the WAL stays valid either way.
    private func checkpoint(_ database: SQLiteDatabase, mode: String) {
        database.withBusyTimeout(0) {
            try? database.execute("PRAGMA wal_checkpoint(\(mode))")
        }
    }
}
