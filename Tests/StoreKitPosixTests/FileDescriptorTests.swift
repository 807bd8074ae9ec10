import Glibc
@testable import StoreKitPosix
import StoreKitTestSupport
import Testing

// Closing twice cannot be written: `close()` consumes the descriptor, so
//     try file.close(); try file.close()
// fails to compile ("'file' consumed more than once"), as does using `file` after its close.

/// A temporary directory for one test, removed when the test's suite value goes away.
final class Scratch {
    let directory = TemporaryDirectory("skposix")
    deinit { directory.remove() }
}

@Suite("FileDescriptor: one owner, each syscall wrapped once")
struct FileDescriptorTests {
    let scratch = Scratch()
    var directory: TemporaryDirectory { scratch.directory }

    /// Opens `path` for reading and writing, created 0600 when absent: as the commit log does.
    func openForWriting(_ path: String) throws(Errno) -> FileDescriptor {
        try FileDescriptor.open(path, .readWrite, options: [.create, .closeOnExec, .noFollow], permissions: 0o600)
    }

    /// Whether another open file description of `path` can take the exclusive lock now: false
    /// while a descriptor holding it is still open.
    func lockIsFree(_ path: String) throws -> Bool {
        let other = try FileDescriptor.open(path, .readOnly, options: [.closeOnExec])
        return try other.tryLockExclusive()
    }

    @Test("a created file gets the mode asked for, and O_EXCL refuses an existing one")
    func createsWithModeAndExclusive() throws {
        let path = directory.file("created")
        let file = try FileDescriptor.open(path, .writeOnly, options: [.create, .exclusive, .closeOnExec], permissions: 0o600)
        #expect(try file.status().st_mode & 0o777 == 0o600)
        try file.close()
        #expect(throws: Errno.fileExists) {
            _ = try FileDescriptor.open(path, .writeOnly, options: [.create, .exclusive, .closeOnExec], permissions: 0o600)
        }
    }

    @Test("ENOENT, ELOOP (O_NOFOLLOW) and ENOTDIR (O_DIRECTORY) are typed errors")
    func openErrors() throws {
        #expect(throws: Errno.notFound) { _ = try FileDescriptor.open(directory.file("absent"), .readOnly) }
        let target = directory.file("target")
        try openForWriting(target).close()
        let link = directory.file("link")
        #expect(symlink(target, link) == 0)
        #expect(throws: Errno.tooManySymbolicLinks) { _ = try openForWriting(link) }
        #expect(throws: Errno(rawValue: ENOTDIR)) {
            _ = try FileDescriptor.open(target, .readOnly, options: [.directory, .closeOnExec])
        }
    }

    @Test("reading a write-only descriptor and writing a read-only one are EBADF")
    func wrongAccessModeIsBadFileDescriptor() throws {
        let path = directory.file("modes")
        let writer = try FileDescriptor.open(path, .writeOnly, options: [.create, .closeOnExec], permissions: 0o600)
        #expect(throws: Errno.badFileDescriptor) { _ = try writer.read(atAbsoluteOffset: 0, count: 1) }
        let reader = try FileDescriptor.open(path, .readOnly, options: [.closeOnExec])
        #expect(throws: Errno.badFileDescriptor) { try reader.write([1], toAbsoluteOffset: 0) }
        // An O_PATH descriptor refers to the file only: no sync either.
        let reference = try FileDescriptor.open(directory.path, .readOnly, options: [.pathOnly, .directory, .closeOnExec])
        #expect(throws: Errno.badFileDescriptor) { try reference.synchronizeData() }
        #expect(try reference.fileSystemStatistics().f_frsize > 0)
    }

    @Test("positioned writes and reads round-trip; a read past the end is short, not an error")
    func writeAndRead() throws {
        let file = try openForWriting(directory.file("data"))
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try file.write(bytes, toAbsoluteOffset: 100)
        #expect(try file.read(atAbsoluteOffset: 100, count: bytes.count) == bytes)
        #expect(try file.read(atAbsoluteOffset: 0, count: 100) == [UInt8](repeating: 0, count: 100))
        #expect(try file.read(atAbsoluteOffset: 300_090, count: 64) == Array(bytes.suffix(10)))
        #expect(try file.read(atAbsoluteOffset: 1_000_000, count: 64).isEmpty)
        #expect(try file.status().st_size == 300_100)
        // RWF_DSYNC where the file system has it; else the same refusal the commit log falls back on.
        do {
            try file.write([7, 7], toAbsoluteOffset: 0, flags: .dataSync)
            #expect(try file.read(atAbsoluteOffset: 0, count: 2) == [7, 7])
        } catch {
            #expect([Errno.notSupported, .invalidArgument, .notImplemented].contains(error))
        }
        try file.synchronizeData()
        try file.lent.synchronizeData()
        try file.synchronize()
    }

    @Test("a short write is continued from where it stopped, and EINTR is retried")
    func shortWritesAreCompleted() throws {
        var calls: [Int] = []
        var interrupted = false
        try FileDescriptor.writeCompletely(10, on: -1) { done in
            calls.append(done)
            if done == 3 && !interrupted {
                interrupted = true
                errno = EINTR
                return -1
            }
            return min(3, 10 - done)   // three bytes at a time
        }
        #expect(calls == [0, 3, 3, 6, 9])
    }

    @Test("a failed write after a short one is reported, not taken for success")
    func failureAfterShortWrite() {
        var calls = 0
        #expect(throws: Errno.noSpace) {
            try FileDescriptor.writeCompletely(10, on: -1) { done in
                calls += 1
                if done == 0 { return 4 }
                errno = ENOSPC
                return -1
            }
        }
        #expect(calls == 2)
    }

    @Test("resize, allocate and status")
    func sizes() throws {
        let file = try openForWriting(directory.file("sizes"))
        try file.allocate(count: 65_536)
        #expect(try file.status().st_size == 65_536)
        try file.resize(to: 4096)
        #expect(try file.status().st_size == 4096)
        try file.startWriteback(from: 0, count: 4096)
    }

    @Test("the exclusive lock is held until the owner closes the descriptor")
    func closeReleasesTheLock() throws {
        let path = directory.file("locked")
        let owner = try openForWriting(path)
        #expect(try owner.tryLockExclusive())
        #expect(try !lockIsFree(path))
        try owner.close()
        #expect(try lockIsFree(path))
    }

    @Test("an owner that goes away without close() closes the descriptor")
    func deinitCloses() throws {
        let path = directory.file("dropped")
        func holdLockThenDrop() throws {
            let owner = try openForWriting(path)
            #expect(try owner.tryLockExclusive())
            #expect(try !lockIsFree(path))
        }
        try holdLockThenDrop()
        #expect(try lockIsFree(path))
    }

    @Test("a lent number refers to the owner's open file while the owner keeps it")
    func lentDescriptor() throws {
        let file = try openForWriting(directory.file("lent"))
        let lent = file.lent
        #expect(lent.rawValue == file.rawValue)
        #expect(lent == file.lent)
        try lent.synchronizeData()
    }
}

@Suite("FileSystem: path syscalls")
struct FileSystemTests {
    let scratch = Scratch()
    var directory: TemporaryDirectory { scratch.directory }

    @Test("status, exists, setPermissions and remove; a missing path is ENOENT")
    func paths() throws {
        let path = directory.file("file")
        #expect(!FileSystem.exists(path))
        #expect(throws: Errno.notFound) { _ = try FileSystem.status(of: path) }
        #expect(throws: Errno.notFound) { try FileSystem.remove(path) }
        try FileDescriptor.open(path, .writeOnly, options: [.create, .closeOnExec], permissions: 0o644).close()
        #expect(FileSystem.exists(path))
        try FileSystem.setPermissions(of: path, to: 0o600)
        #expect(try FileSystem.status(of: path).st_mode & 0o777 == 0o600)
        let link = directory.file("link")
        #expect(symlink(path, link) == 0)
        #expect(try FileSystem.status(of: link, followingSymlinks: false).st_mode & S_IFMT == S_IFLNK)
        #expect(try FileSystem.status(of: link).st_mode & S_IFMT == S_IFREG)
        #expect(try FileSystem.statistics(ofFileSystemAt: directory.path).f_frsize > 0)
        try FileSystem.remove(path)
        #expect(!FileSystem.exists(path))
    }

    @Test("retryingSyscall retries EINTR and throws any other errno")
    func retrying() throws {
        var attempts = 0
        let result = try retryingSyscall { () -> Int32 in
            attempts += 1
            if attempts < 3 {
                errno = EINTR
                return -1
            }
            return 42
        }
        #expect(result == 42 && attempts == 3)
        #expect(throws: Errno.badFileDescriptor) {
            _ = try retryingSyscall { () -> Int32 in
                errno = EBADF
                return -1
            }
        }
    }
}
