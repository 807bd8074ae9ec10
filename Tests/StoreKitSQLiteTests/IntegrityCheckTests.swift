import Foundation
import StoreKitSQLite
import StoreKitWire
import Testing

@Suite("IntegrityCheck")
struct IntegrityCheckTests {
    /// Writes `count` rows with some padding so that the table and its indexes span many pages.
    static func fill(_ store: SQLiteLedger, count: Int, keyPrefix: String = "key") throws {
        try StoreFixture.unit(store) { () throws in
            for index in 0..<count {
                var record = makeRecord(id: store.allocateTransactionID(), uid: UInt32(1000 + index % 7),
                                        productID: "com.example.game.product.\(index)",
                                        sequence: try store.nextSequence(uid: UInt32(1000 + index % 7), app: "com.example.game"))
                record.errorMessage = String(repeating: "x", count: 60 + index % 50)
                try store.insert(record, paymentKey: "\(keyPrefix)-\(index)")
            }
        }
        // Into SQLite (the unit of work is in the commit log until then), where the check reads.
        try store.save()
    }

    @Test("an intact database passes, while the store is open and after it closed")
    func intact() throws {
        let fixture = StoreFixture()
        do {
            let store = try fixture.open()
            try Self.fill(store, count: 500)
            #expect(try IntegrityCheck.run(path: fixture.path) == nil)
            try Self.fill(store, count: 10, keyPrefix: "more")
        }
        #expect(try IntegrityCheck.run(path: fixture.path) == nil)
    }

    @Test("garbage written over middle pages is found: a report or .corrupt")
    func corrupted() throws {
        let fixture = StoreFixture()
        do {
            let store = try fixture.open()
            try Self.fill(store, count: 5000)
        }
        #expect(!fixture.exists("-wal"), "closing the last connection should checkpoint the WAL into the file")
        var bytes = [UInt8](try fixture.bytes())
        let pageSize = Int(bytes[16]) << 8 | Int(bytes[17])  // the header's big-endian page size
        #expect(pageSize >= 512)
        let pages = bytes.count / pageSize
        #expect(pages > 50)
        var random = SplitMix64(seed: 99)
        for page in (pages / 3)..<(pages / 3 + 8) {
            for offset in (page * pageSize)..<(page * pageSize + pageSize / 2) {
                bytes[offset] = UInt8.random(in: 0...255, using: &random)
            }
        }
        try Data(bytes).write(to: URL(fileURLWithPath: fixture.path))

        do {
            let report = try IntegrityCheck.run(path: fixture.path)
            #expect(report != nil)
            #expect(report?.isEmpty == false)
        } catch {
            #expect(error.code == .corrupt)
        }
    }
}

/// A reproducible generator for the garbage bytes.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
