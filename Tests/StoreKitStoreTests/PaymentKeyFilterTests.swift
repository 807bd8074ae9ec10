import Foundation
@testable import StoreKitStore
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
                    for index in 0..<50 { try PendingRowsTests.purchase(store, key: "old-\(batch)-\(index)") }
                }
                try store.flush()
            }
            #expect(store.keyLookupsSkipped == 0)   // no filter unless started
            try store.shutDown()
        }
        let store = try fixture.open()
        store.startPaymentKeyFilter()
        let during = try StoreFixture.unit(store) { try PendingRowsTests.purchase(store, key: "during") }
        try store.flush()

        // Wait for the build: a lookup of an unknown key is then answered without SQLite.
        let deadline = Date().addingTimeInterval(10)
        var probe = 0
        while store.keyLookupsSkipped == 0 && Date() < deadline {
            probe += 1
            _ = try store.transaction(uid: 1000, app: Self.app, paymentKey: "probe-\(probe)")
            usleep(1_000)
        }
        #expect(store.keyLookupsSkipped > 0)

        for batch in 0..<4 {
            for index in 0..<50 {
                #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "old-\(batch)-\(index)") != nil)
            }
        }
        #expect(try store.transaction(uid: 1000, app: Self.app, paymentKey: "during")?.id == during.id)
        // A key inserted after the build is found too, and a duplicate of it is refused.
        let after = try StoreFixture.unit(store) { try PendingRowsTests.purchase(store, key: "after") }
        try store.flush()
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
}
