import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// An open file descriptor and its one owner, who closes it exactly once.
///
/// `~Copyable`: assigning or passing it moves it, so no two values can close the same number.
/// `close()` consumes the value (closing twice does not compile); an owner that goes away without
/// calling it closes the descriptor in `deinit`. Each method borrows it to wrap one system call,
/// the only place in the project that call is made on a file: EINTR is retried and -1 becomes a
/// thrown `Errno` (`retryingSyscall`); positioned reads and writes go on after a short count.
/// Where another thread needs the number while the owner keeps the descriptor (the commit log's
/// syncer), the owner hands out a `Lent` and says how long it stays open.
public struct FileDescriptor: ~Copyable {
    /// The descriptor's number, for a system call made elsewhere: valid while this value lives.
    public let rawValue: Int32

    /// Takes ownership of an open descriptor (from `UnixSocket.connect`, for instance).
    public init(adopting rawValue: Int32) {
        precondition(rawValue >= 0, "not a file descriptor: \(rawValue)")
        self.rawValue = rawValue
    }

    deinit { _ = Glibc.close(rawValue) }

    /// Closes the descriptor. EINTR counts as closed: Linux has released the number by then, and
    /// closing it again could close a file another thread has just opened.
    public consuming func close() throws(Errno) {
        let fd = rawValue
        discard self
        guard Glibc.close(fd) != 0 else { return }
        let error = Errno.current
        if error != .interrupted { throw error }
    }

    /// The number of a descriptor its owner keeps open, lent for a system call elsewhere (another
    /// thread). It closes nothing, and is valid only as long as the owner keeps the descriptor:
    /// whoever lends one documents until when.
    public struct Lent: Hashable, Sendable {
        public let rawValue: Int32

        /// `fdatasync(2)`: the file's data, and the metadata needed to read it back, on disk.
        public func synchronizeData() throws(Errno) { try FileDescriptor.synchronizeData(rawValue) }
    }

    /// This descriptor's number, lent (see `Lent`).
    public var lent: Lent { Lent(rawValue: rawValue) }
}

// MARK: Opening

extension FileDescriptor {
    /// What an open descriptor may do with the file (`O_RDONLY`, `O_WRONLY`, `O_RDWR`).
    public enum AccessMode: Int32, Sendable {
        case readOnly = 0
        case writeOnly = 1
        case readWrite = 2
    }

    /// `open(2)` flags besides the access mode.
    public struct OpenOptions: OptionSet, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        public static let create = OpenOptions(rawValue: O_CREAT)
        /// With `create`: fail with EEXIST rather than open an existing file.
        public static let exclusive = OpenOptions(rawValue: O_EXCL)
        /// Fail with ELOOP when the last component is a symbolic link.
        public static let noFollow = OpenOptions(rawValue: O_NOFOLLOW)
        /// Fail with ENOTDIR unless the path is a directory.
        public static let directory = OpenOptions(rawValue: O_DIRECTORY)
        public static let closeOnExec = OpenOptions(rawValue: O_CLOEXEC)
        /// `O_PATH`: a descriptor that only refers to the file (for `fstatvfs`, say); needs no
        /// read permission.
        public static let pathOnly = OpenOptions(rawValue: __O_PATH)
    }

    /// `open(2)`. `permissions` is the mode of a file `create` makes (the umask applies).
    public static func open(
        _ path: String, _ access: AccessMode, options: OpenOptions = [], permissions: mode_t = 0
    ) throws(Errno) -> FileDescriptor {
        let flags = access.rawValue | options.rawValue
        return FileDescriptor(adopting: try retryingSyscall { Glibc.open(path, flags, permissions) })
    }
}

// MARK: Reading and writing

extension FileDescriptor {
    /// `pwritev2(2)` flags.
    public struct WriteFlags: OptionSet, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// `RWF_DSYNC` (Linux 4.7): the write returns once its range is on disk, as if followed by
        /// an `fdatasync` of that range. A kernel or file system without it fails with
        /// EOPNOTSUPP, EINVAL or ENOSYS.
        public static let dataSync = WriteFlags(rawValue: 0x2)
    }

    /// Reads from `offset` until `buffer` is full or the file ends (`pread(2)`, again after a
    /// short count); returns the bytes read, fewer than `buffer.count` only at the end of the file.
    public func read(into buffer: UnsafeMutableRawBufferPointer, atAbsoluteOffset offset: Int) throws(Errno) -> Int {
        var done = 0
        while done < buffer.count {
            let count = try retryingSyscall(.read, on: rawValue) {
                pread(rawValue, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            }
            if count == 0 { break }
            done += count
        }
        return done
    }

    /// Up to `count` bytes from `offset`: fewer only at the end of the file.
    public func read(atAbsoluteOffset offset: Int, count: Int) throws(Errno) -> [UInt8] {
        var failure: Errno?
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            do throws(Errno) {
                initialized = try read(into: UnsafeMutableRawBufferPointer(buffer), atAbsoluteOffset: offset)
            } catch {
                failure = error
                initialized = 0
            }
        }
        if let failure { throw failure }
        return bytes
    }

    /// Writes all of `buffer` at `offset` (`pwrite(2)`, or `pwritev2(2)` when `flags` are given),
    /// again after a short count.
    public func write(_ buffer: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int, flags: WriteFlags = []) throws(Errno) {
        try Self.writeCompletely(buffer.count, on: rawValue) { done in
            let start = buffer.baseAddress! + done
            let position = off_t(offset + done)
            return flags.isEmpty
                ? pwrite(rawValue, start, buffer.count - done, position)
                : storekit_pwrite_flags(rawValue, start, buffer.count - done, position, flags.rawValue)
        }
    }

    /// The loop of `write`: `write(done)` writes from byte `done` on and returns the count written
    /// (or -1, errno set); it is called again after a short count or EINTR until `count` are done.
    @inline(__always)
    static func writeCompletely(_ count: Int, on fd: Int32, _ write: (_ done: Int) -> Int) throws(Errno) {
        var done = 0
        while done < count {
            let written = try retryingSyscall(.write, on: fd) { write(done) }
            done += written
        }
    }

    public func write(_ bytes: [UInt8], toAbsoluteOffset offset: Int, flags: WriteFlags = []) throws(Errno) {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(Errno) in try write(raw, toAbsoluteOffset: offset, flags: flags) }
        }
        try result.get()
    }
}

// MARK: Durability, size and locks

extension FileDescriptor {
    /// `fsync(2)`: the file's data and metadata on disk.
    public func synchronize() throws(Errno) {
        _ = try retryingSyscall(.fsync, on: rawValue) { fsync(rawValue) }
    }

    /// `fdatasync(2)`: the file's data, and the metadata needed to read it back, on disk.
    public func synchronizeData() throws(Errno) { try Self.synchronizeData(rawValue) }

    /// The one call of `fdatasync`, for an owned descriptor and a lent one.
    static func synchronizeData(_ fd: Int32) throws(Errno) {
        _ = try retryingSyscall(.fdatasync, on: fd) { fdatasync(fd) }
    }

    /// `fchmod(2)`: sets the mode whatever the umask was when the file was made.
    public func setPermissions(_ mode: mode_t) throws(Errno) {
        _ = try retryingSyscall(.fchmod, on: rawValue) { fchmod(rawValue, mode) }
    }

    /// `fstat(2)`.
    public func status() throws(Errno) -> stat {
        var info = stat()
        _ = try retryingSyscall(.fstat, on: rawValue) { fstat(rawValue, &info) }
        return info
    }

    /// `ftruncate(2)`: cuts the file to `size` bytes or extends it with zeros.
    public func resize(to size: Int) throws(Errno) {
        _ = try retryingSyscall(.ftruncate, on: rawValue) { ftruncate(rawValue, off_t(size)) }
    }

    /// `posix_fallocate(3)`: allocates `count` bytes from `offset`, so that writing them cannot
    /// fail for want of space. (It returns the error rather than setting errno.)
    public func allocate(from offset: Int = 0, count: Int) throws(Errno) {
        while true {
            #if STOREKIT_TEST_HOOKS
            if let injected = SyscallFailures.take(.fallocate, on: rawValue) {
                if injected == .interrupted { continue }
                throw injected
            }
            #endif
            let result = posix_fallocate(rawValue, off_t(offset), off_t(count))
            if result == 0 { return }
            if result != EINTR { throw Errno(rawValue: result) }
        }
    }

    /// `flock(LOCK_EX | LOCK_NB)`: takes the exclusive lock of the open file description; false
    /// while another open file description holds it.
    public func tryLockExclusive() throws(Errno) -> Bool {
        do {
            _ = try retryingSyscall(.flock, on: rawValue) { flock(rawValue, LOCK_EX | LOCK_NB) }
            return true
        } catch {
            if error == .wouldBlock { return false }
            throw error
        }
    }

    /// `sync_file_range(SYNC_FILE_RANGE_WRITE)`: starts writing a range back without waiting for
    /// it (the file system allocates the range's blocks as it does).
    public func startWriteback(from offset: Int, count: Int) throws(Errno) {
        _ = try retryingSyscall(.syncFileRange, on: rawValue) { storekit_start_writeback(rawValue, __off64_t(offset), __off64_t(count)) }
    }

    /// `fstatvfs(2)`: the file system holding the file.
    public func fileSystemStatistics() throws(Errno) -> statvfs {
        var info = statvfs()
        _ = try retryingSyscall(.fstatvfs, on: rawValue) { fstatvfs(rawValue, &info) }
        return info
    }
}
