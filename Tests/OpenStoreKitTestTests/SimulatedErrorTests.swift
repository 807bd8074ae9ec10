// SKTestSession.setSimulatedError(_:forAPI:) as a test for Apple's StoreKitTest would use it
// (imports changed only): each failable API fails with exactly the error set, reports it through
// simulatedError(forAPI:), and works again once the error is set back to nil.
import Foundation
import OpenStoreKit
@testable import OpenStoreKitTest
import Testing

extension OpenStoreKitTestSuites {
@Suite("SKTestSession's simulated errors")
struct SimulatedErrorTests {
    @Test("Product.products(for:) throws the simulated StoreKitError until it is cleared")
    func loadProducts() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        let failure = SKTestFailures.LoadProducts.generic(.networkError(URLError(.notConnectedToInternet)))
        try await session.setSimulatedError(failure, forAPI: .loadProducts)
        #expect(await session.simulatedError(forAPI: .loadProducts) == failure)
        let error = await Self.error { _ = try await Product.products(for: ["com.example.game.level_pack"]) }
        #expect((error as? StoreKitError).map { SKTestFailures.LoadProducts.generic($0) } == failure)

        try await session.setSimulatedError(nil, forAPI: .loadProducts)
        #expect(await session.simulatedError(forAPI: .loadProducts) == nil)
        #expect(try await Product.products(for: ["com.example.game.level_pack"]).map(\.id) == ["com.example.game.level_pack"])
    }

    @Test("Product.purchase(options:) throws the simulated PurchaseError or StoreKitError, and buys nothing")
    func purchase() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        session.clearTransactions()
        let pack = try #require(try await Product.products(for: ["com.example.game.level_pack"]).first)

        try await session.setSimulatedError(.purchase(.productUnavailable), forAPI: .purchase)
        #expect(await session.simulatedError(forAPI: .purchase) == .purchase(.productUnavailable))
        let refused = await Self.error { _ = try await pack.purchase() }
        #expect(refused as? Product.PurchaseError == .productUnavailable)

        try await session.setSimulatedError(.generic(.userCancelled), forAPI: .purchase)
        #expect(await session.simulatedError(forAPI: .purchase) == .generic(.userCancelled))
        let cancelled = await Self.error { _ = try await pack.purchase() }
        #expect((cancelled as? StoreKitError).map { SKTestFailures.Purchase.generic($0) } == .generic(.userCancelled))
        #expect(session.allTransactions().isEmpty)

        try await session.setSimulatedError(nil, forAPI: .purchase)
        #expect(await session.simulatedError(forAPI: .purchase) == nil)
        guard case .success(.verified(let transaction)) = try await pack.purchase() else {
            Issue.record("the purchase did not succeed verified once the error was cleared")
            return
        }
        #expect(transaction.productID == "com.example.game.level_pack")
        await transaction.finish()
    }

    @Test("AppStore.sync() throws the simulated StoreKitError until it is cleared")
    func appStoreSync() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        try await session.setSimulatedError(.generic(.notEntitled), forAPI: .appStoreSync)
        #expect(await session.simulatedError(forAPI: .appStoreSync) == .generic(.notEntitled))
        let error = await Self.error { try await AppStore.sync() }
        #expect((error as? StoreKitError).map { SKTestFailures.AppStoreSync.generic($0) } == .generic(.notEntitled))

        try await session.setSimulatedError(nil, forAPI: .appStoreSync)
        #expect(await session.simulatedError(forAPI: .appStoreSync) == nil)
        try await AppStore.sync()
    }

    @Test("AppTransaction.shared throws the simulated StoreKitError until it is cleared")
    func appTransaction() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        try await session.setSimulatedError(.generic(.unknown), forAPI: .appTransaction)
        #expect(await session.simulatedError(forAPI: .appTransaction) == .generic(.unknown))
        let error = await Self.error { _ = try await AppTransaction.shared }
        #expect((error as? StoreKitError).map { SKTestFailures.AppTransaction.generic($0) } == .generic(.unknown))

        try await session.setSimulatedError(nil, forAPI: .appTransaction)
        #expect(await session.simulatedError(forAPI: .appTransaction) == nil)
        guard case .verified = try await AppTransaction.shared else {
            Issue.record("the app transaction did not verify once the error was cleared")
            return
        }
    }

    @Test("Product.SubscriptionInfo.status(for:) throws the simulated StoreKitError until it is cleared")
    func subscriptionStatus() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        try await session.setSimulatedError(.generic(.notAvailableInStorefront), forAPI: .subscriptionStatus)
        #expect(await session.simulatedError(forAPI: .subscriptionStatus) == .generic(.notAvailableInStorefront))
        let error = await Self.error { _ = try await Product.SubscriptionInfo.status(for: "5D3E7F10") }
        #expect((error as? StoreKitError).map { SKTestFailures.SubscriptionStatus.generic($0) } == .generic(.notAvailableInStorefront))

        try await session.setSimulatedError(nil, forAPI: .subscriptionStatus)
        #expect(await session.simulatedError(forAPI: .subscriptionStatus) == nil)
        #expect(try await Product.SubscriptionInfo.status(for: "5D3E7F10").isEmpty)
    }

    @Test("transactions, renewal infos and the app transaction arrive unverified with the simulated VerificationError")
    func verification() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        session.clearTransactions()
        let coins = try #require(try await Product.products(for: ["com.example.game.coins100"]).first)

        try await session.setSimulatedError(.verification(.invalidSignature), forAPI: .verification)
        #expect(await session.simulatedError(forAPI: .verification) == .verification(.invalidSignature))
        guard case .success(.unverified(let transaction, let error)) = try await coins.purchase() else {
            Issue.record("the purchase's transaction was not unverified")
            return
        }
        #expect(error == .invalidSignature)
        await transaction.finish()
        guard case .unverified(_, let appError) = try await AppTransaction.shared else {
            Issue.record("the app transaction was not unverified")
            return
        }
        #expect(appError == .invalidSignature)
        let monthly = try #require(try await Product.products(for: ["com.example.game.premium.monthly"]).first)
        if case .success(let subscribed) = try await monthly.purchase() { await subscribed.unsafePayloadValue.finish() }
        let status = try #require(try await Product.SubscriptionInfo.status(for: "5D3E7F10").first)
        guard case .unverified(_, let renewalError) = status.renewalInfo, case .unverified(_, let statusError) = status.transaction else {
            Issue.record("the subscription's renewal info or transaction was not unverified")
            return
        }
        #expect(renewalError == .invalidSignature && statusError == .invalidSignature)

        try await session.setSimulatedError(nil, forAPI: .verification)
        #expect(await session.simulatedError(forAPI: .verification) == nil)
        guard case .success(.verified(let again)) = try await coins.purchase() else {
            Issue.record("the purchase did not verify once the error was cleared")
            return
        }
        await again.finish()
        guard case .verified = try #require(try await Product.SubscriptionInfo.status(for: "5D3E7F10").first).renewalInfo else {
            Issue.record("the renewal info did not verify once the error was cleared")
            return
        }
    }

    @Test("a new session starts with no simulated error, whatever the previous one set")
    func newSessionStartsClean() async throws {
        var first: SKTestSession? = try SKTestSession(configurationFileNamed: "Store")
        try await first?.setSimulatedError(.generic(.unknown), forAPI: .loadProducts)
        try await first?.setSimulatedError(.verification(.revokedCertificate), forAPI: .verification)
        let second = try SKTestSession(configurationFileNamed: "Store")
        #expect(await second.simulatedError(forAPI: .loadProducts) == nil)
        #expect(await second.simulatedError(forAPI: .verification) == nil)
        #expect(try await Product.products(for: ["com.example.game.coins100"]).count == 1)

        try await second.setSimulatedError(.purchase(.purchaseNotAllowed), forAPI: .purchase)
        first = nil   // the first session's end does not touch the bound one's errors
        #expect(await second.simulatedError(forAPI: .purchase) == .purchase(.purchaseNotAllowed))
    }

    /// The error `body` throws, nil when it returns.
    static func error(_ body: () async throws -> Void) async -> (any Error)? {
        do {
            try await body()
            return nil
        } catch {
            return error
        }
    }
}
}
