import Glibc
@testable import StoreKitPosix
import StoreKitTestSupport
import Testing

/// Failures injected into the syscall trampolines (`SyscallFailures`, debug builds): the disk
/// full, an I/O error and an interrupted call, met by the real wrappers on real files and sockets.
@Suite struct SyscallFailuresTests {
    let scratch = Scratch()

    func file(_ name: String) throws(Errno) -> FileDescriptor {
        try FileDescriptor.open(scratch.directory.file(name), .readWrite, options: [.create, .closeOnExec], permissions: 0o600)
    }

    @Test("ENOSPC on a write is thrown and writes nothing; the next write, not injected, succeeds")
    func diskFullOnWrite() throws {
        let file = try file("full")
        defer { SyscallFailures.clear(file.rawValue) }
        SyscallFailures.inject(.noSpace, into: .write, on: file.rawValue)
        #expect(throws: Errno.noSpace) { try file.write([1, 2, 3], toAbsoluteOffset: 0) }
        #expect(try file.status().st_size == 0)
        try file.write([1, 2, 3], toAbsoluteOffset: 0)
        #expect(try file.read(atAbsoluteOffset: 0, count: 3) == [1, 2, 3])
        #expect(SyscallFailures.clear(file.rawValue) == 0, "the failure was taken once")
    }

    @Test("EINTR is retried: an interrupted write and read still complete")
    func interruptedCallsAreRetried() throws {
        let file = try file("eintr")
        defer { SyscallFailures.clear(file.rawValue) }
        SyscallFailures.inject(.interrupted, into: .write, on: file.rawValue, times: 3)
        try file.write([7, 8, 9], toAbsoluteOffset: 0)
        SyscallFailures.inject(.interrupted, into: .read, on: file.rawValue, times: 2)
        #expect(try file.read(atAbsoluteOffset: 0, count: 3) == [7, 8, 9])
        #expect(SyscallFailures.clear(file.rawValue) == 0)

        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[0]); close(pair[1]) }
        SyscallFailures.inject(.interrupted, into: .send, on: pair[0])
        try UnixSocket.writeAll(pair[0], [42])
        SyscallFailures.inject(.interrupted, into: .read, on: pair[1])
        var byte: UInt8 = 0
        let result = try withUnsafeMutableBytes(of: &byte) { try UnixSocket.read(pair[1], into: $0) }
        #expect(result == .transferred(1) && byte == 42, "\(result)")
    }

    @Test("EIO on fdatasync and ENOSPC on fallocate are thrown as they would be by the kernel")
    func ioErrorAndAllocation() throws {
        let file = try file("eio")
        defer { SyscallFailures.clear(file.rawValue) }
        SyscallFailures.inject(Errno(rawValue: EIO), into: .fdatasync, on: file.rawValue)
        #expect(throws: Errno(rawValue: EIO)) { try file.lent.synchronizeData() }
        try file.synchronizeData()
        SyscallFailures.inject(.noSpace, into: .fallocate, on: file.rawValue)
        #expect(throws: Errno.noSpace) { try file.allocate(count: 4096) }
        try file.allocate(count: 4096)
        #expect(try file.status().st_size == 4096)
    }

    @Test("a failure planned for one descriptor is never taken by another")
    func failuresStayOnTheirDescriptor() throws {
        let first = try file("first")
        let second = try file("second")
        defer { SyscallFailures.clear(first.rawValue) }
        SyscallFailures.inject(.noSpace, into: .write, on: first.rawValue)
        try second.write([1], toAbsoluteOffset: 0)
        try first.synchronizeData()   // another call on the same descriptor
        #expect(SyscallFailures.clear(first.rawValue) == 1)
    }
}
