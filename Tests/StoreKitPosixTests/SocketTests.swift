import Foundation
import Glibc
@testable import StoreKitPosix
import Testing

// Closing twice cannot be written: `close()` consumes the socket, as FileDescriptor's does.

/// The owned descriptors of the serving loop (Socket.swift): a listening and an accepted socket
/// moved between owners and closed once, a pidfd following one process.
@Suite struct SocketTests {
    let scratch = Scratch()

    @Test("a listening socket accepts a connection whose peer it names; bytes go both ways; closes report success")
    func listenAcceptTalkClose() throws {
        let path = scratch.directory.file("s.sock")
        let listener = try Socket.listen(path: path, mode: 0o600)
        var mode = stat()
        #expect(stat(path, &mode) == 0 && mode.st_mode & 0o777 == 0o600)
        let nonePending = try listener.accept() == nil
        #expect(nonePending, "none pending: nil, not a wait")
        let client = Socket(adopting: try UnixSocket.connect(path: path))
        guard let accepted = try listener.accept() else {
            Issue.record("the connection was not accepted")
            return
        }
        let peer = try accepted.peerCredentials()
        #expect(peer.uid == getuid() && peer.pid == getpid())
        try UnixSocket.writeAll(client.rawValue, [1, 2, 3])
        var bytes = [UInt8](repeating: 0, count: 8)
        let result = try bytes.withUnsafeMutableBytes { try accepted.read(into: $0) }
        #expect(result == .transferred(3) && Array(bytes.prefix(3)) == [1, 2, 3])
        let reply = try [UInt8]([9]).withUnsafeBytes { try accepted.write($0) }
        #expect(reply == .transferred(1))
        try accepted.close()
        let eof = try bytes.withUnsafeMutableBytes { raw -> IOResult in
            _ = try UnixSocket.waitUntilReadable(client.rawValue, timeoutMilliseconds: 5000)
            return try UnixSocket.read(client.rawValue, into: raw)
        }
        #expect(eof == .transferred(1), "the reply arrived before the end: \(eof)")
        try client.close()
        var kept: Socket? = listener
        #expect(Socket.close(&kept) == nil, "closed once")
        let closed = kept == nil
        #expect(closed)
        #expect(Socket.close(&kept) == nil, "a second call closes nothing")
    }

    @Test("a pidfd follows its process: not exited while it runs, exited after")
    func pidfdFollowsItsProcess() throws {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/sleep")
        child.arguments = ["30"]
        try child.run()
        let pidfd = try PidFD(pid: child.processIdentifier)
        let exitedWhileRunning = pidfd.hasExited()
        #expect(!exitedWhileRunning)
        kill(child.processIdentifier, SIGKILL)   // SIGTERM may be blocked in a test thread, and a child inherits that
        child.waitUntilExit()
        let exitedAfter = pidfd.hasExited()
        #expect(exitedAfter)
    }
}
