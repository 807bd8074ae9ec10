import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing

/// Integers from the wire and from the command line at the edges of their types, against the real
/// daemon: each gets a clear refusal, and the daemon goes on serving with nothing lost.
@Suite("hostile integers")
struct HostileIntegerTests {
    /// Transaction ids that no database can hold (SQLite integers are signed 64-bit).
    static let unrepresentable: [UInt64] = [UInt64(Int64.max) + 1, UInt64.max, 0]

    /// The daemon still answers, and the purchase it held before is still there.
    static func stillServing(_ daemon: DaemonProcess, holding id: UInt64) throws {
        let client = try Client(daemon)
        defer { client.close() }
        #expect(try client.request { .ping(requestID: $0) }.code == .ok)
        #expect(try client.unfinished().map(\.id).contains(id))
    }

    /// A purchase left unfinished in the queue: what must still be there afterwards.
    static func heldPurchase(_ daemon: DaemonProcess) throws -> TransactionRecord {
        let client = try Client(daemon)
        defer { client.close() }
        _ = try client.subscribe()
        return try client.buy(Sample.levelPack)
    }

    @Test("finish and cancelPayment of ids ≥ 2^63 on the client socket: transactionNotFound, no crash")
    func clientIDsOutOfRange() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let held = try Self.heldPurchase(daemon)
        let client = try Client(daemon)
        for id in Self.unrepresentable {
            let finish = try client.finish(id)
            #expect(finish.code == .transactionNotFound, "finish \(id): \(finish.code.name) \(finish.message)")
            let cancel = try client.request { .cancelPayment(requestID: $0, transactionID: id) }
            #expect(cancel.code == .transactionNotFound, "cancelPayment \(id): \(cancel.code.name) \(cancel.message)")
        }
        client.close()
        try Self.stillServing(daemon, holding: held.id)
    }

    @Test("storekitctl commands with ids ≥ 2^63: exit 1 with a message, no crash", arguments: [
        ["approve"], ["decline"], ["resolve"], ["refund"],
    ])
    func controlIDsOutOfRange(command: [String]) throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let held = try Self.heldPurchase(daemon)
        for id in ["18446744073709551615", "9223372036854775808", "99999999999999999999999", "-1"] {
            let result = try daemon.ctl(command + [id])
            #expect(result.status == 1 || result.status == 64, "\(command) \(id): \(result.status) \(result.stderr)")
            #expect(!result.stderr.isEmpty, "\(command) \(id) said nothing")
        }
        try Self.stillServing(daemon, holding: held.id)
    }

    @Test("subscription commands with original ids ≥ 2^63: exit 1 with a message, no crash", arguments: [
        ["expire"], ["renew"], ["auto-renew", "off"], ["billing-issue", "on"],
    ])
    func subscriptionIDsOutOfRange(command: [String]) throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let held = try Self.heldPurchase(daemon)
        for id in ["18446744073709551615", "9223372036854775808"] {
            let result = try daemon.ctl(Array(command.prefix(1)) + [id] + Array(command.dropFirst()))
            #expect(result.status != 0, "\(command) \(id) succeeded")
            #expect(!result.stderr.isEmpty, "\(command) \(id) said nothing")
        }
        try Self.stillServing(daemon, holding: held.id)
    }

    @Test("clock advance by the largest durations, again and again: refused past the clock's range, no crash")
    func clockAdvanceOutOfRange() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let held = try Self.heldPurchase(daemon)
        var refused = 0
        for duration in ["999999999y", "99999999y", "99999999y", "999999999w", "999999999w", "999999999mo", "P999999999Y", "P99999999Y"] {
            let result = try daemon.ctl(["clock", "advance", duration])
            if result.status != 0 {
                refused += 1
                #expect(result.stderr.contains("clock") || result.stderr.contains("not a duration"), "\(duration): \(result.stderr)")
            }
        }
        #expect(refused > 0, "advancing the clock by billions of years was accepted every time")
        let small = try daemon.ctl(["clock", "advance", "1d"])
        #expect(small.status == 0, "\(small.stderr)")
        try Self.stillServing(daemon, holding: held.id)
    }
}
