import CPostgres
import StoreKitLedger
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
    /// Masks the password of `conninfo` in libpq's messages.
    private let redact: ConnectionSecrets.Redactor
    /// Statements with parameters, prepared once per connection (parsed and planned once):
    /// their names by SQL text. Prepared statements belong to the session, not to a transaction.
    private var prepared: [String: String] = [:]
    /// The database, for messages: never the password.
    let description: String
    /// Round trips made (a statement, or a pipeline of them), for the tests of how many a unit takes.
    private(set) var roundTrips = 0
    /// Counts the connections opened: a new one has a new socket (which may reuse the old number).
    private(set) var generation: UInt64 = 0

    init(conninfo: String) throws(LedgerError) {
        self.conninfo = conninfo
        redact = ConnectionSecrets.Redactor(conninfo)
        description = PostgresConnection.describe(conninfo)
        pq = try LibPQ.loaded()
        try reconnect()
    }

    deinit { if let connection { pq.finish(connection) } }

    var isBroken: Bool { connection.map { pq.status($0) != CONNECTION_OK } ?? true }

    /// Drops the connection (if any) and opens a new one.
    func reconnect() throws(LedgerError) {
        if let connection { pq.finish(connection) }
        connection = nil
        prepared.removeAll()
        deferred.removeAll()
        guard let opened = pq.connectdb(conninfo) else {
            throw LedgerError(.io, path: description, message: "cannot connect: out of memory")
        }
        guard pq.status(opened) == CONNECTION_OK else {
            let message = redact(Self.text(pq.errorMessage(opened)))
            pq.finish(opened)
            throw LedgerError(.io, path: description, message: "cannot connect to PostgreSQL: \(message)")
        }
        // Notices (e.g. "there is no transaction in progress") are not written to stderr.
        _ = pq.setNoticeProcessor(opened, { _, _ in }, nil)
        connection = opened
        generation &+= 1
    }

    func close() {
        if let connection { pq.finish(connection) }
        connection = nil
        deferred.removeAll()
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

    /// The notifications libpq read along with statements' answers, without reading the socket
    /// (no system call): they no longer make the socket readable.
    func bufferedNotifications() -> [String] {
        guard let connection else { return [] }
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
        /// The command tag (`INSERT 0 1`, `COMMIT`, `ROLLBACK`, …).
        var tag: String = ""

        /// The first column of the first row as an integer.
        var firstInt: Int64? { rows.first?.first.flatMap { $0 }.flatMap { Int64($0) } }
    }

    /// Runs `sql` with `parameters` bound to `$1`, `$2`, … (nil: NULL). Statements queued with
    /// `executeLater` go first, in the same round trip.
    @discardableResult
    func execute(_ sql: String, _ parameters: [String?] = []) throws(LedgerError) -> Result {
        guard let connection, pq.status(connection) == CONNECTION_OK else {
            deferred.removeAll()
            throw LedgerError(.io, path: description, message: "no connection to PostgreSQL (it is reconnected at the next unit of work)")
        }
        roundTrips += 1
        if !deferred.isEmpty {
            let statements = deferred + [(sql, parameters)]
            deferred.removeAll()
            return try pipeline(statements, on: connection).last ?? Result(rows: [], changed: 0)
        }
        let name = parameters.isEmpty ? nil : try prepare(sql, parameterCount: parameters.count, on: connection)
        let result = Self.withValues(parameters) { values in
            if let name { pq.execPrepared(connection, name, Int32(parameters.count), values, nil, nil, 0) }
            else { pq.execParams(connection, sql, 0, nil, nil, nil, nil, 0) }
        }
        defer { pq.clear(result) }
        let status = result.map { pq.resultStatus($0) } ?? PGRES_FATAL_ERROR
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK, let result else {
            throw error(result)
        }
        return read(result)
    }

    /// Runs `statements` after those queued with `executeLater`, in one round trip; their results
    /// in order, or the error of the first that failed (what follows it does not run).
    func execute(all statements: [(sql: String, parameters: [String?])]) throws(LedgerError) -> [Result] {
        guard let connection, pq.status(connection) == CONNECTION_OK else {
            deferred.removeAll()
            throw LedgerError(.io, path: description, message: "no connection to PostgreSQL (it is reconnected at the next unit of work)")
        }
        let queued = deferred.count
        let all = deferred + statements
        deferred.removeAll()
        guard !all.isEmpty else { return [] }
        roundTrips += 1
        return Array(try pipeline(all, on: connection).dropFirst(queued))
    }

    /// Sends what `executeLater` queued, if anything, and waits for it: the error of the first
    /// that failed, thrown here.
    func flush() throws(LedgerError) {
        guard !deferred.isEmpty else { return }
        _ = try execute(all: [])
    }

    /// Statements whose results nobody reads (`BEGIN`, `SAVEPOINT`, a notification), sent with
    /// the next `execute`.
    private var deferred: [(sql: String, parameters: [String?])] = []

    /// Queues `sql` to go with the next `execute`, in one pipeline (libpq's pipeline mode): one
    /// round trip for all of them instead of one each. Should it fail, the next `execute` throws
    /// its error, and what was queued after it does not run (PostgreSQL aborts the pipeline).
    func executeLater(_ sql: String, _ parameters: [String?] = []) {
        deferred.append((sql, parameters))
    }

    /// Sends `statements` in one pipeline and reads their results: each one's, or the error of
    /// the first that failed. A connection left in a state it cannot be used in is closed
    /// (`isBroken`; the next unit of work reconnects).
    private func pipeline(_ statements: [(sql: String, parameters: [String?])], on connection: OpaquePointer) throws(LedgerError) -> [Result] {
        // Statements with parameters are prepared first, outside the pipeline (once per connection).
        var names: [String?] = []
        for statement in statements {
            names.append(statement.parameters.isEmpty ? nil
                         : try prepare(statement.sql, parameterCount: statement.parameters.count, on: connection))
        }
        guard pq.enterPipelineMode(connection) == 1 else { throw error(nil) }
        var sent = 0
        for (statement, name) in zip(statements, names) {
            let queued = Self.withValues(statement.parameters) { values in
                if let name { pq.sendQueryPrepared(connection, name, Int32(statement.parameters.count), values, nil, nil, 0) }
                else { pq.sendQueryParams(connection, statement.sql, 0, nil, nil, nil, nil, 0) }
            }
            guard queued == 1 else { break }
            sent += 1
        }
        // Without the sync the server answers nothing, and reading would wait for good.
        guard sent == statements.count, pq.pipelineSync(connection) == 1 else {
            let failure = error(nil)
            close()
            throw failure
        }
        var failure: LedgerError?
        var failedAt: Int?
        var results: [Result] = []
        results.reserveCapacity(sent)
        for index in 0..<sent {
            guard let result = pq.getResult(connection) else {
                failure = failure ?? error(nil)
                break
            }
            let status = pq.resultStatus(result)
            if status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK {
                results.append(read(result))
            } else if status != PGRES_PIPELINE_ABORTED {
                if failure == nil { failedAt = index }
                failure = failure ?? error(result)
            }
            pq.clear(result)
            // The NULL that ends this statement's results (or, on a lost connection, the rest).
            while let more = pq.getResult(connection) { pq.clear(more) }
        }
        if failure == nil || pq.status(connection) == CONNECTION_OK {
            let sync = pq.getResult(connection)
            if sync.map({ pq.resultStatus($0) }) != PGRES_PIPELINE_SYNC { failure = failure ?? error(sync) }
            pq.clear(sync)
        }
        if pq.exitPipelineMode(connection) != 1 {
            let lost = failure ?? LedgerError(.io, path: description, message: "PostgreSQL connection lost: \(redact(Self.text(pq.errorMessage(connection)).trimmingSuffix()))")
            close()
            throw lost
        }
        if var failure {
            // A statement before the last failed, and the server said so (not a lost connection,
            // after which the server may have run everything): the last (a unit's COMMIT) did not run.
            failure.beforeCommit = failure.code != .io && failedAt.map { $0 < sent - 1 } ?? false
            throw failure
        }
        return results
    }

    /// `body` with `values` as NUL-terminated C strings (a text is cut at its first NUL, as
    /// SQLite's is); nil stays NULL.
    private static func withValues<T>(_ values: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> T) -> T {
        let copies: [UnsafePointer<CChar>?] = values.map { $0.flatMap { UnsafePointer(strdup($0)) } }
        defer { for copy in copies { free(UnsafeMutablePointer(mutating: copy)) } }
        return copies.withUnsafeBufferPointer { body($0.baseAddress) }
    }

    /// The rows (text values, nil for NULL) and the changed-row count of a successful result.
    private func read(_ result: OpaquePointer) -> Result {
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
        return Result(rows: rows, changed: Int(Self.text(pq.cmdTuples(result))) ?? 0, tag: Self.text(pq.cmdStatus(result)))
    }

    /// The name `sql` is prepared under on this connection, preparing it the first time.
    private func prepare(_ sql: String, parameterCount: Int, on connection: OpaquePointer) throws(LedgerError) -> String {
        if let name = prepared[sql] { return name }
        let name = "s\(prepared.count + 1)"
        let result = pq.prepare(connection, name, sql, Int32(parameterCount), nil)
        defer { pq.clear(result) }
        guard let result, pq.resultStatus(result) == PGRES_COMMAND_OK else { throw error(result) }
        prepared[sql] = name
        return name
    }

    /// The SQLSTATE of a failed statement, as a typed store error.
    private func error(_ result: OpaquePointer?) -> LedgerError {
        let lost = connection.map { pq.status($0) != CONNECTION_OK } ?? true
        let message = result.map { Self.text(pq.resultErrorMessage($0)) }.flatMap { $0.isEmpty ? nil : $0 }
            ?? connection.map { Self.text(pq.errorMessage($0)) } ?? "no connection"
        let state = result.flatMap { pq.resultErrorField($0, Self.sqlStateField) }.map { Self.text($0) } ?? ""
        let trimmed = redact(message.trimmingSuffix())
        // A failed statement without a SQLSTATE is libpq's own error (the server sends one with
        // every error): the connection broke, although PQstatus may not say so yet ("server
        // closed the connection unexpectedly" while PostgreSQL crashes).
        let failedWithoutState = state.isEmpty && (result.map { pq.resultStatus($0) == PGRES_FATAL_ERROR } ?? true)
        if lost || failedWithoutState || state.hasPrefix("08") || state == "57P01" || state == "57P02" || state == "57P03" {
            return LedgerError(.io, path: description, message: "PostgreSQL connection lost: \(trimmed)")
        }
        switch state {
        case "53100": return LedgerError(.full, path: description, message: trimmed)
        case "40001", "40P01", "55P03": return LedgerError(.busy, path: description, message: trimmed)
        case "23505": return LedgerError(.other(Self.uniqueViolation), path: description, message: trimmed)
        default: return LedgerError(.other(0), path: description, message: state.isEmpty ? trimmed : "\(trimmed) (SQLSTATE \(state))")
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
        do throws(LedgerError) { pq = try LibPQ.loaded() } catch { return "\(error.path): \(error.message)" }
        var message: UnsafeMutablePointer<CChar>?
        guard let options = pq.conninfoParse(conninfo, &message) else {
            defer { if let message { pq.freemem(message) } }
            return ConnectionSecrets.redacting(message.map { String(cString: $0).trimmingSuffix() } ?? "not a connection string",
                                               of: conninfo)
        }
        pq.conninfoFree(options)
        return nil
    }

    /// Whether libpq parses `conninfo` (false too when libpq cannot be loaded).
    static func parses(_ conninfo: String) -> Bool {
        guard let pq = try? LibPQ.loaded(), let options = pq.conninfoParse(conninfo, nil) else { return false }
        pq.conninfoFree(options)
        return true
    }

    /// The keywords `conninfo` sets and their values, as libpq parses them (empty when it cannot).
    static func options(_ conninfo: String) -> [String: String] {
        var values: [String: String] = [:]
        if let pq = try? LibPQ.loaded(), let options = pq.conninfoParse(conninfo, nil) {
            var option = options
            while let keyword = option.pointee.keyword {
                if let value = option.pointee.val { values[String(cString: keyword)] = String(cString: value) }
                option += 1
            }
            pq.conninfoFree(options)
        }
        return values
    }

    /// "PostgreSQL database NAME on HOST" from the parts of `conninfo`, never its password.
    static func describe(_ conninfo: String) -> String {
        let values = options(conninfo)
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
