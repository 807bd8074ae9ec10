import Foundation
import StoreKitLedger
@testable import StoreKitSQLite
import StoreKitTestSupport
import StoreKitWire
import Testing

/// A private directory holding one database path; removed when the fixture goes away.
final class StoreFixture {
    let directory = TemporaryDirectory("skstore")
    var path: String { directory.file("storekitd.sqlite") }

    deinit { directory.remove() }

    func open() throws(LedgerError) -> SQLiteLedger { try SQLiteLedger(path: path) }

    /// A store that stamps held rows with `heldRowClock` (monotonic ms the test sets).
    func open(heldRowClock: @escaping () -> Int64) throws(LedgerError) -> SQLiteLedger {
        try SQLiteLedger(path: path, spaceReserve: DiskSpaceGuard.defaultReserveSize, heldRowClock: heldRowClock)
    }

    func bytes(_ path: String? = nil) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path ?? self.path)) }

    func exists(_ suffix: String) -> Bool { FileManager.default.fileExists(atPath: path + suffix) }

    /// Runs `body` inside one unit of work and commits it.
    @discardableResult
    static func unit<T>(_ store: SQLiteLedger, _ body: () throws -> T) throws -> T {
        try store.begin()
        do {
            let result = try body()
            try store.commit()
            return result
        } catch {
            store.rollback()
            throw error
        }
    }
}

/// Records with sensible defaults, so that each test states only what it is about.
func makeRecord(
    id: UInt64, uid: UInt32 = 1000, app: String = "com.example.game", productID: String = "com.example.game.coins100",
    state: TransactionState = .purchased, sequence: UInt64 = 1, date: Int64 = 1_700_000_000_000, finished: Bool = false
) -> TransactionRecord {
    TransactionRecord(id: id, uid: uid, app: app, productID: productID, quantity: 1, state: state,
                      sequence: sequence, date: date, finished: finished)
}

/// The `LedgerError` that `body` throws, recording an issue when it throws none or another error.
func storeError(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> LedgerError? {
    do {
        try body()
        Issue.record("expected a LedgerError", sourceLocation: sourceLocation)
    } catch let error as LedgerError {
        return error
    } catch {
        Issue.record("expected a LedgerError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}
