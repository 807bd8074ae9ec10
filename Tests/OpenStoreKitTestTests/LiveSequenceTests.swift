// StoreKit 2's live sequences besides Transaction.updates, in this process against a private
// storekitd (SKTestSession): `Storefront.updates`, `Product.SubscriptionInfo.Status.updates`, and
// the status of a transaction (`status(transactionID:)`, `Transaction.subscriptionStatus`).
import Foundation
import OpenStoreKit
@testable import OpenStoreKitTest
import Synchronization
import Testing

extension OpenStoreKitTestSuites {
@Suite("Live sequences, in the app's process")
struct LiveSequenceTests {
    static let monthly = "com.example.game.premium.monthly"
    static let coins = "com.example.game.coins100"

    /// What a sequence emitted, collected by a task of its own.
    final class Collected<Element: Sendable>: Sendable {
        private let elements = Mutex<[Element]>([])
        var all: [Element] { elements.withLock { $0 } }
        func add(_ element: Element) { elements.withLock { $0.append(element) } }

        /// Waits up to ten seconds until `condition` holds for what was collected.
        func wait(_ condition: ([Element]) -> Bool) async throws -> Bool {
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                if condition(all) { return true }
                try await Task.sleep(for: .milliseconds(20))
            }
            return condition(all)
        }
    }

    @Test("Storefront.updates emits each change, from the moment it is iterated")
    func storefrontUpdates() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        session.storefront = "USA"
        let collected = Collected<Storefront>()
        let listener = Task { for await storefront in Storefront.updates { collected.add(storefront) } }
        defer { listener.cancel() }
        // The listener subscribes the connection: a change made before it did is not announced.
        try await Task.sleep(for: .milliseconds(300))
        session.storefront = "GBR"
        #expect(try await collected.wait { $0.map(\.countryCode) == ["GBR"] }, "\(collected.all)")
        #expect(collected.all.first?.id == "143444")
        session.storefront = "FRA"
        #expect(try await collected.wait { $0.map(\.countryCode) == ["GBR", "FRA"] }, "\(collected.all)")
        #expect(await Storefront.current?.countryCode == "FRA")
        session.storefront = "USA"
    }

    @Test("Status.updates emits a subscription's status at its purchase and at its refund; a transaction's status")
    func statusUpdates() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        session.clearTransactions()
        let collected = Collected<Product.SubscriptionInfo.Status>()
        let listener = Task { for await status in Product.SubscriptionInfo.Status.updates { collected.add(status) } }
        defer { listener.cancel() }
        try await Task.sleep(for: .milliseconds(300))

        let products = try await Product.products(for: [Self.monthly, Self.coins])
        let monthly = try #require(products.first { $0.id == Self.monthly })
        guard case .success(let verification) = try await monthly.purchase() else { throw CancellationError() }
        let transaction = try verification.payloadValue
        await transaction.finish()
        // The first subscription of the group: the catalogue's week of free trial.
        #expect(transaction.offer?.type == .introductory && transaction.offer?.paymentMode == .freeTrial)
        #expect(transaction.offer?.period?.value == 1 && transaction.offer?.period?.unit == .week && transaction.offer?.id == nil)
        #expect(try await collected.wait { statuses in statuses.contains { $0.state == .subscribed } }, "\(collected.all.map(\.state))")
        let subscribed = try #require(collected.all.first { $0.state == .subscribed })
        #expect(try subscribed.transaction.payloadValue.originalID == transaction.originalID)
        #expect(try subscribed.renewalInfo.payloadValue.currentProductID == Self.monthly)

        let byID = try #require(try await Product.SubscriptionInfo.status(transactionID: transaction.id))
        #expect(byID.state == .subscribed)
        #expect(try byID.transaction.payloadValue.originalID == transaction.originalID)
        #expect(await transaction.subscriptionStatus?.state == .subscribed)
        #expect(try await Product.SubscriptionInfo.status(transactionID: 999_999_999) == nil, "no such transaction")

        // A refund is pushed (entitlements revoked): the status follows.
        try session.refundTransaction(identifier: Int(transaction.id))
        #expect(try await collected.wait { statuses in statuses.contains { $0.state == .revoked } }, "\(collected.all.map(\.state))")
        #expect(await transaction.subscriptionStatus?.state == .revoked)

        let coins = try #require(products.first { $0.id == Self.coins })
        guard case .success(let bought) = try await coins.purchase() else { throw CancellationError() }
        let consumable = try bought.payloadValue
        await consumable.finish()
        #expect(try await Product.SubscriptionInfo.status(transactionID: consumable.id) == nil, "not a subscription")
        #expect(await consumable.subscriptionStatus == nil)
    }
}
}
