import CSQLite
import StoreKitLedger
import StoreKitPosix
import Synchronization

/// A Bloom filter over the payment keys of a database's transactions: a key it has not seen is in
/// no row, so a new payment's key is proved new without a lookup in the unique index (the lookup
/// was a quarter of executing a payment). It may answer "maybe" for a key it has not seen (about
/// 1 in 300 at capacity); then the store asks SQLite, as it does while no filter is ready.
struct PaymentKeyFilter {
    private var words: [UInt64]
    private let mask: UInt64
    private(set) var count = 0
    /// Keys it holds before "maybe" becomes too frequent to be of use.
    let capacity: Int

    /// At least 12 bits per key for `capacity` keys (and for 65,536 at least); 7 probes.
    init(capacity: Int) {
        var bitCount = 1 << 20
        while bitCount < max(capacity, 0) * 12 { bitCount <<= 1 }
        words = [UInt64](repeating: 0, count: bitCount / 64)
        mask = UInt64(bitCount - 1)
        self.capacity = bitCount / 12
    }

    var isFull: Bool { count > capacity }

    mutating func insert(_ key: StoredPaymentKey) {
        var (probe, step) = Self.hashes(key)
        for _ in 0..<Self.probes {
            let bit = probe & mask
            words[Int(bit >> 6)] |= 1 << (bit & 63)
            probe &+= step
        }
        count += 1
    }

    func mightContain(_ key: StoredPaymentKey) -> Bool {
        var (probe, step) = Self.hashes(key)
        for _ in 0..<Self.probes {
            let bit = probe & mask
            guard words[Int(bit >> 6)] & (1 << (bit & 63)) != 0 else { return false }
            probe &+= step
        }
        return true
    }

    private static let probes = 7

    /// FNV-1a over uid, app, a separator and key, and a second hash mixed from it (odd, so that
    /// the probes `h1 + i·h2` are distinct).
    private static func hashes(_ key: StoredPaymentKey) -> (UInt64, UInt64) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ byte: UInt8) {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        withUnsafeBytes(of: key.uid.littleEndian) { for byte in $0 { mix(byte) } }
        for byte in key.app { mix(byte) }
        mix(0xff)   // not UTF-8: apps "ab" + key "c" and "a" + "bc" differ
        for byte in key.key { mix(byte) }
        var second = hash ^ (hash >> 33)
        second &*= 0xff51_afd7_ed55_8ccd
        second ^= second >> 33
        return (hash, second | 1)
    }
}

/// Builds a `PaymentKeyFilter` of the keys committed in a database, on a thread of its own with its
/// own read connection (a database of millions of rows opens without waiting for it). It reads the
/// keys in order in chunks, each in a read transaction of its own, so that it never holds back
/// checkpoints for long: rows deleted meanwhile only leave keys the filter need not have, and rows
/// inserted after it started are the caller's to add (`SQLiteLedger.noteKeyInserted`).
final class PaymentKeyFilterBuild: Sendable {
    enum Outcome {
        case building
        case built(PaymentKeyFilter)
        case failed
        case taken
    }

    private let outcome = Mutex(Outcome.building)

    /// Starts reading the keys committed in `path` now or later; `beforeReading` (for tests) runs
    /// on the build's thread first.
    init(path: String, minimumCapacity: Int, chunk: Int = 20_000, beforeReading: (@Sendable () -> Void)? = nil) {
        NamedThread.start("storekitd-keys") { [self] in
            beforeReading?()
            let filter = Self.read(path: path, minimumCapacity: minimumCapacity, chunk: chunk)
            outcome.withLock { $0 = filter.map { .built($0) } ?? .failed }
        }
    }

    /// The outcome; a built filter is moved out (handed out once, not copied).
    func take() -> Outcome {
        outcome.withLock { current in
            let outcome = current
            if case .built = outcome { current = .taken }
            return outcome
        }
    }

    /// Counts the keys (to size the filter) `chunk` at a time: a hop to the key `chunk` further
    /// per statement, each its own short read, instead of one `count(*)` that holds a snapshot
    /// for the whole index (0.4 s for a million keys).
    static func countKeys(_ database: SQLiteDatabase, chunk: Int) throws(LedgerError) -> Int {
        let hop = try database.statement("SELECT uid, app, payment_key FROM transactions WHERE \(keysAfter) LIMIT 1 OFFSET ?4")
        var last = KeyPosition.start
        var count = 0
        while true {
            hop.reset()
            last.bind(to: hop)
            hop.bind(4, Int64(chunk - 1))
            guard try hop.step() else { break }
            last = KeyPosition(hop)
            count += chunk
        }
        hop.reset()
        let rest = try database.statement("SELECT count(*) FROM (SELECT 1 FROM transactions WHERE \(keysAfter))")
        last.bind(to: rest)
        return count + Int(try rest.firstRow { $0.int64(0) } ?? 0)
    }

    /// The keys after position ?1, ?2, ?3, in order: every query walks the partial index of
    /// payment keys (it covers them).
    private static let keysAfter =
        "payment_key IS NOT NULL AND (uid, app, payment_key) > (?1, ?2, ?3) ORDER BY uid, app, payment_key"

    /// A place in the index of payment keys: the last key read.
    private struct KeyPosition {
        var uid: Int64
        var app: String
        var key: String

        static let start = KeyPosition(uid: .min, app: "", key: "")

        init(uid: Int64, app: String, key: String) { (self.uid, self.app, self.key) = (uid, app, key) }

        /// The key in columns 0–2 of `row`.
        init(_ row: Statement) { self.init(uid: row.int64(0), app: row.text(1), key: row.text(2)) }

        func bind(to statement: Statement) {
            statement.bind(1, uid)
            statement.bind(2, app)
            statement.bind(3, key)
        }
    }

    /// Reads `chunk` keys per read transaction.
    private static func read(path: String, minimumCapacity: Int, chunk: Int) -> PaymentKeyFilter? {
        do {
            let database = try SQLiteDatabase(path: path, readOnly: true)
            // Nothing to read where payments carry no keys (the index is partial).
            let count = try countKeys(database, chunk: chunk)
            var filter = PaymentKeyFilter(capacity: max(2 * count, minimumCapacity))
            let select = try database.statement("SELECT uid, app, payment_key FROM transactions WHERE \(keysAfter) LIMIT ?4")
            var after = KeyPosition.start
            while true {
                select.reset()
                after.bind(to: select)
                select.bind(4, Int64(chunk))
                var rows = 0
                while try select.step() {
                    rows += 1
                    after = KeyPosition(select)
                    filter.insert(StoredPaymentKey(uid: UInt32(truncatingIfNeeded: after.uid), app: after.app, key: after.key))
                }
                select.reset()
                if rows < chunk { return filter }
            }
        } catch {
            return nil
        }
    }
}
