import StoreKitWire

/// Transaction rows held in memory: new rows until they are written into the open SQLite
/// transaction, and rows written lately, so that the request that follows a purchase does not
/// wait for SQLite.
///
/// A purchase inserts a row and finishes it a few milliseconds later. Both changes are durable in
/// the commit log at once (their statements are recorded as if they had run); SQLite only needs
/// the row as it ends up: the serving loop writes it once it has been held 25 ms
/// (`SQLiteLedger.writeRows`), or the next `save()` does. Written then, a consumable's row
/// goes into the table and its indexes once, finished, instead of being inserted into four
/// b-trees and updated again.
///
/// A written row stays here, as SQLite has it, for `keepWritten` ms (at most `maximumWritten`
/// rows). A finish that comes later than 25 ms (a client that is slow to deliver, or rate-limited)
/// then finds the row here and changes it here, like a new one: it needs no statement, so it does
/// not wait while a save's `COMMIT` has the connection (Saver.swift). The changed row is
/// written again (an `UPDATE`) by the same rules as a new one. Every statement that changes a row
/// in SQLite directly forgets the written copy first (`SQLiteLedger.prepareToChangeInSQLite`).
///
/// Each row is in one of three states: new (here only), changed (in SQLite, newer here) or
/// written (the same in both). Every query of the `transactions` table other than by id or by
/// payment key writes the new and changed rows first. What a unit of work or a request did here
/// is journaled, so that undoing it in SQLite (`ROLLBACK TO`) is matched here, including rows
/// written into SQLite within what is rolled back.
struct HeldRows {
    struct Row {
        var record: TransactionRecord
        /// Its payment key as SQLite stores it, if it has one.
        let key: StoredPaymentKey?
        /// Since when (monotonic ms) it waits to be written; once written, since when it is.
        var since: Int64
        var state = State.new

        enum State {
            /// Here only: written with an INSERT.
            case new
            /// In SQLite, newer here: written again with an UPDATE.
            case changed
            /// The same here and in SQLite.
            case written
        }

        var isWritten: Bool { state == .written }

        init(record: TransactionRecord, key: StoredPaymentKey?, heldSince: Int64) {
            self.record = record
            self.key = key
            since = heldSince
        }
    }

    private enum Change {
        case added(UInt64)
        case changed(Row)
        case written(Row)
    }

    /// How long (ms) a written row is kept, and how many are kept at most.
    static let keepWritten: Int64 = 1_000
    static let maximumWritten = 4_096

    private var rows: [UInt64: Row] = [:]
    private var byPaymentKey: [StoredPaymentKey: UInt64] = [:]
    /// The ids of the rows to write (new or changed).
    private var unwritten: Set<UInt64> = []
    /// Ids in the order they came to wait to be written, from `firstArrival` on; ids written
    /// since are skipped.
    private var arrivals: [(id: UInt64, since: Int64)] = []
    private var firstArrival = 0
    /// Written rows in the order they were written, from `firstWritten` on (for forgetting them);
    /// ids changed or forgotten since are skipped.
    private var writtenOrder: [(id: UInt64, since: Int64)] = []
    private var firstWritten = 0
    private var writtenCount = 0
    /// Changes since the unit of work began, while one is open.
    private var journal: [Change] = []
    private var marks: [Int] = []
    private var journaling = false

    /// Whether no row waits to be written.
    var isEmpty: Bool { unwritten.isEmpty }
    /// The rows that wait to be written.
    var count: Int { unwritten.count }
    /// The written rows kept.
    var writtenRowCount: Int { writtenCount }

    /// The largest id held (ids are handed out in order, so also the latest).
    var highestID: UInt64? { rows.keys.max() }

    func row(id: UInt64) -> Row? { rows[id] }

    func row(key: StoredPaymentKey) -> Row? {
        byPaymentKey[key].flatMap { rows[$0] }
    }

    /// The ids of the rows to write, oldest first: the order they are written in.
    var allIDs: [UInt64] { unwritten.sorted() }

    /// The ids of the rows to write that wait since `time` or earlier, in the order they came to
    /// wait. They are not asked for again: written, or (when a write fails) left for `allIDs`.
    mutating func takeIDs(heldSince time: Int64) -> [UInt64] {
        var ids: [UInt64] = []
        while firstArrival < arrivals.count, arrivals[firstArrival].since <= time {
            let id = arrivals[firstArrival].id
            if unwritten.contains(id) { ids.append(id) }
            firstArrival += 1
        }
        if firstArrival > 1024 && firstArrival * 2 > arrivals.count {
            arrivals.removeSubrange(..<firstArrival)
            firstArrival = 0
        }
        return ids
    }

    mutating func add(_ row: Row) {
        precondition(rows[row.record.id] == nil, "transaction \(row.record.id) is held already")
        place(row)
        if journaling { journal.append(.added(row.record.id)) }
    }

    /// Changes a held row's record (not its id, queue or payment key); a written row waits to be
    /// written again from `time` on.
    mutating func update(id: UInt64, at time: Int64, _ change: (inout TransactionRecord) -> Void) {
        guard var row = rows[id] else { preconditionFailure("transaction \(id) is not held") }
        if journaling { journal.append(.changed(row)) }
        change(&row.record)
        precondition(row.record.id == id, "a held row keeps its id")
        if row.isWritten {
            row.state = .changed
            row.since = time
        }
        place(row)
    }

    /// Notes that SQLite's transaction now has the row as it is here (written at `time`).
    mutating func noteWritten(id: UInt64, at time: Int64) {
        guard var row = rows[id], !row.isWritten else { return }
        if journaling { journal.append(.written(row)) }
        row.state = .written
        row.since = time
        place(row)
    }

    /// Forgets the written copy of `id` (nil: of every row): a statement is about to change it in
    /// SQLite. Rows that wait to be written stay.
    mutating func forgetWritten(id: UInt64? = nil) {
        if let id {
            if rows[id]?.isWritten == true { remove(id) }
            return
        }
        guard writtenCount > 0 else { return }
        for (id, row) in rows where row.isWritten { remove(id) }
    }

    /// Forgets the written rows kept since before `time`, and the oldest beyond
    /// `maximumWritten`. Between units of work only.
    mutating func forgetWritten(before time: Int64) {
        precondition(!journaling, "written rows forgotten inside a unit of work")
        while firstWritten < writtenOrder.count, writtenOrder[firstWritten].since < time || writtenCount > Self.maximumWritten {
            let (id, since) = writtenOrder[firstWritten]
            if let row = rows[id], row.isWritten, row.since == since { remove(id) }
            firstWritten += 1
        }
        if firstWritten > 1024 && firstWritten * 2 > writtenOrder.count {
            writtenOrder.removeSubrange(..<firstWritten)
            firstWritten = 0
        }
    }

    /// Forgets every row: SQLite lost its transaction, and the commit log brings them back.
    mutating func removeAll() {
        rows.removeAll()
        byPaymentKey.removeAll()
        unwritten.removeAll()
        arrivals.removeAll()
        firstArrival = 0
        writtenOrder.removeAll()
        firstWritten = 0
        writtenCount = 0
        journal.removeAll()
        marks.removeAll()
    }

    /// Puts `row` in its place, in whatever state it is.
    private mutating func place(_ row: Row) {
        let id = row.record.id
        let before = rows.updateValue(row, forKey: id)
        if before?.isWritten == true { writtenCount -= 1 }
        if let key = row.key { byPaymentKey[key] = id }
        if row.isWritten {
            writtenCount += 1
            unwritten.remove(id)
            writtenOrder.append((id, row.since))
        } else if unwritten.insert(id).inserted || before?.since != row.since {
            arrivals.append((id, row.since))
        }
    }

    private mutating func remove(_ id: UInt64) {
        guard let row = rows.removeValue(forKey: id) else { return }
        if let key = row.key, byPaymentKey[key] == id { byPaymentKey[key] = nil }
        if row.isWritten { writtenCount -= 1 }
        unwritten.remove(id)
        if unwritten.isEmpty {
            arrivals.removeAll(keepingCapacity: true)
            firstArrival = 0
        }
    }

    // MARK: Units of work and savepoints

    mutating func beginUnit() {
        journal.removeAll(keepingCapacity: true)
        marks.removeAll()
        journaling = true
    }

    /// The unit of work is kept: nothing of it is undone any more.
    mutating func endUnit() {
        journal.removeAll(keepingCapacity: true)
        marks.removeAll()
        journaling = false
    }

    /// Undoes the whole unit of work.
    mutating func rollBackUnit() {
        undo(to: 0)
        endUnit()
    }

    mutating func beginSavepoint() {
        marks.append(journal.count)
    }

    mutating func releaseSavepoint() {
        _ = marks.popLast()
    }

    mutating func rollBackSavepoint() {
        guard let mark = marks.popLast() else { return }
        undo(to: mark)
    }

    private mutating func undo(to mark: Int) {
        var restored = false
        defer {
            // Rows waiting again go back to their place in time, not behind younger ones.
            if restored {
                arrivals = unwritten.compactMap { id in rows[id].map { (id, $0.since) } }
                    .sorted { ($0.since, $0.id) < ($1.since, $1.id) }
                firstArrival = 0
            }
        }
        while journal.count > mark {
            switch journal.removeLast() {
            case .added(let id):
                remove(id)
            case .changed(let row), .written(let row):
                // SQLite undid the statements with the rest: the row is as it was then.
                place(row)
                restored = true
            }
        }
    }
}

/// A payment key as SQLite stores and compares it: the bytes of its queue's app and of the key up
/// to the first NUL (text is bound with `sqlite3_bind_text(-1)`), compared byte for byte (Swift's
/// `String ==` would equate canonically equivalent keys that SQLite tells apart).
struct StoredPaymentKey: Hashable {
    let uid: UInt32
    let app: [UInt8]
    let key: [UInt8]

    init(uid: UInt32, app: String, key: String) {
        self.uid = uid
        self.app = Self.stored(app)
        self.key = Self.stored(key)
    }

    static func stored(_ text: String) -> [UInt8] { Array(text.utf8.prefix { $0 != 0 }) }

    /// The key as the text SQLite stores.
    var text: String { String(decoding: key, as: UTF8.self) }

    /// The bytes in bulk: the synthesized hash fed them to the hasher one at a time.
    func hash(into hasher: inout Hasher) {
        hasher.combine(uid)
        hasher.combine(app.count)
        app.withUnsafeBytes { hasher.combine(bytes: $0) }
        key.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}

extension TransactionRecord {
    /// The record as SQLite keeps it: every text up to its first NUL.
    var storedForm: TransactionRecord {
        func cut(_ text: String) -> String {
            text.utf8.contains(0) ? String(decoding: StoredPaymentKey.stored(text), as: UTF8.self) : text
        }
        var record = self
        record.app = cut(app)
        record.productID = cut(productID)
        record.errorMessage = errorMessage.map(cut)
        record.applicationUsername = applicationUsername.map(cut)
        return record
    }
}
