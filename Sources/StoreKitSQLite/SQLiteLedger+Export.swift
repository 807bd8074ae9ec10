import CSQLite
import StoreKitLedger

// `storekitctl migrate`: the ledger's rows as committed to the file, for a copy into another
// database. They are read on a read-only connection of their own, in one read transaction (one
// snapshot of every table, WAL snapshot isolation), never through the daemon's connection: the
// copy neither sees the caller's open unit of work nor writes anything. The daemon saves the
// store before a batch with a control command, so everything acknowledged before is in the file.

extension SQLiteLedger {
    /// Reads every table of `LedgerRows.tables` from one snapshot of the committed file, calling
    /// `body` with up to `pageSize` rows at a time, each table in primary-key order. The file is
    /// opened read-only; `body` may take its time (the daemon's writer is not blocked meanwhile).
    public func export(pageSize: Int,
                       _ body: (LedgerRows.Table, [[LedgerRows.Value]]) throws(LedgerError) -> Void) throws(LedgerError) {
        precondition(pageSize > 0, "empty pages")
        let reader = try SQLiteDatabase(path: path, readOnly: true)
        try reader.execute("BEGIN")
        defer { try? reader.execute("COMMIT") }
        for table in LedgerRows.tables {
            // Table and column names are the constants above, never values.
            let select = try reader.statement(
                "SELECT \(table.columns.joined(separator: ", ")) FROM \(table.name) ORDER BY \(table.key.joined(separator: ", "))")
            defer { select.reset() }
            var page: [[LedgerRows.Value]] = []
            page.reserveCapacity(pageSize)
            while try select.step() {
                page.append((0..<Int32(table.columns.count)).map { column in
                    switch sqlite3_column_type(select.handle, column) {
                    case SQLITE_NULL: .null
                    case SQLITE_INTEGER: .integer(select.int64(column))
                    default: .text(select.text(column))
                    }
                })
                if page.count == pageSize {
                    try body(table, page)
                    page.removeAll(keepingCapacity: true)
                }
            }
            if !page.isEmpty { try body(table, page) }
        }
    }
}
