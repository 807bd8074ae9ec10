/// Why the ledger could not do what was asked. Messages name the database (a file, or a
/// PostgreSQL database without its password).
public struct LedgerError: Error, CustomStringConvertible, Sendable, Equatable {
    public enum Code: Sendable, Equatable {
        case full
        case corrupt
        case notADatabase
        case foreignDatabase
        case unsupportedSchema(found: Int, supported: Int)
        case readOnly
        case io
        case busy
        /// The ledger does not do this (a database server's ledger is not backed up by the daemon).
        case unsupported
        case other(Int32)
    }

    public let code: Code
    public let path: String
    public let message: String
    /// A unit of work's `commit()` failed at a statement it sent before its `COMMIT` (a deferred
    /// write): the unit was certainly not committed and may be run again, request by request.
    public var beforeCommit = false

    public init(_ code: Code, path: String, message: String) {
        self.code = code
        self.path = path
        self.message = message
    }

    public var description: String { "\(path): \(message)" }
}
