// StoreKit 2 keeps the app's receipt current as StoreKit 1 does: after `purchase()` and before
// an update reaches `Transaction.updates`, the receipt file lists the transaction (read back with
// openssl here).
import Foundation
import OpenStoreKit
@testable import OpenStoreKitTest
import StoreKitTestSupport
import Synchronization
import Testing

extension OpenStoreKitTestSuites {
@Suite("The receipt under StoreKit 2, in the app's process")
struct ReceiptClientTests {
    /// Whether the app's receipt file lists transaction `id` (its signed content, unpacked by openssl).
    static func receiptLists(_ id: UInt64) throws -> Bool {
        let file = SKPaymentQueue.appStoreReceiptURL.path
        guard FileManager.default.fileExists(atPath: file) else { return false }
        let directory = TemporaryDirectory("skreceipt")
        defer { directory.remove() }
        let result = try ProcessRunner.run("/usr/bin/openssl", ["cms", "-verify", "-noverify", "-inform", "DER", "-in", file,
                                                                "-out", directory.file("content")])
        guard result.status == 0 else { return false }
        let content = try Data(contentsOf: URL(fileURLWithPath: directory.file("content")))
        return content.range(of: Data(String(id).utf8)) != nil
    }

    @Test("a purchase and an update are in the receipt when the app hears of them")
    func receiptFollowsStoreKit2() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        session.clearTransactions()
        let product = try #require(try await Product.products(for: ["com.example.game.level_pack"]).first)
        guard case .success(let verification) = try await product.purchase() else { throw CancellationError() }
        let bought = try verification.payloadValue
        #expect(try Self.receiptLists(bought.id), "purchase() returned before the receipt listed it")
        await bought.finish()

        let seen = Mutex<[UInt64: Bool]>([:])
        let listener = Task {
            for await update in Transaction.updates {
                let id = update.unsafePayloadValue.id
                let listed = (try? Self.receiptLists(id)) ?? false
                seen.withLock { $0[id] = listed }
            }
        }
        defer { listener.cancel() }
        try await Task.sleep(for: .milliseconds(300))
        _ = try await session.buyProduct(identifier: "com.example.game.premium.yearly")
        let deadline = Date().addingTimeInterval(10)
        while seen.withLock({ $0.isEmpty }), Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let updates = seen.withLock { $0 }
        #expect(!updates.isEmpty && updates.values.allSatisfy { $0 }, "an update reached the app before the receipt listed it: \(updates)")
    }
}
}
