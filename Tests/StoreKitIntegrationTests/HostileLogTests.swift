import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing

/// Client strings in the daemon's log: no forged lines, no megabyte lines, no flood of the same
/// refusal (the console target has no rate limit of its own).
@Suite("hostile log input")
struct HostileLogTests {
    /// Says hello as `app` on a fresh connection and waits for the refusal.
    static func refusedHello(_ daemon: DaemonProcess, app: String) throws {
        let connection = try WireConnection(path: daemon.clientSocket)
        defer { connection.close() }
        #expect(throws: ConnectionError.self) { _ = try connection.hello(app: app) }
    }

    @Test("an app id with a newline and a fake prefix does not start a line of its own")
    func forgedLine() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        try Self.refusedHello(daemon, app: "x\nstorekitd[notice]: FORGED purchase approved\r\u{1b}[2K")
        #expect(eventually { daemon.log().contains("not registered") })
        let lines = daemon.log().split(separator: "\n")
        #expect(!lines.contains { $0.hasPrefix("storekitd[notice]: FORGED") }, "\(lines)")
        #expect(daemon.log().contains("x\\nstorekitd[notice]: FORGED purchase approved\\r\\x1b[2K"))
    }

    @Test("a 512 KB app id is logged cut to a bounded length")
    func hugeAppID() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        try Self.refusedHello(daemon, app: String(repeating: "a", count: 512 << 10))
        #expect(eventually { daemon.log().contains("more bytes]") })
        let longest = daemon.log().split(separator: "\n").map(\.utf8.count).max() ?? 0
        #expect(longest < 4096, "a log line of \(longest) bytes")
    }

    @Test("500 bad hellos from one uid write a bounded number of lines, and say how many were left out")
    func refusalFlood() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        for index in 0..<500 { try Self.refusedHello(daemon, app: "no.such.app.\(index)") }
        // The daemon still serves, and has processed every hello (this one comes after them all).
        let client = try Client(daemon)
        #expect(try client.request { .ping(requestID: $0) }.code == .ok)
        let refusals = daemon.log().components(separatedBy: "Refused client peer").count - 1
        #expect(refusals >= 1 && refusals <= 20, "\(refusals) refusal lines")
    }
}
