import CPostgres
import StoreKitStore
#if canImport(Glibc)
import Glibc
#endif

/// One libpq connection, used by one thread (the serving loop), blocking.
///
/// Every statement goes through `execute`, with its values as bound parameters (`$1`, `$2`, …
/// in text form): no value is ever spliced into SQL. A connection that broke (PostgreSQL
/// stopped or restarted) is said by `isBroken`; `reconnect()` tries again.
final class PostgresConnection {
    private var connection: OpaquePointer?
    private let pq: LibPQ
    private let conninfo: String
    /// Statements with parameters, prepared once per connection (parsed and planned once):
    /// their names by SQL text. Prepared statements belong to the session, not to a transaction.
    private var prepared: [String: String] = [:]
    /// The database, for messages: never the password.
    let description: String

    init(conninfo: String) throws(StoreError) {
        self.conninfo = conninfo
        description = PostgresConnection.describe(conninfo)
        pq = try LibPQ.loaded()
        try reconnect()
    }

    deinit { if let connection { pq.finish(connection) } }

    var isBroken: Bool { connection.map { pq.status($0) != CONNECTION_OK } ?? true }

    /// Drops the connection (if any) and opens a new one.
    func reconnect() throws(StoreError) {
        if let connection { pq.finish(connection) }
        connection = nil
        prepared.removeAll()
        guard let opened = pq.connectdb(conninfo) else {
            throw StoreError(.io, path: description, message: "cannot connect: out of memory")
        }
        guard pq.status(opened) == CONNECTION_OK else {
            let message = Self.text(pq.errorMessage(opened))
            pq.finish(opened)
            throw StoreError(.io, path: description, message: "cannot connect to PostgreSQL: \(message)")
        }
        // Notices (e.g. "there is no transaction in progress") are not written to stderr.
        _ = pq.setNoticeProcessor(opened, { _, _ in }, nil)
        connection = opened
    }

    func close() {
        if let connection { pq.finish(connection) }
        connection = nil
    }

    /// The connection's socket, for the serving loop's epoll; -1 without a connection.
    var socket: Int32 { connection.map { pq.socket($0) } ?? -1 }

    /// Reads what the server sent without blocking, and returns the payloads of the
    /// notifications that arrived; nil when the connection is lost.
    func notifications() -> [String]? {
        guard let connection, pq.consumeInput(connection) == 1, pq.status(connection) == CONNECTION_OK else { return nil }
        var payloads: [String] = []
        while let notification = pq.notifies(connection) {
            payloads.append(Self.text(notification.pointee.extra))
            pq.freemem(notification)
        }
        return payloads
    }

    /// What a statement returned: its rows (text values, nil for NULL) and the rows it changed.
    struct Result {
        var rows: [[String?]]
        var changed: Int

        /// The first column of the first row as an integer.
        var firstInt: Int64? { rows.first?.first.flatMap { $0 }.flatMap { Int64($0) } }
    }

    /// Runs `sql` with `parameters` bound to `$1`, `$2`, … (nil: NULL).
    @discardableResult
    func execute(_ sql: String, _ parameters: [String?] = []) throws(StoreError) -> Result {
        guard let connection, pq.status(connection) == CONNECTION_OK else {
            throw StoreError(.io, path: description, message: "no connection to PostgreSQL (it is reconnected at the next unit of work)")
        }
        // Text-format values, NUL-terminated copies (a text is cut at its first NUL, as SQLite's is).
        let copies: [UnsafePointer<CChar>?] = parameters.map { $0.flatMap { UnsafePointer(strdup($0)) } }
        defer { for copy in copies { free(UnsafeMutablePointer(mutating: copy)) } }
        let result: OpaquePointer?
        if parameters.isEmpty {
            result = pq.execParams(connection, sql, 0, nil, nil, nil, nil, 0)
        } else {
            let name = try prepare(sql, parameterCount: parameters.count, on: connection)
            result = pq.execPrepared(connection, name, Int32(copies.count), copies, nil, nil, 0)
        }
        defer { pq.clear(result) }
        let status = result.map { pq.resultStatus($0) } ?? PGRES_FATAL_ERROR
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            throw error(result)
        }
        guard let result else { return Result(rows: [], changed: 0) }
        var rows: [[String?]] = []
        let count = pq.ntuples(result), columns = pq.nfields(result)
        rows.reserveCapacity(Int(count))
        for row in 0..<count {
            var values: [String?] = []
            values.reserveCapacity(Int(columns))
            for column in 0..<columns {
                values.append(pq.getisnull(result, row, column) == 1 ? nil : Self.text(pq.getvalue(result, row, column)))
            }
            rows.append(values)
        }
        return Result(rows: rows, changed: Int(Self.text(pq.cmdTuples(result))) ?? 0)
    }

    /// The name `sql` is prepared under on this connection, preparing it the first time.
    private func prepare(_ sql: String, parameterCount: Int, on connection: OpaquePointer) throws(StoreError) -> String {
        if let name = prepared[sql] { return name }
        let name = "s\(prepared.count + 1)"
        let result = pq.prepare(connection, name, sql, Int32(parameterCount), nil)
        defer { pq.clear(result) }
        guard let result, pq.resultStatus(result) == PGRES_COMMAND_OK else { throw error(result) }
        prepared[sql] = name
        return name
    }

    /// The SQLSTATE of a failed statement, as a typed store error.
    private func error(_ result: OpaquePointer?) -> StoreError {
        let lost = connection.map { pq.status($0) != CONNECTION_OK } ?? true
        let message = result.map { Self.text(pq.resultErrorMessage($0)) }.flatMap { $0.isEmpty ? nil : $0 }
            ?? connection.map { Self.text(pq.errorMessage($0)) } ?? "no connection"
        let state = result.flatMap { pq.resultErrorField($0, Self.sqlStateField) }.map { Self.text($0) } ?? ""
        let trimmed = message.trimmingSuffix()
        // A failed statement without a SQLSTATE is libpq's own error (the server sends one with
        // every error): the connection broke, although PQstatus may not say so yet ("server
        // closed the connection unexpectedly" while PostgreSQL crashes).
        let failedWithoutState = state.isEmpty && (result.map { pq.resultStatus($0) == PGRES_FATAL_ERROR } ?? true)
        if lost || failedWithoutState || state.hasPrefix("08") || state == "57P01" || state == "57P02" || state == "57P03" {
            return StoreError(.io, path: description, message: "PostgreSQL connection lost: \(trimmed)")
        }
        switch state {
        case "53100": return StoreError(.full, path: description, message: trimmed)
        case "40001", "40P01", "55P03": return StoreError(.busy, path: description, message: trimmed)
        case "23505": return StoreError(.other(Self.uniqueViolation), path: description, message: trimmed)
        default: return StoreError(.other(0), path: description, message: state.isEmpty ? trimmed : "\(trimmed) (SQLSTATE \(state))")
        }
    }

    /// `PG_DIAG_SQLSTATE` ('C').
    static let sqlStateField: Int32 = 67
    /// SQLite's `SQLITE_CONSTRAINT_UNIQUE`, the code a duplicate gets from either backend.
    static let uniqueViolation: Int32 = 19 | (8 << 8)

    static func text(_ pointer: UnsafePointer<CChar>?) -> String {
        pointer.map { String(cString: $0) } ?? ""
    }

    // MARK: Connection strings

    /// Why libpq cannot use `conninfo` (a `postgresql://` URI or `key=value` pairs), or why libpq
    /// cannot be loaded; nil when it can.
    static func problem(with conninfo: String) -> String? {
        let pq: LibPQ
        do throws(StoreError) { pq = try LibPQ.loaded() } catch { return "\(error.path): \(error.message)" }
        var message: UnsafeMutablePointer<CChar>?
        guard let options = pq.conninfoParse(conninfo, &message) else {
            defer { if let message { pq.freemem(message) } }
            return message.map { String(cString: $0).trimmingSuffix() } ?? "not a connection string"
        }
        pq.conninfoFree(options)
        return nil
    }

    /// "PostgreSQL database NAME on HOST" from the parts of `conninfo`, never its password.
    static func describe(_ conninfo: String) -> String {
        var values: [String: String] = [:]
        if let pq = try? LibPQ.loaded(), let options = pq.conninfoParse(conninfo, nil) {
            var option = options
            while let keyword = option.pointee.keyword {
                if let value = option.pointee.val { values[String(cString: keyword)] = String(cString: value) }
                option += 1
            }
            pq.conninfoFree(options)
        }
        let database = values["dbname"] ?? values["user"] ?? "(default)"
        let host = values["host"] ?? values["hostaddr"] ?? "the default socket"
        return "PostgreSQL database \(database) on \(host)"
    }
}

extension String {
    func trimmingSuffix() -> String {
        var text = self
        while let last = text.last, last.isWhitespace { text.removeLast() }
        return text
    }
}
