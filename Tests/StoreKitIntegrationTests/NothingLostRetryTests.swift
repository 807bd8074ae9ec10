import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing

/// The idempotency key of `addPayment`: when the connection drops before the answer arrives and
/// the client sends the payment again, there is exactly one transaction.
@Suite struct NothingLostRetryTests {
    /// Rows carrying `key`, read from the database file. A control command first: the daemon
    /// commits what it acknowledged (durable in its commit log already) to SQLite before one.
    static func rows(_ daemon: SupervisedDaemon, key: String) throws -> [StoredRow] {
        _ = try daemon.base.transactions()
        return try storedRows(daemon.databasePath).filter { $0.paymentKey == key }
    }

    /// Sends addPayment with `key` on a fresh connection and closes it without reading anything.
    static func sendAndHangUp(_ daemon: SupervisedDaemon, key: String, waitUntilStored: Bool) throws {
        let connection = try daemon.base.connect()
        try connection.send(.addPayment(.init(requestID: 1, key: key, productID: Sample.coins, quantity: 1)))
        if waitUntilStored {
            // Committed (and so answered, into a socket nobody will read) before the hang-up.
            #expect(try eventually { try !rows(daemon, key: key).isEmpty }, "the payment was never stored")
        }
        connection.close()
    }

    @Test(arguments: [false, true])
    func retryAfterAForcedDisconnectMakesOneTransaction(waitUntilStored: Bool) throws {
        let daemon = try SupervisedDaemon()
        defer { daemon.remove() }
        try daemon.start()
        let key = UUID().uuidString
        try Self.sendAndHangUp(daemon, key: key, waitUntilStored: waitUntilStored)

        let client = try Client(daemon.base)
        let retry = try client.addPayment(Sample.coins, key: key)
        #expect(retry.code == .ok, "\(retry.code.name): \(retry.message)")
        let stored = try Self.rows(daemon, key: key)
        #expect(stored.count == 1, "\(stored.count) transactions for one key")
        #expect(stored.first?.id == retry.value, "the retry was answered with \(retry.value), the database has \(stored.map(\.id))")
        #expect(try daemon.base.transactions().count == 1)

        // Once more, on yet another connection: still the same transaction, nothing new pushed.
        let again = try Client(daemon.base).addPayment(Sample.coins, key: key)
        #expect(again.code == .ok && again.value == retry.value)
        #expect(again.updated.isEmpty, "a retried payment must not be delivered as a new purchase: \(again.updated)")
        #expect(try Self.rows(daemon, key: key).count == 1)
    }

    @Test("the key belongs to its (uid, app): another account using the same key buys for itself",
          .enabled(if: TestEnvironment.isRoot, "needs root: the other account connects as uid 73001 (setresuid)"))
    func theSameKeyOfAnotherAccountIsAnotherPayment() throws {
        let daemon = try SupervisedDaemon()
        defer { daemon.remove() }
        try daemon.start()
        let key = UUID().uuidString
        let mine = try Client(daemon.base).addPayment(Sample.coins, key: key)
        #expect(mine.code == .ok, "\(mine.code.name): \(mine.message)")
        daemon.base.openDirectoriesToOtherUsers()
        let other = try Client(daemon.base, asUID: 73001).addPayment(Sample.coins, key: key)
        #expect(other.code == .ok && other.value != mine.value)
        #expect(try Self.rows(daemon, key: key).count == 2)
    }

    @Test func retryAfterACrashBetweenCommitAndAnswerMakesOneTransaction() throws {
        let daemon = try SupervisedDaemon()
        defer { daemon.remove() }
        try daemon.start()
        let key = UUID().uuidString
        let connection = try daemon.base.connect()
        try connection.send(.addPayment(.init(requestID: 1, key: key, productID: Sample.coins, quantity: 1)))
        #expect(try eventually { try !Self.rows(daemon, key: key).isEmpty })
        daemon.crash()
        connection.close()

        try daemon.start()
        let client = try Client(daemon.base)
        let snapshot = try client.subscribe()
        let retry = try client.addPayment(Sample.coins, key: key)
        #expect(retry.code == .ok)
        let stored = try Self.rows(daemon, key: key)
        #expect(stored.count == 1 && stored.first?.id == retry.value, "\(stored.map(\.id)) vs \(retry.value)")
        #expect(snapshot.map(\.id) == [retry.value], "the unfinished purchase is redelivered once, with its id")
        #expect(try client.finish(retry.value).code == .ok)
        #expect(try Client(daemon.base).subscribe().isEmpty)
    }
}
