import CSQLite

// `storekitctl migrate`: the ledger's rows as committed to the file, for a copy into another
// database. They are read on a read-only connection of their own, in one read transaction (one
// snapshot of every table, WAL snapshot isolation), never through the daemon's connection: the
// copy neither sees the caller's open unit of work nor writes anything. The daemon saves the
// store before a batch with a control command, so everything acknowledged before is in the file.

extension TransactionStore {
    /// One value of an exported row, as SQLite holds it.
    public enum ExportedValue: Sendable, Equatable {
        case null
        case integer(Int64)
        case text(String)

        /// The value in PostgreSQL's text form (nil: NULL).
        public var text: String? {
            switch self {
            case .null: nil
            case .integer(let number): String(number)
            case .text(let text): text
            }
        }
    }

    /// A table as the export reads it: SQLite's columns in order, ordered by its primary key.
    public struct ExportedTable: Sendable, Equatable {
        public let name: String
        public let columns: [String]
        public let key: [String]
    }

    /// Every table of schema 3 with rows to copy, in the order they are read.
    public static let exportedTables: [ExportedTable] = [
        ExportedTable(name: "transactions", columns: [
            "id", "original_id", "uid", "app", "product", "quantity", "state", "sequence", "date", "finished",
            "error_code", "error_message", "revocation_date", "revocation_reason", "app_username", "expires_date",
            "payment_key",
        ], key: ["id"]),
        ExportedTable(name: "sequences", columns: ["uid", "app", "last"], key: ["uid", "app"]),
        ExportedTable(name: "settings", columns: ["key", "value"], key: ["key"]),
        ExportedTable(name: "subscriptions", columns: [
            "original_id", "uid", "app", "group_id", "product", "quantity", "app_username", "status", "period_start",
            "expires_date", "auto_renew", "next_product", "offer_periods_left", "grace_end", "retry_end", "due",
            "last_transaction", "renewals",
        ], key: ["original_id"]),
        ExportedTable(name: "purchase_requests", columns: [
            "transaction_id", "kind", "uid", "app", "product", "created", "expires",
        ], key: ["transaction_id"]),
        ExportedTable(name: "renewals", columns: ["transaction_id"], key: ["transaction_id"]),
    ]

    /// Settings that describe the SQLite file itself (its commit log, the highest id `clear`
    /// deleted), not the store: another database has no use for them.
    public static func isFileSetting(_ key: String) -> Bool {
        key.hasPrefix("commitlog.") || key == "transactions.lastID"
    }

    /// The highest transaction id this file ever handed out, deleted ones included (`clear`).
    public static let lastIDSetting = "transactions.lastID"

    /// Reads every table of `exportedTables` from one snapshot of the committed file, calling
    /// `body` with up to `pageSize` rows at a time, each table in primary-key order. The file is
    /// opened read-only; `body` may take its time (the daemon's writer is not blocked meanwhile).
    public func export(pageSize: Int = 500,
                       _ body: (ExportedTable, [[ExportedValue]]) throws(StoreError) -> Void) throws(StoreError) {
        precondition(pageSize > 0, "empty pages")
        let reader = try SQLiteDatabase(path: path, readOnly: true)
        try reader.execute("BEGIN")
        defer { try? reader.execute("COMMIT") }
        for table in Self.exportedTables {
            // Table and column names are the constants above, never values.
            let select = try reader.statement(
                "SELECT \(table.columns.joined(separator: ", ")) FROM \(table.name) ORDER BY \(table.key.joined(separator: ", "))")
            defer { select.reset() }
            var page: [[ExportedValue]] = []
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
