import Foundation
@testable import StoreKitPostgres
import StoreKitLedger
import StoreKitSQLite
import StoreKitTestSupport
import StoreKitWire
import Testing

private let app = "com.example.game"

private func record(_ ledger: PostgresLedger, uid: UInt32 = 1000, sequence: UInt64 = 1) throws -> TransactionRecord {
    TransactionRecord(id: try ledger.allocateTransactionID(), uid: uid, app: app, productID: "com.example.game.coins",
                      quantity: 1, state: .purchased, sequence: sequence, date: 1_700_000_000_000)
}

/// What the PostgreSQL ledger adds to or does differently from the SQLite one, on a real server:
/// its schema version, constraints, transactions, and a server that goes away and comes back.
@Suite(.enabled(if: PostgresServer.unavailableReason == nil, Comment(rawValue: PostgresServer.unavailableReason ?? "")))
struct PostgresLedgerTests {
    @Test("a new database gets the schema and its version; opening again finds it")
    func schemaVersion() throws {
        let server = try PostgresServer.shared()
        let conninfo = try server.freshConnectionString()
        let created = try PostgresLedger(conninfo: conninfo)
        #expect(created.openReport == "created schema \(PostgresLedger.schemaVersion)")
        created.close()
        let reopened = try PostgresLedger(conninfo: conninfo)
        #expect(reopened.openReport == "schema \(PostgresLedger.schemaVersion)")
        reopened.close()
    }

    @Test("a newer schema is refused, and nothing about it changes")
    func newerSchemaRefused() throws {
        let server = try PostgresServer.shared()
        let conninfo = try server.freshConnectionString(label: "newer")
        try PostgresLedger(conninfo: conninfo).close()
        let schema = try #require(conninfo.split(separator: "=").last).dropLast()
        try server.sql("UPDATE \(schema).storekit_schema SET version = 99")
        #expect {
            _ = try PostgresLedger(conninfo: conninfo)
        } throws: { error in
            (error as? LedgerError)?.code == .unsupportedSchema(found: 99, supported: PostgresLedger.schemaVersion)
        }
        #expect(try server.sql("SELECT version FROM \(schema).storekit_schema") == "99")
    }

    @Test("statements queued with executeLater go with the next execute in one pipeline: in order, its result is the last one's, and a queued one that fails is the error, with nothing after it run")
    func deferredStatementsPipeline() throws {
        let connection = try PostgresConnection(conninfo: try PostgresServer.shared().freshConnectionString(label: "pipeline"))
        defer { connection.close() }
        try connection.execute("CREATE TABLE pipelined (n integer PRIMARY KEY)")

        // In order, in one transaction, the last statement's rows returned.
        connection.executeLater("BEGIN")
        connection.executeLater("INSERT INTO pipelined VALUES ($1)", ["1"])
        connection.executeLater("INSERT INTO pipelined VALUES ($1)", ["2"])
        #expect(try connection.execute("SELECT count(*) FROM pipelined WHERE n <= $1", ["2"]).firstInt == 2)
        try connection.execute("COMMIT")

        // A queued statement that fails: its error (a duplicate key) is thrown; what came after it
        // in the pipeline did not run (a sequence's nextval, which no rollback undoes, shows it);
        // the connection is usable after the rollback.
        try connection.execute("CREATE SEQUENCE pipelined_after")
        connection.executeLater("BEGIN")
        connection.executeLater("INSERT INTO pipelined VALUES ($1)", ["3"])
        connection.executeLater("INSERT INTO pipelined VALUES ($1)", ["1"])
        connection.executeLater("SELECT nextval('pipelined_after')")
        #expect {
            try connection.execute("SELECT nextval('pipelined_after')")
        } throws: { error in
            (error as? LedgerError)?.code == .other(PostgresConnection.uniqueViolation)
        }
        try connection.execute("ROLLBACK")
        #expect(!connection.isBroken)
        #expect(try connection.execute("SELECT string_agg(n::text, ',' ORDER BY n) FROM pipelined").rows == [["1,2"]])
        #expect(try connection.execute("SELECT nextval('pipelined_after')").firstInt == 1, "nothing after the failure ran")

        // Nothing queued: a plain round trip, as before; a queued statement alone goes with COMMIT.
        try connection.execute("BEGIN")
        connection.executeLater("INSERT INTO pipelined VALUES ($1)", ["5"])
        try connection.execute("COMMIT")
        #expect(try connection.execute("SELECT max(n) FROM pipelined").firstInt == 5)

        // A closed connection drops what was queued: nothing of it reaches the next connection.
        connection.executeLater("INSERT INTO pipelined VALUES ($1)", ["6"])
        try connection.reconnect()
        #expect(try connection.execute("SELECT max(n) FROM pipelined").firstInt == 5)
    }

    @Test("a pipeline on a connection whose server process was terminated fails at once with a lost connection, leaves the connection to be reconnected, and nothing of it ran",
          arguments: [0, 300_000])
    func pipelineOnLostConnection(queuedBytes: Int) throws {
        let server = try PostgresServer.shared()
        let connection = try PostgresConnection(conninfo: try server.freshConnectionString(label: "pipelinelost"))
        defer { connection.close() }
        try connection.execute("CREATE TABLE lost (n integer PRIMARY KEY, note text)")
        let pid = try #require(try connection.execute("SELECT pg_backend_pid()").firstInt)
        _ = try server.sql("SELECT pg_terminate_backend(\(pid))")
        #expect(eventually(timeout: 10) { (try? server.sql("SELECT count(*) FROM pg_stat_activity WHERE pid = \(pid)")) == "0" })

        // No parameters, so nothing is prepared outside the pipeline first: the pipeline is the
        // first to use the dead connection. 300,000 queued bytes are past libpq's 64 KiB output
        // threshold, so they are written while being queued; with 0, at the sync. Either way
        // libpq keeps a failed write to itself until it has read what the server said, so the
        // loss is seen when the results are read (the server's FATAL 57P01), whichever it is.
        connection.executeLater("BEGIN")
        connection.executeLater("INSERT INTO lost VALUES (1, '\(String(repeating: "x", count: queuedBytes))')")
        let started = Date()
        #expect {
            try connection.execute("SELECT count(*) FROM lost")
        } throws: { error in
            (error as? LedgerError)?.code == .io && (error as? LedgerError)?.message.contains("PostgreSQL connection lost") == true
        }
        #expect(Date().timeIntervalSince(started) < 5, "the failure did not wait")
        #expect(connection.isBroken)
        #expect(throws: LedgerError.self) { try connection.execute("SELECT 1") }

        try connection.reconnect()
        #expect(!connection.isBroken)
        #expect(try connection.execute("SELECT count(*) FROM lost").firstInt == 0, "nothing of the lost pipeline ran")
    }

    @Test("COMMIT of a transaction an error aborted fails (PostgreSQL answers it with the tag ROLLBACK, not an error); the ledger is usable after")
    func commitOfAbortedTransactionFails() throws {
        let ledger = try PostgresLedger(conninfo: try PostgresServer.shared().freshConnectionString(label: "aborted"))
        defer { ledger.close() }
        try ledger.begin()
        try ledger.insert(record(ledger), paymentKey: "tap-1")
        #expect(throws: LedgerError.self) { try ledger.insert(record(ledger), paymentKey: "tap-1") }
        #expect { try ledger.commit() } throws: { error in
            (error as? LedgerError)?.message.contains("rolled the transaction back at COMMIT (ROLLBACK)") == true
        }
        #expect(try ledger.list(uid: nil, app: nil, unfinishedOnly: false).isEmpty, "nothing of the aborted unit was kept")
        try ledger.begin()
        try ledger.insert(record(ledger), paymentKey: "tap-2")
        try ledger.commit()
        #expect(try ledger.list(uid: nil, app: nil, unfinishedOnly: false).count == 1)
    }

    @Test("the payment key is unique per queue in the database itself, and a refused row leaves the unit usable")
    func paymentKeyConstraint() throws {
        let ledger = try PostgresLedger(conninfo: try PostgresServer.shared().freshConnectionString())
        defer { ledger.close() }
        try ledger.begin()
        try ledger.insert(record(ledger), paymentKey: "tap-1")
        try ledger.insert(record(ledger, uid: 1001), paymentKey: "tap-1")   // another queue: its own keys
        try ledger.savepoint()
        #expect(throws: LedgerError.self) { try ledger.insert(record(ledger), paymentKey: "tap-1") }
        ledger.rollbackToSavepoint()
        try ledger.insert(record(ledger), paymentKey: nil)                  // no key: never a conflict
        try ledger.insert(record(ledger), paymentKey: nil)
        try ledger.commit()
        #expect(try ledger.list(uid: nil, app: nil, unfinishedOnly: false).count == 4)
    }

    @Test("a unit of work is one transaction: a rollback undoes all of it, another connection sees a commit at once")
    func unitOfWorkIsOneTransaction() throws {
        let conninfo = try PostgresServer.shared().freshConnectionString()
        let ledger = try PostgresLedger(conninfo: conninfo)
        let other = try PostgresLedger(conninfo: conninfo)
        defer { ledger.close(); other.close() }
        try ledger.begin()
        for _ in 0..<3 { try ledger.insert(record(ledger)) }
        #expect(try other.unfinishedCount() == 0, "not visible before the commit")
        let generation = ledger.generation
        ledger.rollback()
        #expect(ledger.generation != generation)
        #expect(try ledger.unfinishedCount() == 0)
        try ledger.begin()
        for _ in 0..<3 { try ledger.insert(record(ledger)) }
        try ledger.commit()
        #expect(try other.unfinishedCount() == 3, "committed means there, for every connection")
    }

    @Test("every unit of work commits with synchronous_commit on, whatever the server or the connection string says")
    func synchronousCommitIsOn() throws {
        let server = try PostgresServer.shared()
        let schema = "sync_" + String(UInt32.random(in: 1...UInt32.max))
        try server.sql("CREATE SCHEMA \(schema)")
        let conninfo = server.connectionString() + " options='-c search_path=\(schema) -c synchronous_commit=off'"
        let ledger = try PostgresLedger(conninfo: conninfo)
        defer { ledger.close() }
        #expect(try ledger.connection.execute("SHOW synchronous_commit").rows.first?.first == "off")
        try ledger.begin()
        #expect(try ledger.connection.execute("SHOW synchronous_commit").rows.first?.first == "on")
        try ledger.commit()
    }

    @Test("a bad connection string is refused at once, naming no password")
    func badConnectionString() {
        #expect(PostgresLedger.problem(with: "host=/tmp dbname=storekit") == nil)
        #expect(PostgresLedger.problem(with: "postgresql:///storekit?host=/run/postgresql") == nil)
        #expect(PostgresLedger.problem(with: "/var/lib/storekitd/storekitd.sqlite") != nil)
        #expect(PostgresLedger.problem(with: "host=/tmp nonsense=1") != nil)
        #expect(PostgresLedger.describe("host=/run/postgresql dbname=storekit password=secret")
                == "PostgreSQL database storekit on /run/postgresql")
    }

    @Test("PostgreSQL stopped: units of work fail with an I/O error; started again: the next one reconnects, nothing lost")
    func serverGoesAwayAndComesBack() throws {
        let server = try PostgresServer()   // its own: stopping the shared one would disturb other tests
        defer { server.remove() }
        let ledger = try PostgresLedger(conninfo: server.connectionString())
        defer { ledger.close() }
        try ledger.begin()
        let kept = try record(ledger)
        try ledger.insert(kept, paymentKey: "before")
        try ledger.commit()

        try server.stop()
        #expect {
            try ledger.begin()
            try ledger.insert(record(ledger))
            try ledger.commit()
        } throws: { error in
            (error as? LedgerError)?.code == .io
        }
        if ledger.isInTransaction { ledger.rollback() }
        #expect { try ledger.begin() } throws: { ($0 as? LedgerError)?.code == .io }

        try server.start()
        #expect(eventually(timeout: 5) {
            guard (try? ledger.begin()) != nil else { return false }
            ledger.rollback()
            return true
        }, "reconnected")
        #expect(try ledger.transaction(uid: kept.uid, app: app, paymentKey: "before")?.id == kept.id)
    }

    @Test("while PostgreSQL stays away, reconnection backs off: 250 ms after the first failed try, twice as long after each, at most 8 s")
    func reconnectionBacksOff() throws {
        let server = try PostgresServer()
        defer { server.remove() }
        let ledger = try PostgresLedger(conninfo: server.connectionString())
        defer { ledger.close() }
        try server.stop()
        _ = try? ledger.begin()   // the connection breaks
        if ledger.isInTransaction { ledger.rollback() }
        /// The wait the refusal announces ("trying again in N ms"), after a failed try.
        func announcedWait() -> Int64? {
            do {
                try ledger.begin()
                ledger.rollback()
                return nil
            } catch {
                guard let range = error.message.range(of: "trying again in ") else { return nil }
                return Int64(error.message[range.upperBound...].prefix { $0.isNumber })
            }
        }
        var waits: [Int64] = []
        _ = try? ledger.begin()   // the first try to reconnect fails
        for _ in 0..<5 {
            guard let wait = announcedWait() else { break }
            waits.append(wait)
            // Wait it out; the next try fails again.
            Thread.sleep(forTimeInterval: Double(wait) / 1000 + 0.05)
            #expect(throws: LedgerError.self) { try ledger.begin() }
        }
        #expect(waits.count == 5)
        for (earlier, later) in zip(waits, waits.dropFirst()) { #expect(later > earlier, "\(waits)") }
        #expect(waits.allSatisfy { $0 <= PostgresLedger.longestReconnectInterval }, "\(waits)")
        #expect((waits.last ?? 0) > 2_000, "the waits grew: \(waits)")
    }
}
