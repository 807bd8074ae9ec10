import StoreKitWire

/// New transaction rows held in memory until they are written into the open SQLite transaction.
///
/// A purchase inserts a row and finishes it a few milliseconds later. Both changes are durable in
/// the commit log at once (their statements are recorded as if they had run); SQLite only needs
/// the row as it ends up: the serving loop writes it once it has been held 25 ms
/// (`TransactionStore.writeRows`), or the next `save()` does. Written then, a consumable's row
/// goes into the table and its indexes once, finished, instead of being inserted into four
/// b-trees and updated again. Every other query of the `transactions` table writes the pending
/// rows first.
///
/// Each row is in exactly one place: here, or in the SQLite transaction. What a unit of work or
/// a request did here is journaled, so that undoing it in SQLite (`ROLLBACK TO`) is matched here,
/// including rows written into SQLite within what is rolled back.
struct HeldRows {
    struct Row {
        var record: TransactionRecord
        /// Its payment key as SQLite stores it, if it has one.
        let key: StoredPaymentKey?
        /// When it was added (monotonic ms).
        let heldSince: Int64
    }

    private enum Change {
        case added(UInt64)
        case changed(Row)
        case written(Row)
    }

    private var rows: [UInt64: Row] = [:]
    private var byPaymentKey: [StoredPaymentKey: UInt64] = [:]
    /// Ids in the order they were added, from `firstArrival` on; ids written since are skipped.
    private var arrivals: [(id: UInt64, since: Int64)] = []
    private var firstArrival = 0
    /// Changes since the unit of work began, while one is open.
    private var journal: [Change] = []
    private var marks: [Int] = []
    private var journaling = false

    var isEmpty: Bool { rows.isEmpty }
    var count: Int { rows.count }

    /// The largest id held (ids are handed out in order, so also the latest).
    var highestID: UInt64? { rows.keys.max() }

    func row(id: UInt64) -> Row? { rows[id] }

    func row(key: StoredPaymentKey) -> Row? {
        byPaymentKey[key].flatMap { rows[$0] }
    }

    /// The ids of all rows, oldest first: the order they are written in.
    var allIDs: [UInt64] { rows.keys.sorted() }

    /// The ids of the rows held since `time` or earlier, in the order they were added. They are
    /// not asked for again: written, or (when a write fails) left for `allIDs`.
    mutating func takeIDs(heldSince time: Int64) -> [UInt64] {
        var ids: [UInt64] = []
        while firstArrival < arrivals.count, arrivals[firstArrival].since <= time {
            let id = arrivals[firstArrival].id
            if rows[id] != nil { ids.append(id) }
            firstArrival += 1
        }
        if firstArrival > 1024 && firstArrival * 2 > arrivals.count {
            arrivals.removeSubrange(..<firstArrival)
            firstArrival = 0
        }
        return ids
    }

    mutating func add(_ row: Row) {
        precondition(rows[row.record.id] == nil, "transaction \(row.record.id) is pending already")
        hold(row)
        if journaling { journal.append(.added(row.record.id)) }
    }

    private mutating func hold(_ row: Row) {
        rows[row.record.id] = row
        if let key = row.key { byPaymentKey[key] = row.record.id }
        arrivals.append((row.record.id, row.heldSince))
    }

    /// Changes a held row's record (not its id, queue or payment key).
    mutating func update(id: UInt64, _ change: (inout TransactionRecord) -> Void) {
        guard var row = rows[id] else { preconditionFailure("transaction \(id) is not pending") }
        if journaling { journal.append(.changed(row)) }
        change(&row.record)
        precondition(row.record.id == id, "a pending row keeps its id")
        rows[id] = row
    }

    /// Forgets a row that is now in the SQLite transaction.
    mutating func noteWritten(id: UInt64) {
        guard let row = rows.removeValue(forKey: id) else { return }
        if let key = row.key { byPaymentKey[key] = nil }
        if journaling { journal.append(.written(row)) }
        if rows.isEmpty {
            arrivals.removeAll(keepingCapacity: true)
            firstArrival = 0
        }
    }

    /// Forgets every row: SQLite lost its transaction, and the commit log brings them back.
    mutating func removeAll() {
        rows.removeAll()
        byPaymentKey.removeAll()
        arrivals.removeAll()
        firstArrival = 0
        journal.removeAll()
        marks.removeAll()
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
        var restoredWritten = false
        defer {
            // Rows held again go back to their place in time, not behind younger ones.
            if restoredWritten {
                arrivals = rows.values.map { ($0.record.id, $0.heldSince) }.sorted { ($0.since, $0.id) < ($1.since, $1.id) }
                firstArrival = 0
            }
        }
        while journal.count > mark {
            switch journal.removeLast() {
            case .added(let id):
                if let row = rows.removeValue(forKey: id), let key = row.key { byPaymentKey[key] = nil }
            case .changed(let row):
                rows[row.record.id] = row
            case .written(let row):
                // SQLite undid the INSERT with the rest: the row is held again.
                hold(row)
                restoredWritten = true
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
