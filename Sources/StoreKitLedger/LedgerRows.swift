// The ledger's rows as every backend stores them: the tables of the SQLite file's schema 3 and
// the PostgreSQL schema's same tables (which add an account and a host where a fleet needs
// them). `storekitctl migrate` reads them from one ledger (`Ledger.export`) and writes them into
// another.

public enum LedgerRows {
    /// One value of an exported row.
    public enum Value: Sendable, Equatable {
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

    /// A table as the export reads it: its columns in order, its rows ordered by its primary key.
    public struct Table: Sendable, Equatable {
        public let name: String
        public let columns: [String]
        public let key: [String]

        public init(name: String, columns: [String], key: [String]) {
            self.name = name
            self.columns = columns
            self.key = key
        }
    }

    /// Every table with rows to copy, in the order they are read.
    public static let tables: [Table] = [
        Table(name: "transactions", columns: [
            "id", "original_id", "uid", "app", "product", "quantity", "state", "sequence", "date", "finished",
            "error_code", "error_message", "revocation_date", "revocation_reason", "app_username", "expires_date",
            "payment_key",
        ], key: ["id"]),
        Table(name: "sequences", columns: ["uid", "app", "last"], key: ["uid", "app"]),
        Table(name: "settings", columns: ["key", "value"], key: ["key"]),
        Table(name: "subscriptions", columns: [
            "original_id", "uid", "app", "group_id", "product", "quantity", "app_username", "status", "period_start",
            "expires_date", "auto_renew", "next_product", "offer_periods_left", "grace_end", "retry_end", "due",
            "last_transaction", "renewals",
        ], key: ["original_id"]),
        Table(name: "purchase_requests", columns: [
            "transaction_id", "kind", "uid", "app", "product", "created", "expires",
        ], key: ["transaction_id"]),
        Table(name: "renewals", columns: ["transaction_id"], key: ["transaction_id"]),
    ]

    /// Settings that describe the SQLite file itself (its commit log, the highest id `clear`
    /// deleted), not the ledger: another database has no use for them.
    public static func isFileSetting(_ key: String) -> Bool {
        key.hasPrefix("commitlog.") || key == lastIDSetting
    }

    /// The highest transaction id the file ever handed out, deleted ones included (`clear`).
    public static let lastIDSetting = "transactions.lastID"
}

/// What `Ledger.backup(to:)` wrote.
public struct BackupReport: Sendable, Equatable {
    public let path: String
    public let bytes: Int
    public let pages: Int
    public let transactions: Int
    public let unfinishedTransactions: Int
    /// The highest sequence number of any queue: everything up to it is in the copy.
    public let highestSequence: Int
    public let milliseconds: Int

    public init(path: String, bytes: Int, pages: Int, transactions: Int, unfinishedTransactions: Int,
                highestSequence: Int, milliseconds: Int) {
        self.path = path
        self.bytes = bytes
        self.pages = pages
        self.transactions = transactions
        self.unfinishedTransactions = unfinishedTransactions
        self.highestSequence = highestSequence
        self.milliseconds = milliseconds
    }
}
