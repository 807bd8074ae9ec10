// `PurchaseOption.onStorefrontChange`: a purchase still waiting for a parent (Ask to Buy) is
// asked whether it goes on when the storefront changes; "no" withdraws it, "yes" leaves it waiting.
import Foundation
import OpenStoreKit
@testable import OpenStoreKitTest
import StoreKitTestSupport
import Synchronization
import Testing

extension OpenStoreKitTestSuites {
@Suite("Storefront changes during a purchase, in the app's process")
struct StorefrontChangeClientTests {
    @Test("a waiting purchase is asked with the new storefront; no withdraws it, yes keeps it waiting")
    func waitingPurchaseIsAsked() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        session.clearTransactions()
        session.storefront = "USA"
        session.askToBuyEnabled = true
        defer {
            session.askToBuyEnabled = false
            session.storefront = "USA"
        }
        let asked = Mutex<[String: [String]]>([:])
        func option(_ product: String, answer: Bool) -> Product.PurchaseOption {
            .onStorefrontChange { storefront in
                asked.withLock { $0[product, default: []].append(storefront.countryCode) }
                return answer
            }
        }
        let products = try await Product.products(for: ["com.example.game.level_pack", "com.example.game.coins100"])
        let pack = try #require(products.first { $0.id == "com.example.game.level_pack" })
        let coins = try #require(products.first { $0.id == "com.example.game.coins100" })
        for (product, answer) in [(pack, false), (coins, true)] {
            guard case .pending = try await product.purchase(options: [option(product.id, answer: answer)]) else {
                Issue.record("\(product.id) did not wait for a parent")
                return
            }
        }

        session.storefront = "GBR"
        let deadline = Date().addingTimeInterval(10)
        func state(_ product: String) -> SKPaymentTransactionState? {
            session.allTransactions().last { $0.productIdentifier == product }?.state
        }
        while state(pack.id) != .failed, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(asked.withLock { $0 } == [pack.id: ["GBR"], coins.id: ["GBR"]])
        #expect(state(pack.id) == .failed, "withdrawn")
        #expect(state(coins.id) == .deferred, "still waiting for a parent")
    }

    @Test("custom options have no effect: the purchase is as without them")
    func customOptionsHaveNoEffect() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        session.clearTransactions()
        let coins = try #require(try await Product.products(for: ["com.example.game.coins100"]).first)
        let options: Set<Product.PurchaseOption> = [.custom(key: "campaign", value: "spring"), .custom(key: "score", value: 1.5),
                                                    .custom(key: "beta", value: true), .custom(key: "blob", value: Data([1, 2])),
                                                    .quantity(2)]
        guard case .success(let result) = try await coins.purchase(options: options) else {
            Issue.record("the purchase with custom options did not succeed")
            return
        }
        let transaction = try result.payloadValue
        #expect(transaction.purchasedQuantity == 2 && transaction.productID == coins.id)
        await transaction.finish()
    }
}
}
