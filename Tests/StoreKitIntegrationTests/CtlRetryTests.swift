import Foundation
import StoreKitPosix
import StoreKitTestSupport
import StoreKitWire
import Testing

/// A daemon being restarted (an upgrade restarts only the service; its listening sockets stay)
/// can close a connection storekitctl has just made. storekitctl sends its request once more on a
/// new connection only when the daemon provably did not read it — never when it may have run it.
/// The peer here is a raw socket playing the daemon, so that each way of closing is exact.
@Suite("storekitctl and a daemon that closes the connection")
struct CtlRetryTests {
    /// The next connection on `listener` within `milliseconds`; nil when none came.
    static func accept(_ listener: Int32, within milliseconds: Int32) throws -> Int32? {
        guard try UnixSocket.waitUntilReadable(listener, timeoutMilliseconds: milliseconds) else { return nil }
        return try UnixSocket.accept(listener)
    }

    /// Waits until `count` bytes have arrived on `fd` without taking them.
    static func waitForUnread(_ fd: Int32, count: Int) throws {
        let deadline = Date().addingTimeInterval(10)
        var available: Int32 = 0
        repeat {
            _ = try UnixSocket.waitUntilReadable(fd, timeoutMilliseconds: 100)
            _ = ioctl(fd, UInt(FIONREAD), &available)
        } while available < count && Date() < deadline
    }

    static let hello = Frame.encode(body: ClientMessage.hello(version: ProtocolVersion.current, app: "").encode())

    /// Runs `storekitctl status` against a listening socket that `daemon` plays; returns its exit
    /// status and standard error.
    static func ctlStatus(against daemon: (_ listener: Int32) throws -> Void) throws -> (status: Int32, stderr: String) {
        let directory = TemporaryDirectory("skretry")
        defer { directory.remove() }
        let path = directory.file("control.sock")
        let listener = try UnixSocket.listen(path: path, mode: 0o600)
        defer { UnixSocket.close(listener) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Paths.binary("storekitctl"))
        process.arguments = ["--socket", path, "status"]
        let stderr = Pipe()
        process.standardError = stderr
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        try daemon(listener)
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }

    @Test("closed with the hello unread (ECONNRESET): sent again on a new connection, once; the second failure is the error")
    func unreadIsSentAgainOnce() throws {
        let (status, message) = try Self.ctlStatus { listener in
            for attempt in 1...2 {
                let connection = try #require(try Self.accept(listener, within: 10_000), "connection \(attempt)")
                try Self.waitForUnread(connection, count: Self.hello.count)
                UnixSocket.close(connection)   // with the hello unread: the client reads ECONNRESET
            }
            #expect(try Self.accept(listener, within: 1500) == nil, "a third connection: sent again more than once")
        }
        #expect(status == 1)
        #expect(message.contains("reset"), "\(message)")
    }

    @Test("closed after the request was read (a plain end of stream): not sent again, since it may have run")
    func readRequestIsNotSentAgain() throws {
        let (status, message) = try Self.ctlStatus { listener in
            let connection = try #require(try Self.accept(listener, within: 10_000))
            try Self.waitForUnread(connection, count: Self.hello.count)
            var buffer = [UInt8](repeating: 0, count: 65_536)
            _ = buffer.withUnsafeMutableBytes { try? UnixSocket.read(connection, into: $0) }
            try UnixSocket.writeAll(connection, Frame.encode(body: ServerMessage.welcome(
                version: ProtocolVersion.current, uid: getuid(), storefrontCountryCode: "USA", storefrontID: "143441").encode()))
            // The request arrives and is read whole; then the connection ends without an answer.
            let request = Frame.encode(body: ClientMessage.control(requestID: 1, command: "status", arguments: []).encode())
            try Self.waitForUnread(connection, count: request.count)
            _ = buffer.withUnsafeMutableBytes { try? UnixSocket.read(connection, into: $0) }
            UnixSocket.close(connection)
            #expect(try Self.accept(listener, within: 1500) == nil, "the request was sent again after the daemon had read it")
        }
        #expect(status == 1, "\(message)")
    }
}
