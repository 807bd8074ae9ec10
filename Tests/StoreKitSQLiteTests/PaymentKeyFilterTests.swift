import Foundation
@testable import StoreKitSQLite
import StoreKitTestSupport
import StoreKitWire
import Testing

/// New payment keys are proved new by a Bloom filter of the keys in the database, never wrongly.
@Suite("Payment-key filter")
struct PaymentKeyFilterTests {
    static let app = "com.example.game"

    @Test("no key it holds is ever missed; keys it does not hold are mostly ruled out")
    func bloomFilter() {
        var filter = PaymentKeyFilter(capacity: 50_000)
        for index in 0..<50_000 { filter.insert(StoredPaymentKey(uid: 1000, app: Self.app, key: "key-\(index)")) }
        #expect(filter.count == 50_000)
        #expect(!filter.isFull)
        for index in 0..<50_000 {
            guard filter.mightContain(StoredPaymentKey(uid: 1000, app: Self.app, key: "key-\(index)")) else {
                Issue.record("key-\(index) was inserted but is not found")
                return
            }
        }
        let falsePositives = (0..<50_000).filter {
            filter.mightContain(StoredPaymentKey(uid: 1000, app: Self.app, key: "other-\($0)"))
        }.count
        #expect(falsePositives < 250)   // under 0.5 %
        // The same bytes split differently between app and key, or another uid, are other keys.
        var small = PaymentKeyFilter(capacity: 1)
        small.insert(StoredPaymentKey(uid: 1, app: "ab", key: "c"))
        #expect(!small.mightContain(StoredPaymentKey(uid: 1, app: "a", key: "bc")))
        #expect(!small.mightContain(StoredPaymentKey(uid: 2, app: "ab", key: "c")))
    }

    @Test("once built, keys committed before it and inserted during it are found, and new keys skip SQLite")
    func storeUsesTheFilter() throws {
        let fixture = StoreFixture()
        do {
            let store = try fixture.open()
            for batch in 0..<4 {
                try StoreFixture.unit(store) { () throws in
                    for index in 0..<50 { try HeldRowsTests.purchase(store, key: "old-\(batch)-\(index)") }
                }
                try store.save()
            }
            #expect(store.keyLookupsSkipped == 0)   // no filter unless started
            try store.shutDown()
        }
        let store = try fixture.open()
        // The build waits until "during" is held: it reads the table without it, and the store
        // adds the key when it takes the filter.
        let held = DispatchSemaphore(value: 0)
        store.keyFilterBuildHook = { held.wait() }
        store.keyFilterChunk = 7   // many read transactions, resumed after the last key read
        store.startPaymentKeyFilter()
        let during = try StoreFixture.unit(store) { try HeldRowsTests.purchase(store, key: "during") }
        held.signal()
        try Self.waitForFilter(store)
        try store.save()   // "during" is in SQLite now, and only the merge put it in the filter

        for batch in 0..<4 {
            for index in 0..<50 {
                #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "old-\(batch)-\(index)") != nil)
            }
        }
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "during")?.id == during.id)
        // A key inserted after the build is found too, and a duplicate of it is refused.
        let after = try StoreFixture.unit(store) { try HeldRowsTests.purchase(store, key: "after") }
        try store.save()
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "after")?.id == after.id)
        try store.begin()
        #expect(storeError { try store.insert(makeRecord(id: store.allocateTransactionID()), paymentKey: "after") } != nil)
        store.rollback()

        let skipped = store.keyLookupsSkipped
        for index in 0..<100 {
            #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "new-\(index)") == nil)
        }
        #expect(store.keyLookupsSkipped - skipped >= 95)
    }

    @Test("keys are counted in hops, each its own short read: exactly, on and off a hop's edge")
    func countedInHops() throws {
        let fixture = StoreFixture()
        let store = try fixture.open()
        try StoreFixture.unit(store) { () throws in
            for index in 0..<45 {
                try HeldRowsTests.purchase(store, key: "k\(index)", uid: UInt32(1000 + index % 3))
            }
            try store.insert(makeRecord(id: store.allocateTransactionID()))   // no key
        }
        try store.save()
        let reader = try SQLiteDatabase(path: fixture.path, readOnly: true)
        for (chunk, expected) in [(7, 45), (9, 45), (45, 45), (46, 45), (1, 45), (100, 45)] {
            #expect(try PaymentKeyFilterBuild.countKeys(reader, chunk: chunk) == expected, "chunk \(chunk)")
        }
    }

    /// Looks up unknown keys until one is answered without SQLite (the filter is built).
    static func waitForFilter(_ store: SQLiteLedger) throws {
        var probe = 0
        #expect(try eventually {
            probe += 1
            _ = try store.transaction(uid: 1000, app: app, paymentKey: "probe-\(probe)")
            return store.keyLookupsSkipped > 0
        }, "the filter was never built")
    }

    /// What the hooks of the builds saw, in order (hooks run on the builds' threads).
    final class Notes: @unchecked Sendable {
        private let lock = NSLock()
        private var notes: [String] = []
        func append(_ note: String) { lock.withLock { notes.append(note) } }
        var all: [String] { lock.withLock { notes } }
    }

    /// The calling thread as `/proc` names it ("/proc/PID/task/TID"): gone once the thread ended.
    static func currentThreadPath() -> String {
        "/proc/" + ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? "thread-self")
    }

    @Test("a filter asked for while units of work are lost with SQLite's transaction is built after they are back")
    func startedAfterLostTransaction() throws {
        let fixture = StoreFixture()   // kept: the build opens the database by its path
        let store = try fixture.open()
        try StoreFixture.unit(store) { try HeldRowsTests.purchase(store, key: "x") }
        try store.database.execute("ROLLBACK")   // as SQLite does on some I/O errors
        try store.writeRows(heldLongerThan: 0, now: 0)   // the store notices: "x" waits for the catch-up
        // A build takes the hook there is when it starts: which hook runs tells when it started.
        let started = DispatchSemaphore(value: 0)
        let builds = Notes()
        store.keyFilterBuildHook = { builds.append("asked for"); started.signal() }
        store.startPaymentKeyFilter()   // not now: "x" is not committed
        store.keyFilterBuildHook = { builds.append("flushed"); started.signal() }
        try store.save()   // applies the lost unit again, commits it, then starts the build
        #expect(started.wait(timeout: .now() + 5) == .success)
        #expect(builds.all == ["flushed"], "a build started while \"x\" was not committed")
        try Self.waitForFilter(store)
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "x") != nil)
        try store.begin()
        #expect(storeError { try store.insert(makeRecord(id: store.allocateTransactionID()), paymentKey: "x") } != nil)
        store.rollback()
    }

    @Test("a build that cannot read the database leaves every lookup to SQLite")
    func failedBuild() throws {
        let fixture = StoreFixture()
        let store = try fixture.open()
        let existing = try StoreFixture.unit(store) { try HeldRowsTests.purchase(store, key: "k") }
        try store.save()
        // The build's connection opens the path: gone, it fails.
        let moved = fixture.path + ".moved"
        try FileManager.default.moveItem(atPath: fixture.path, toPath: moved)
        // The build's thread ends once it has its outcome: then the database may come back.
        let buildThread = Notes()
        store.keyFilterBuildHook = { buildThread.append(Self.currentThreadPath()) }
        store.startPaymentKeyFilter()
        #expect(eventually {
            guard let thread = buildThread.all.first else { return false }
            return !FileManager.default.fileExists(atPath: thread)
        }, "the build did not end: \(buildThread.all)")
        try FileManager.default.moveItem(atPath: moved, toPath: fixture.path)
        for index in 0..<20 { _ = try store.transaction(uid: 1000, app: Self.app, paymentKey: "new-\(index)") }
        #expect(store.keyLookupsSkipped == 0)
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "k")?.id == existing.id)
    }
}
