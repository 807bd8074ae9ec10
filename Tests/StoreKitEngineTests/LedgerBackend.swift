import StoreKitLedger
import StoreKitPostgres
import StoreKitSQLite
import StoreKitTestSupport
import Testing

/// The ledgers the engine's suites run against: every test that goes through the store runs once
/// on each. PostgreSQL is a real server (`PostgresServer.shared()`), one schema per test.
enum LedgerBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgresql

    var testDescription: String { rawValue }

    /// Where one test's ledger lives: opened (and opened again, as at a restart) from here.
    struct Place {
        let backend: LedgerBackend
        let location: String

        func open() throws -> any Ledger {
            switch backend {
            case .sqlite: try SQLiteLedger(path: location)
            case .postgresql: try PostgresLedger(conninfo: location)
            }
        }
    }

    /// A new, empty ledger: a file in `directory`, or a fresh schema on the test PostgreSQL.
    /// Cancels the test, with the reason, where PostgreSQL cannot run.
    func place(in directory: TemporaryDirectory) throws -> Place {
        switch self {
        case .sqlite:
            return Place(backend: self, location: directory.file("storekitd.sqlite"))
        case .postgresql:
            if let reason = PostgresServer.unavailableReason { try Test.cancel("PostgreSQL cannot run here: \(reason)") }
            return Place(backend: self, location: try PostgresServer.shared().freshConnectionString())
        }
    }

    /// Closes a ledger as a daemon does at shutdown.
    static func close(_ store: any Ledger) throws {
        if let sqlite = store as? SQLiteLedger { try sqlite.shutDown() }
        (store as? PostgresLedger)?.close()
    }
}

extension Ledger {
    /// Runs `body` in one unit of work, as the daemon does: committed when it returns, rolled
    /// back when it throws.
    func inUnit<T>(_ body: () throws -> T) throws -> T {
        try begin()
        do {
            let result = try body()
            try commit()
            return result
        } catch {
            rollback()
            throw error
        }
    }
}
