import Foundation
@testable import OpenStoreKit
import Testing

@Suite("payment idempotency keys")
struct IdempotencyKeyTests {
    @Test("keys are unique and sort in the order they were made")
    func orderedAndUnique() {
        // Instants a millisecond apart, across a change in the number of hex digits, and two keys
        // made in the same millisecond.
        let instants: [UInt64] = [0xf, 0x10, 1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_001]
        let keys = instants.map { SKPaymentQueue.idempotencyKey(milliseconds: $0) }
        #expect(Set(keys).count == keys.count)
        #expect(keys.map { $0.prefix(12) } == keys.map { $0.prefix(12) }.sorted())
        #expect(keys.map { UInt64($0.prefix(12), radix: 16) } == instants)
        #expect(keys.allSatisfy { $0.count == 12 + 1 + 36 })
    }

    @Test("a payment's key starts with the time it was made, in milliseconds since 1970")
    func startsWithNow() throws {
        let before = UInt64(Date().timeIntervalSince1970 * 1000)
        let key = SKPaymentQueue.idempotencyKey()
        let after = UInt64(Date().timeIntervalSince1970 * 1000)
        let made = try #require(UInt64(key.prefix(12), radix: 16))
        #expect(before <= made && made <= after)
        #expect(key.count == 12 + 1 + 36)
    }
}
