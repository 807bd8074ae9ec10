// An XCTest suite written as for Apple's StoreKitTest, with only the imports changed
// (StoreKit → OpenStoreKit, StoreKitTest → OpenStoreKitTest): each test starts a session on the
// test target's configuration file, and the app's own StoreKit code runs against it.
import OpenStoreKit
import OpenStoreKitTest
import XCTest

final class StoreTestsXCTest: XCTestCase {
    private var session: SKTestSession!

    override func setUpWithError() throws {
        session = try SKTestSession(configurationFileNamed: "Store")
        session.resetToDefaultState()
        session.disableDialogs = true
        session.clearTransactions()
    }

    override func tearDown() {
        session = nil
    }

    func testAPurchaseIsVerifiedFinishedAndListed() async throws {
        let products = try await Product.products(for: ["com.example.game.level_pack"])
        let levelPack = try XCTUnwrap(products.first)
        XCTAssertEqual(levelPack.displayName, "Level Pack")
        let result = try await levelPack.purchase()
        guard case .success(.verified(let transaction)) = result else { return XCTFail("not a verified purchase: \(result)") }
        await transaction.finish()

        let recorded = session.allTransactions()
        XCTAssertEqual(recorded.map(\.productIdentifier), ["com.example.game.level_pack"])
        XCTAssertEqual(recorded.first?.identifier, Int(transaction.id))
        XCTAssertEqual(recorded.first?.state, .purchased)
        var entitled: [String] = []
        for await case .verified(let current) in Transaction.currentEntitlements { entitled.append(current.productID) }
        XCTAssertEqual(entitled, ["com.example.game.level_pack"])
    }

    func testASimulatedPurchaseErrorIsThrownUntilCleared() async throws {
        let products = try await Product.products(for: ["com.example.game.level_pack"])
        let levelPack = try XCTUnwrap(products.first)
        try await session.setSimulatedError(.purchase(.purchaseNotAllowed), forAPI: .purchase)
        let simulated = await session.simulatedError(forAPI: .purchase)
        XCTAssertEqual(simulated, .purchase(.purchaseNotAllowed))
        do {
            _ = try await levelPack.purchase()
            XCTFail("the purchase did not throw the simulated error")
        } catch {
            XCTAssertEqual(error as? Product.PurchaseError, .purchaseNotAllowed)
        }
        XCTAssertTrue(session.allTransactions().isEmpty)

        try await session.setSimulatedError(nil, forAPI: .purchase)
        let cleared = await session.simulatedError(forAPI: .purchase)
        XCTAssertNil(cleared)
        guard case .success(.verified(let transaction)) = try await levelPack.purchase() else { return XCTFail("not a verified purchase") }
        await transaction.finish()
    }

    func testAskToBuyWaitsForTheParent() async throws {
        session.askToBuyEnabled = true
        XCTAssertTrue(session.askToBuyEnabled)
        let products = try await Product.products(for: ["com.example.game.coins100"])
        let coins = try XCTUnwrap(products.first)
        let result = try await coins.purchase()
        guard case .pending = result else { return XCTFail("Ask to Buy: expected pending, got \(result)") }
        let deferred = try XCTUnwrap(session.allTransactions().first)
        XCTAssertTrue(deferred.pendingAskToBuyConfirmation)
        try session.approveAskToBuyTransaction(identifier: deferred.identifier)
        XCTAssertEqual(session.allTransactions().last?.state, .purchased)
    }

    func testFailedTransactionsCarryTheChosenError() async throws {
        session.failTransactionsEnabled = true
        session.failureError = .paymentNotAllowed
        XCTAssertEqual(session.failureError, .paymentNotAllowed)
        let products = try await Product.products(for: ["com.example.game.coins100"])
        let coins = try XCTUnwrap(products.first)
        do {
            let result = try await coins.purchase()
            XCTFail("a failing store let the purchase through: \(result)")
        } catch {
            XCTAssertEqual(session.allTransactions().last?.state, .failed)
        }
        session.failTransactionsEnabled = false
        let result = try await coins.purchase()
        guard case .success(.verified(let transaction)) = result else { return XCTFail("\(result)") }
        await transaction.finish()
    }

    func testSubscriptionsRenewExpireAndRefund() async throws {
        let bought = try await session.buyProduct(identifier: "com.example.game.premium.monthly")
        XCTAssertEqual(bought.productID, "com.example.game.premium.monthly")
        try session.forceRenewalOfSubscription(productIdentifier: "com.example.game.premium.monthly")
        let afterRenewal = session.allTransactions()
        XCTAssertEqual(afterRenewal.count, 2)
        XCTAssertEqual(afterRenewal.last?.originalTransactionIdentifier, Int(bought.id))
        XCTAssertTrue(afterRenewal.last?.autoRenewingEnabled ?? false)

        try session.disableAutoRenewForTransaction(identifier: Int(bought.id))
        XCTAssertFalse(session.allTransactions().last?.autoRenewingEnabled ?? true)
        try session.expireSubscription(productIdentifier: "com.example.game.premium.monthly")
        var entitled: [String] = []
        for await case .verified(let current) in Transaction.currentEntitlements { entitled.append(current.productID) }
        XCTAssertEqual(entitled, [])

        let pack = try await session.buyProduct(identifier: "com.example.game.level_pack")
        XCTAssertNil(session.allTransactions().first { $0.identifier == Int(pack.id) }?.cancelDate)
        try session.refundTransaction(identifier: Int(pack.id))
        let refunded = session.allTransactions().first { $0.identifier == Int(pack.id) }
        XCTAssertTrue(refunded?.refunded ?? false)
        XCTAssertNotNil(refunded?.cancelDate, "a refund sets cancelDate, as StoreKit 2's revocationDate")
    }

    func testSettingsReadBackAndReset() throws {
        session.storefront = "GBR"
        XCTAssertEqual(session.storefront, "GBR")
        session.timeRate = .monthlyRenewalEveryThirtySeconds
        XCTAssertEqual(session.timeRate, .monthlyRenewalEveryThirtySeconds)
        session.interruptedPurchasesEnabled = true
        XCTAssertTrue(session.interruptedPurchasesEnabled)
        session.resetToDefaultState()
        XCTAssertEqual(session.storefront, "USA")
        XCTAssertEqual(session.timeRate, .realTime)
        XCTAssertFalse(session.interruptedPurchasesEnabled)
        XCTAssertThrowsError(try session.approveAskToBuyTransaction(identifier: 42))
    }
}
