import CSQLite
import StoreKitLedger
import StoreKitPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

// The commit log's record format: a unit of work's statements recorded as templates and bound
// values while they run, and replayed into SQLite after a crash.

extension SQLiteDatabase {
    /// Records a run of `sql` with `values` bound to its parameters 1, 2, … as if it had run,
    /// without binding or running it: for a change applied to the database later (`HeldRows`).
    /// With the statement prepared already, it does not call into SQLite: it may run while the
    /// connection is lent. (The unit of work's `commit()` checks that its transaction is alive.)
    func recordWithoutRunning(_ sql: String, _ values: [BoundValue]) throws(LedgerError) {
        guard recording else { return }
        // Only the statement's identity is needed (its template number): it is neither reset nor
        // bound, and a Statement taken from the cache for the same SQL keeps its bindings.
        let statement = try cachedHandle(sql)
        guard recordable(statement, values.count), let template = template(of: statement) else {
            // Past what a record can number: bound and recorded with its values inlined.
            try prepareForUse()
            if boundHandle == statement { boundHandle = nil }   // reset below: what was bound to it is gone
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
            Statement(handle: statement, database: self).bind(values)
            recordExpanded(statement)
            sqlite3_reset(statement)
            return
        }
        Self.appendRun(of: template, values.indices.lazy.map { (Int32($0 + 1), values[$0]) }, to: &recorded)
    }

    /// Starts recording a unit of work's changes (into an empty `recorded`).
    func startRecording() {
        recorded.removeAll(keepingCapacity: true)
        templateIndex.removeAll(keepingCapacity: true)
        templateOrder.removeAll(keepingCapacity: true)
        boundHandle = nil
        recordingFailed = false
        recording = true
    }

    func stopRecording() {
        recording = false
        boundHandle = nil
    }

    /// Runs `body` without recording what it changes: statements that apply changes recorded
    /// already (held rows written into the transaction).
    func unrecorded<T>(_ body: () throws(LedgerError) -> T) throws(LedgerError) -> T {
        let was = recording
        recording = false
        boundHandle = nil
        defer { recording = was }
        return try body()
    }

    /// Where the recording stands, to undo what a request that is rolled back recorded.
    var recordingMark: (bytes: Int, templates: Int) { (recorded.count, templateOrder.count) }

    func rollBackRecording(to mark: (bytes: Int, templates: Int)) {
        recorded.removeSubrange(mark.bytes...)
        for handle in templateOrder[mark.templates...] { templateIndex[handle] = nil }
        templateOrder.removeSubrange(mark.templates...)
    }

    func record(_ statement: OpaquePointer) {
        guard boundHandle == statement, recordable(statement, boundValues.count), let template = template(of: statement) else {
            recordExpanded(statement)
            return
        }
        Self.appendRun(of: template, boundValues.lazy.map { ($0.index, $0.value) }, to: &recorded)
    }

    /// Whether a run of `statement` with `count` bound values fits a tag-2 entry: parameter
    /// numbers are one byte, the count two.
    func recordable(_ statement: OpaquePointer, _ count: Int) -> Bool {
        let parameters = statementInfo[statement]?.parameters ?? sqlite3_bind_parameter_count(statement)
        return parameters <= Int32(UInt8.max) && count < Int(UInt16.max)
    }

    /// The record's number for `statement`'s SQL, which is written into the record (tag 1) the
    /// first time; nil when a record has as many templates as it can number.
    func template(of statement: OpaquePointer) -> UInt16? {
        if let known = templateIndex[statement] { return known }
        guard templateOrder.count < Int(UInt16.max), var sql = statementInfo[statement]?.sql else { return nil }
        let template = UInt16(templateOrder.count)
        templateIndex[statement] = template
        templateOrder.append(statement)
        recorded.append(1)
        sql.withUTF8 { Self.appendBytes(UnsafeRawBufferPointer($0), to: &recorded) }
        return template
    }

    /// One run of a template (tag 2). Written through one `inout` access: a unit of work records
    /// dozens of bytes per statement.
    static func appendRun<Values: Collection<(Int32, BoundValue)>>(
        of template: UInt16, _ values: Values, to recorded: inout [UInt8]
    ) {
        recorded.append(2)
        append16(template, to: &recorded)
        append16(UInt16(values.count), to: &recorded)
        for (index, value) in values {
            recorded.append(UInt8(truncatingIfNeeded: index))
            switch value {
            case .null:
                recorded.append(0)
            case .integer(let number):
                recorded.append(1)
                withUnsafeBytes(of: number.littleEndian) { recorded.append(contentsOf: $0) }
            case .text(var text):
                recorded.append(2)
                // sqlite3_bind_text(-1) stored the text up to its first NUL: record the same.
                text.withUTF8 { utf8 in
                    let end = utf8.firstIndex(of: 0) ?? utf8.count
                    appendBytes(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(utf8)[..<end]), to: &recorded)
                }
            }
        }
    }

    func recordExpanded(_ statement: OpaquePointer) {
        guard let sql = sqlite3_expanded_sql(statement) else {
            // Out of memory: an unrecordable change must not be acknowledged.
            recordingFailed = true
            return
        }
        defer { sqlite3_free(sql) }
        recorded.append(3)
        Self.appendBytes(UnsafeRawBufferPointer(start: sql, count: strlen(sql)), to: &recorded)
    }

    private static func appendBytes(_ bytes: UnsafeRawBufferPointer, to recorded: inout [UInt8]) {
        withUnsafeBytes(of: UInt32(bytes.count).littleEndian) { recorded.append(contentsOf: $0) }
        recorded.append(contentsOf: bytes)
    }

    private static func append16(_ value: UInt16, to recorded: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { recorded.append(contentsOf: $0) }
    }

    /// Throws when the connection has no open transaction (SQLite rolled it back by itself).
    func requireTransaction() throws(LedgerError) {
        guard sqlite3_get_autocommit(handle) == 0 else {
            throw LedgerError(.io, path: path, message: "SQLite rolled the transaction back after an error")
        }
    }

    /// Runs statements recorded while `recording`, in order.
    func replay(_ recorded: [UInt8]) throws(LedgerError) {
        var reader = RecordReader(bytes: recorded)
        var templates: [String] = []
        let malformed = LedgerError(.corrupt, path: path, message: "a commit-log record is malformed")
        while !reader.atEnd {
            guard let tag = reader.byte() else { throw malformed }
            switch tag {
            case 1:
                guard let sql = reader.text() else { throw malformed }
                templates.append(sql)
            case 2:
                guard let template = reader.uint16(), Int(template) < templates.count, let count = reader.uint16() else {
                    throw malformed
                }
                let statement = try self.statement(templates[Int(template)])
                for _ in 0..<count {
                    guard let index = reader.byte(), let type = reader.byte() else { throw malformed }
                    switch type {
                    case 0: statement.bind(Int32(index), Optional<Int64>.none)
                    case 1:
                        guard let number = reader.int64() else { throw malformed }
                        statement.bind(Int32(index), number)
                    case 2:
                        guard let text = reader.text() else { throw malformed }
                        statement.bind(Int32(index), text)
                    default: throw malformed
                    }
                }
                try statement.run()
            case 3:
                guard let sql = reader.text() else { throw malformed }
                try execute(sql)
            default:
                throw malformed
            }
        }
    }
}

/// Reads a recorded unit of work; nil past its end.
struct RecordReader {
    let bytes: [UInt8]
    var offset = 0

    var atEnd: Bool { offset >= bytes.count }

    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func little<T: FixedWidthInteger>(_: T.Type) -> T? {
        let size = MemoryLayout<T>.size
        guard offset + size <= bytes.count else { return nil }
        defer { offset += size }
        return bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
    }

    mutating func uint16() -> UInt16? { little(UInt16.self) }
    mutating func int64() -> Int64? { little(Int64.self) }

    mutating func text() -> String? {
        guard let count = little(UInt32.self).map(Int.init), offset + count <= bytes.count else { return nil }
        defer { offset += count }
        return String(decoding: bytes[offset..<offset + count], as: UTF8.self)
    }
}
