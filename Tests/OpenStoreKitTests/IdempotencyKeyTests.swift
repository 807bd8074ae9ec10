@testable import OpenStoreKit
import Testing

@Suite("payment idempotency keys")
struct IdempotencyKeyTests {
    @Test("keys are unique and sort in the order they were made")
    func orderedAndUnique() async throws {
        var keys: [String] = []
        for _ in 0..<3 {
            keys.append(SKPaymentQueue.idempotencyKey())
            try await Task.sleep(for: .milliseconds(3))
        }
        #expect(Set(keys).count == keys.count)
        #expect(keys.map { $0.prefix(12) } == keys.map { $0.prefix(12) }.sorted())
        #expect(keys.allSatisfy { $0.count == 12 + 1 + 36 })
    }
}
