import StoreKitLedger
import StoreKitSQLite
import StoreKitWire
import Testing

@Suite("SQLiteLedger: units of work, transitions and reads")
struct SQLiteLedgerTests {
    /// A legal move attempted on a row that is in another state than the move starts from.
    struct WrongStart: Sendable, CustomTestStringConvertible {
        var row: TransactionState
        var from: TransactionState
        var to: TransactionState
        var testDescription: String { "\(from) → \(to) on a \(row) row" }
    }

    @Test("a transition from the wrong state returns false and changes nothing", arguments: [
        WrongStart(row: .purchasing, from: .deferred, to: .purchased),
        WrongStart(row: .purchasing, from: .deferred, to: .failed),
        WrongStart(row: .deferred, from: .purchasing, to: .purchased),
        WrongStart(row: .deferred, from: .purchasing, to: .deferred),
        WrongStart(row: .purchased, from: .purchasing, to: .failed),
        WrongStart(row: .purchased, from: .deferred, to: .failed),
        WrongStart(row: .failed, from: .purchasing, to: .purchased),
        WrongStart(row: .restored, from: .purchasing, to: .purchased),
    ])
    func transitionFromWrongState(attempt: WrongStart) throws {
        let fixture = StoreFixture()
        let store = try fixture.open()
        let record = makeRecord(id: 10, state: attempt.row, sequence: 1, date: 100)
        try StoreFixture.unit(store) { try store.insert(record) }
        let moved = try StoreFixture.unit(store) { () throws in
            try store.transition(id: 10, from: attempt.from, to: attempt.to, sequence: 2, date: 200,
                                 errorCode: 2, errorMessage: "should not be written")
        }
        #expect(!moved)
        #expect(try store.transaction(id: 10) == record)
    }

    @Test("a transition from the right state moves once; the same move again is refused")
    func transitionGuarded() throws {
        let fixture = StoreFixture()
        let store = try fixture.open()
        try StoreFixture.unit(store) { try store.insert(makeRecord(id: 10, state: .purchasing, sequence: 1, date: 100)) }

        try StoreFixture.unit(store) { () throws in
            #expect(try store.transition(id: 10, from: .purchasing, to: .deferred, sequence: 2, date: 200))
        }
        var expected = makeRecord(id: 10, state: .deferred, sequence: 2, date: 200)
        #expect(try store.transaction(id: 10) == expected)

        try StoreFixture.unit(store) { () throws in
            #expect(try !store.transition(id: 10, from: .purchasing, to: .failed, sequence: 3, date: 300))
            #expect(try store.transition(id: 10, from: .deferred, to: .failed, sequence: 3, date: 300,
                                         errorCode: 2, errorMessage: "declined"))
            #expect(try !store.transition(id: 10, from: .deferred, to: .purchased, sequence: 4, date: 400))
            #expect(try !store.transition(id: 11, from: .purchasing, to: .purchased, sequence: 4, date: 400))
        }
        expected.state = .failed
        expected.sequence = 3
        expected.date = 300
        expected.errorCode = 2
        expected.errorMessage = "declined"
        #expect(try store.transaction(id: 10) == expected)
    }

    @Test("a finished transaction never transitions")
    func finishedDoesNotTransition() throws {
        let fixture = StoreFixture()
        let store = try fixture.open()
        let record = makeRecord(id: 10, state: .purchasing, finished: true)
        try StoreFixture.unit(store) { () throws in
            try store.insert(record)
            #expect(try !store.transition(id: 10, from: .purchasing, to: .purchased, sequence: 9, date: 9))
        }
        #expect(try store.transaction(id: 10) == record)
    }

    @Test("markFinished succeeds once, and only for purchased, failed and restored", arguments: TransactionState.allCases)
    func markFinished(state: TransactionState) throws {
        let fixture = StoreFixture()
        let store = try fixture.open()
        let record = makeRecord(id: 20, state: state, sequence: 1)
        try StoreFixture.unit(store) { try store.insert(record) }
        let finishable = state == .purchased || state == .failed || state == .restored

        let first = try StoreFixture.unit(store) { try store.markFinished(id: 20, sequence: 2) }
        #expect(first == finishable)
        var expected = record
        if finishable {
            expected.finished = true
            expected.sequence = 2
        }
        #expect(try store.transaction(id: 20) == expected)

        let second = try StoreFixture.unit(store) { try store.markFinished(id: 20, sequence: 3) }
        #expect(!second)
        #expect(try store.transaction(id: 20) == expected)
        #expect(try store.unfinished(uid: 1000, app: "com.example.game").count == (finishable ? 0 : 1))
    }

    @Test("markFinished of an unknown id is false")
    func markFinishedUnknown() throws {
        let store = try StoreFixture().open()
        #expect(try !StoreFixture.unit(store) { try store.markFinished(id: 12345, sequence: 1) })
    }

    @Test("rollback discards inserts, sequences and settings; the next id and sequence follow the committed ones")
    func rollback() throws {
        let fixture = StoreFixture()
        let store = try fixture.open()
        let committed = try StoreFixture.unit(store) { () throws in
            let record = makeRecord(id: store.allocateTransactionID(),
                                    sequence: try store.nextSequence(uid: 1000, app: "com.example.game"))
            try store.insert(record, paymentKey: "first")
            return record
        }

        try store.begin()
        #expect(store.isInTransaction)
        let discardedID = store.allocateTransactionID()
        #expect(discardedID > committed.id)
        #expect(try store.nextSequence(uid: 1000, app: "com.example.game") == 2)
        #expect(try store.nextSequence(uid: 1000, app: "com.example.game") == 3)
        #expect(try store.nextSequence(uid: 2000, app: "com.example.game") == 1)
        try store.insert(makeRecord(id: discardedID, sequence: 3), paymentKey: "second")
        try store.setSetting("switch", "on")
        store.rollback()
        #expect(!store.isInTransaction)

        #expect(try store.transaction(id: discardedID) == nil)
        #expect(try store.transaction(uid: 1000, app: "com.example.game", paymentKey: "second") == nil)
        #expect(try store.list(uid: nil, app: nil, unfinishedOnly: false) == [committed])
        #expect(try store.setting("switch") == nil)

        try StoreFixture.unit(store) { () throws in
            let id = store.allocateTransactionID()
            #expect(id > committed.id)
            #expect(try store.nextSequence(uid: 1000, app: "com.example.game") == 2)
            #expect(try store.nextSequence(uid: 2000, app: "com.example.game") == 1)
            try store.insert(makeRecord(id: id, sequence: 2), paymentKey: "second")
        }
        #expect(try store.all(uid: 1000, app: "com.example.game").count == 2)
    }

    @Test("rollback without begin is harmless")
    func rollbackWithoutBegin() throws {
        let store = try StoreFixture().open()
        store.rollback()
        try StoreFixture.unit(store) { #expect(store.allocateTransactionID() > TransactionIDs.first) }
    }

    @Test("a database created later never gives an id an earlier one gave (apps key their grants by it)")
    func idsUniqueAcrossDatabases() throws {
        var last: UInt64 = 0
        for _ in 0..<3 {
            let store = try StoreFixture().open()
            var ids: [UInt64] = []
            try StoreFixture.unit(store) {
                for _ in 0..<1000 { ids.append(store.allocateTransactionID()) }
            }
            #expect(ids == ids.sorted() && Set(ids).count == ids.count)
            #expect(ids.first! > last, "a new database started at \(ids.first!), an earlier one gave \(last)")
            #expect(String(ids.last!).count == 16, "\(ids.last!) is not 16 digits")
            last = ids.last!
        }
    }

    @Test("a failed statement inside a unit of work can be rolled back and the store goes on")
    func duplicateKeyThenRollback() throws {
        let store = try StoreFixture().open()
        try StoreFixture.unit(store) { try store.insert(makeRecord(id: 1), paymentKey: "k") }
        try store.begin()
        let error = storeError { try store.insert(makeRecord(id: 2), paymentKey: "k") }
        #expect(error != nil)
        store.rollback()
        // The same key for another uid or app is another queue's key.
        try StoreFixture.unit(store) { () throws in
            try store.insert(makeRecord(id: 2, uid: 1001), paymentKey: "k")
            try store.insert(makeRecord(id: 3, app: "com.example.other"), paymentKey: "k")
            try store.insert(makeRecord(id: 4))
            try store.insert(makeRecord(id: 5))
        }
        #expect(try store.list(uid: nil, app: nil, unfinishedOnly: false).map(\.id) == [1, 2, 3, 4, 5])
    }

    @Test("nextSequence counts per (uid, app) and keeps counting across a reopen and a crash")
    func sequencesPerQueue() throws {
        let fixture = StoreFixture()
        do {
            let store = try fixture.open()
            try StoreFixture.unit(store) { () throws in
                #expect(try store.nextSequence(uid: 1000, app: "a") == 1)
                #expect(try store.nextSequence(uid: 1000, app: "a") == 2)
                #expect(try store.nextSequence(uid: 1000, app: "b") == 1)
                #expect(try store.nextSequence(uid: 1001, app: "a") == 1)
                #expect(try store.nextSequence(uid: 1000, app: "a") == 3)
            }
            try StoreFixture.unit(store) { () throws in
                #expect(try store.nextSequence(uid: 1000, app: "a") == 4)
            }
            try store.shutDown()   // counters reach the sequences table when SQLite commits
        }
        do {
            let store = try fixture.open()
            try StoreFixture.unit(store) { () throws in
                #expect(try store.nextSequence(uid: 1000, app: "a") == 5)
                #expect(try store.nextSequence(uid: 1000, app: "b") == 2)
                #expect(try store.nextSequence(uid: 1001, app: "a") == 2)
                #expect(try store.nextSequence(uid: 1001, app: "b") == 1)
                try store.insert(makeRecord(id: 51, app: "c", sequence: try store.nextSequence(uid: 1000, app: "c")))
                try store.insert(makeRecord(id: 52, app: "c", sequence: try store.nextSequence(uid: 1000, app: "c")))
            }
            // Dropped without a flush, as by a crash: the unit of work comes back from the commit
            // log, and the counters from the rows it stored.
        }
        let store = try fixture.open()
        try StoreFixture.unit(store) { () throws in
            #expect(try store.nextSequence(uid: 1000, app: "a") == 5)
            #expect(try store.nextSequence(uid: 1000, app: "c") == 3)
        }
    }

    @Test("list filters by uid, app and finished-ness, oldest first, up to the limit")
    func listFilters() throws {
        let store = try StoreFixture().open()
        let rows = [
            makeRecord(id: 1, uid: 1000, app: "a"),
            makeRecord(id: 2, uid: 1000, app: "b", finished: true),
            makeRecord(id: 3, uid: 1001, app: "a", finished: true),
            makeRecord(id: 4, uid: 1001, app: "b"),
            makeRecord(id: 5, uid: 1000, app: "a", finished: true),
            makeRecord(id: 6, uid: 1000, app: "a", state: .purchasing),
        ]
        try StoreFixture.unit(store) { for row in rows.reversed() { try store.insert(row) } }
        func ids(_ uid: UInt32?, _ app: String?, _ unfinishedOnly: Bool, limit: Int = 10_000) throws -> [UInt64] {
            try store.list(uid: uid, app: app, unfinishedOnly: unfinishedOnly, limit: limit).map(\.id)
        }
        #expect(try ids(nil, nil, false) == [1, 2, 3, 4, 5, 6])
        #expect(try ids(nil, nil, true) == [1, 4, 6])
        #expect(try ids(1000, nil, false) == [1, 2, 5, 6])
        #expect(try ids(nil, "a", false) == [1, 3, 5, 6])
        #expect(try ids(1000, "a", false) == [1, 5, 6])
        #expect(try ids(1000, "a", true) == [1, 6])
        #expect(try ids(1001, "a", true) == [])
        #expect(try ids(4242, nil, false) == [])
        #expect(try ids(nil, nil, false, limit: 2) == [1, 2])
        #expect(try store.list(uid: nil, app: nil, unfinishedOnly: false) == rows)

        #expect(try store.unfinished(uid: 1000, app: "a").map(\.id) == [1, 6])
        #expect(try store.all(uid: 1000, app: "a").map(\.id) == [1, 5, 6])
        #expect(try store.all(uid: 1000, app: "c") == [])
        #expect(try store.unfinishedCount() == 3)
    }

    @Test("settings are set, replaced, deleted and persisted")
    func settings() throws {
        let fixture = StoreFixture()
        do {
            let store = try fixture.open()
            #expect(try store.setting("storefront") == nil)
            try StoreFixture.unit(store) { () throws in
                try store.setSetting("storefront", "USA")
                try store.setSetting("storefront", "FRA")
                try store.setSetting("gone", "x")
                try store.setSetting("gone", nil)
                try store.setSetting("empty", "")
            }
        }
        let store = try fixture.open()
        #expect(try store.setting("storefront") == "FRA")
        #expect(try store.setting("gone") == nil)
        #expect(try store.setting("empty") == "")
    }

    @Test("setRevocation applies once")
    func revocation() throws {
        let store = try StoreFixture().open()
        try StoreFixture.unit(store) { () throws in
            try store.insert(makeRecord(id: 1, finished: true))
            #expect(try store.setRevocation(id: 1, date: 500, reason: 1, sequence: 9))
            #expect(try !store.setRevocation(id: 1, date: 600, reason: 0, sequence: 10))
        }
        let record = try #require(try store.transaction(id: 1))
        #expect(record.revocationDate == 500)
        #expect(record.revocationReason == 1)
        #expect(record.sequence == 9)
    }
}
