import CSQLite
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A SQLite VFS that writes the database file and its WAL to the disk in small, flushed steps.
///
/// A client is answered once the commit log's `fdatasync` returns. On the same disk, that
/// `fdatasync` ends with a cache flush, which waits for every write the device has taken before
/// it. SQLite's own writes are large and unsynced: a save's `COMMIT` appends its pages to the WAL
/// without syncing it, and a checkpoint then syncs the whole WAL, copies megabytes of pages into
/// the database file and syncs that. Each sync hands the device megabytes at once, and every
/// commit-log `fdatasync` that arrives meanwhile waits for them (on this project's reference
/// machine a 4 MiB sync took 3.4 ms, against 0.14 ms for a commit-log record).
///
/// This VFS is the default `unix` VFS with one change: once `step` bytes were written to a
/// database or WAL file since it was last synced, the write syncs it (`fdatasync`). No sync then
/// hands the device more than `step` bytes, and a commit-log `fdatasync` waits for at most that.
/// The extra syncs cost the writing thread (the saver or the checkpointer, not the serving
/// loop) about a tenth of a millisecond each; they change nothing SQLite relies on, since a
/// sync only makes earlier writes durable sooner.
///
/// Measured on the reference machine (a writer of 8 MiB beside a 4 KiB `fdatasync` every 2 ms):
/// the small `fdatasync`'s p99 was 7.7 ms with one sync of the whole 8 MiB, 3.2 ms with the
/// writeback started in 256 KiB steps but one final sync, 0.4 ms with a sync every 128 KiB and
/// 0.3 ms every 64 KiB. In the daemon under the noisy-neighbour flood, 32 KiB steps gave the
/// victim a p99 of 1.10–1.44 ms against 1.35–1.72 ms with 128 KiB (docs/performance.md).
enum PacedWrites {
    /// The name the store's connections open with (`sqlite3_open_v2`'s last argument).
    static let name = "storekitd-paced"
    /// The most a database or WAL file is written before it is synced.
    static let step = 32 * 1024

    /// The syncs this VFS added to SQLite's own since the process started, by file path.
    static let stepSyncs = Mutex<[String: Int]>([:])

    /// Registers the VFS once (not as the default); false if SQLite has no default VFS to wrap.
    static let isRegistered: Bool = register()

    // What the VFS wraps, set once by `register()` before any connection opens with it.
    private nonisolated(unsafe) static var wrapped: UnsafeMutablePointer<sqlite3_vfs>?

    /// A file of this VFS: its methods pointer (as every `sqlite3_file` starts), then the bytes
    /// written since its last sync, whether it is paced, its path (SQLite keeps the name valid
    /// until the file is closed) and the wrapped VFS's file.
    private static let unsyncedOffset = MemoryLayout<UnsafeRawPointer>.stride
    private static let pacedOffset = unsyncedOffset + MemoryLayout<Int>.stride
    private static let nameOffset = pacedOffset + MemoryLayout<Int>.stride
    private static let wrappedFileOffset = nameOffset + MemoryLayout<UnsafeRawPointer>.stride

    private static func register() -> Bool {
        guard let base = sqlite3_vfs_find(nil) else { return false }
        wrapped = base
        let vfs = UnsafeMutablePointer<sqlite3_vfs>.allocate(capacity: 1)
        vfs.initialize(to: base.pointee)
        vfs.pointee.pNext = nil
        vfs.pointee.szOsFile = Int32(wrappedFileOffset) + base.pointee.szOsFile
        vfs.pointee.zName = UnsafePointer(strdup(name))
        vfs.pointee.xOpen = { _, name, file, flags, outFlags in
            guard let file, let base = PacedWrites.wrapped else { return SQLITE_CANTOPEN }
            let raw = UnsafeMutableRawPointer(file)
            raw.storeBytes(of: nil, as: UnsafeRawPointer?.self)
            raw.storeBytes(of: 0, toByteOffset: PacedWrites.unsyncedOffset, as: Int.self)
            let paced = flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL) != 0
            raw.storeBytes(of: paced ? 1 : 0, toByteOffset: PacedWrites.pacedOffset, as: Int.self)
            raw.storeBytes(of: UnsafeRawPointer(name), toByteOffset: PacedWrites.nameOffset, as: UnsafeRawPointer?.self)
            let inner = PacedWrites.inner(file)
            let status = base.pointee.xOpen(base, name, inner, flags, outFlags)
            // SQLite calls xClose only on a file whose methods are set: set them only when the
            // wrapped file has its own.
            if let methods = inner.pointee.pMethods {
                raw.storeBytes(of: UnsafeRawPointer(PacedWrites.methods(version: methods.pointee.iVersion)), as: UnsafeRawPointer?.self)
            }
            return status
        }
        return sqlite3_vfs_register(vfs, 0) == SQLITE_OK
    }

    private static func inner(_ file: UnsafeMutablePointer<sqlite3_file>) -> UnsafeMutablePointer<sqlite3_file> {
        (UnsafeMutableRawPointer(file) + wrappedFileOffset).assumingMemoryBound(to: sqlite3_file.self)
    }

    private static func methods(of file: UnsafeMutablePointer<sqlite3_file>?) -> (UnsafeMutablePointer<sqlite3_file>, sqlite3_io_methods) {
        let inner = inner(file!)
        return (inner, inner.pointee.pMethods!.pointee)
    }

    /// The methods for a wrapped file whose methods have `version` (1 to 3): the same version,
    /// so SQLite calls nothing the wrapped file lacks.
    private static func methods(version: Int32) -> UnsafePointer<sqlite3_io_methods> {
        switch version {
        case ...1: methodsVersion1
        case 2: methodsVersion2
        default: methodsVersion3
        }
    }

    private nonisolated(unsafe) static let methodsVersion1 = makeMethods(version: 1)
    private nonisolated(unsafe) static let methodsVersion2 = makeMethods(version: 2)
    private nonisolated(unsafe) static let methodsVersion3 = makeMethods(version: 3)

    /// Every method forwards to the wrapped file's; `xWrite` and `xSync` also count what is
    /// unsynced.
    private static func makeMethods(version: Int32) -> UnsafePointer<sqlite3_io_methods> {
        var m = sqlite3_io_methods()
        m.iVersion = version
        m.xClose = { file in
            let (inner, methods) = PacedWrites.methods(of: file)
            return methods.xClose!(inner)
        }
        m.xRead = { file, buffer, amount, offset in
            let (inner, methods) = PacedWrites.methods(of: file)
            return methods.xRead!(inner, buffer, amount, offset)
        }
        m.xWrite = { file, buffer, amount, offset in
            let (inner, methods) = PacedWrites.methods(of: file)
            let status = methods.xWrite!(inner, buffer, amount, offset)
            let raw = UnsafeMutableRawPointer(file!)
            guard status == SQLITE_OK, raw.load(fromByteOffset: PacedWrites.pacedOffset, as: Int.self) != 0 else { return status }
            let unsynced = raw.load(fromByteOffset: PacedWrites.unsyncedOffset, as: Int.self) + Int(amount)
            guard unsynced >= PacedWrites.step else {
                raw.storeBytes(of: unsynced, toByteOffset: PacedWrites.unsyncedOffset, as: Int.self)
                return status
            }
            raw.storeBytes(of: 0, toByteOffset: PacedWrites.unsyncedOffset, as: Int.self)
            if let name = raw.load(fromByteOffset: PacedWrites.nameOffset, as: UnsafePointer<CChar>?.self) {
                let path = String(cString: name)
                PacedWrites.stepSyncs.withLock { $0[path, default: 0] += 1 }
            }
            return methods.xSync!(inner, SQLITE_SYNC_NORMAL | SQLITE_SYNC_DATAONLY)
        }
        m.xTruncate = { file, size in
            let (inner, methods) = PacedWrites.methods(of: file)
            return methods.xTruncate!(inner, size)
        }
        m.xSync = { file, flags in
            let (inner, methods) = PacedWrites.methods(of: file)
            UnsafeMutableRawPointer(file!).storeBytes(of: 0, toByteOffset: PacedWrites.unsyncedOffset, as: Int.self)
            return methods.xSync!(inner, flags)
        }
        m.xFileSize = { file, size in
            let (inner, methods) = PacedWrites.methods(of: file)
            return methods.xFileSize!(inner, size)
        }
        m.xLock = { file, lock in
            let (inner, methods) = PacedWrites.methods(of: file)
            return methods.xLock!(inner, lock)
        }
        m.xUnlock = { file, lock in
            let (inner, methods) = PacedWrites.methods(of: file)
            return methods.xUnlock!(inner, lock)
        }
        m.xCheckReservedLock = { file, result in
            let (inner, methods) = PacedWrites.methods(of: file)
            return methods.xCheckReservedLock!(inner, result)
        }
        m.xFileControl = { file, operation, argument in
            let (inner, methods) = PacedWrites.methods(of: file)
            return methods.xFileControl!(inner, operation, argument)
        }
        m.xSectorSize = { file in
            let (inner, methods) = PacedWrites.methods(of: file)
            return methods.xSectorSize!(inner)
        }
        m.xDeviceCharacteristics = { file in
            let (inner, methods) = PacedWrites.methods(of: file)
            return methods.xDeviceCharacteristics!(inner)
        }
        if version >= 2 {
            m.xShmMap = { file, page, pageSize, extend, pointer in
                let (inner, methods) = PacedWrites.methods(of: file)
                return methods.xShmMap!(inner, page, pageSize, extend, pointer)
            }
            m.xShmLock = { file, offset, count, flags in
                let (inner, methods) = PacedWrites.methods(of: file)
                return methods.xShmLock!(inner, offset, count, flags)
            }
            m.xShmBarrier = { file in
                let (inner, methods) = PacedWrites.methods(of: file)
                methods.xShmBarrier!(inner)
            }
            m.xShmUnmap = { file, delete in
                let (inner, methods) = PacedWrites.methods(of: file)
                return methods.xShmUnmap!(inner, delete)
            }
        }
        if version >= 3 {
            m.xFetch = { file, offset, amount, pointer in
                let (inner, methods) = PacedWrites.methods(of: file)
                return methods.xFetch!(inner, offset, amount, pointer)
            }
            m.xUnfetch = { file, offset, pointer in
                let (inner, methods) = PacedWrites.methods(of: file)
                return methods.xUnfetch!(inner, offset, pointer)
            }
        }
        let pointer = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)
        pointer.initialize(to: m)
        return UnsafePointer(pointer)
    }
}
