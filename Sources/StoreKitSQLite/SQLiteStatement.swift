import CSQLite
import StoreKitLedger
import StoreKitPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A prepared statement borrowed from the database's cache.
struct Statement {
    let handle: OpaquePointer
    let database: SQLiteDatabase

    func bind(_ index: Int32, _ value: Int64?) {
        if let value { sqlite3_bind_int64(handle, index, value) } else { sqlite3_bind_null(handle, index) }
        if database.boundHandle == handle {
            database.boundValues.append((index, value.map { .integer($0) } ?? .null))
        }
    }

    func bind(_ index: Int32, _ value: String?) {
        if database.boundHandle == handle {
            database.boundValues.append((index, value.map { .text($0) } ?? .null))
        }
        if let value {
            sqlite3_bind_text(handle, index, value, -1, SQLiteDatabase.transient)
        } else {
            sqlite3_bind_null(handle, index)
        }
    }

    /// Binds `values` to parameters 1, 2, …
    func bind(_ values: [SQLiteDatabase.BoundValue]) {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            switch value {
            case .null: bind(index, Optional<Int64>.none)
            case .integer(let number): bind(index, number)
            case .text(let text): bind(index, text)
            }
        }
    }

    /// Steps once: true when a row is available, false when done.
    func step() throws(LedgerError) -> Bool {
        let starting = database.recording && sqlite3_stmt_busy(handle) == 0
        // A unit of work whose transaction SQLite rolled back must not go on in autocommit mode.
        if starting { try database.requireTransaction() }
        let status = sqlite3_step(handle)
        if starting && (status == SQLITE_ROW || status == SQLITE_DONE) && sqlite3_stmt_readonly(handle) == 0 {
            database.record(handle)
        }
        switch status {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let failure = database.error(status, "step")
            sqlite3_reset(handle)
            throw failure
        }
    }

    /// Steps once and maps the row, then resets so that no statement stays open across a COMMIT.
    func firstRow<T>(_ map: (Statement) -> T) throws(LedgerError) -> T? {
        defer { sqlite3_reset(handle) }
        return try step() ? map(self) : nil
    }

    func reset() { sqlite3_reset(handle) }

    func run() throws(LedgerError) {
        while try step() {}
    }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }
    func optionalInt64(_ column: Int32) -> Int64? { isNull(column) ? nil : int64(column) }

    func text(_ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }
}
