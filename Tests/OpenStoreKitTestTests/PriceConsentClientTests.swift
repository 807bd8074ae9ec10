// A price increase that needs consent, as an app's own code sees it, in this process against a
// real storekitd: StoreKit 1's delegate is asked `paymentQueueShouldShowPriceConsent(_:)`, StoreKit
// 2's renewal info says `.pending`, then `.agreed` once the subscriber answers.
import Foundation
@_spi(StoreKitTest) import OpenStoreKit
@testable import OpenStoreKitTest
import StoreKitTestSupport
import Testing

extension OpenStoreKitTestSuites {
@Suite("Price-increase consent, in the app's process")
struct PriceConsentClientTests {
    final class Delegate: NSObject, SKPaymentQueueDelegate, @unchecked Sendable {
        private let lock = NSLock()
        private var asked = 0
        var times: Int { lock.withLock { asked } }

        func paymentQueueShouldShowPriceConsent(_ paymentQueue: SKPaymentQueue) -> Bool {
            lock.withLock { asked += 1 }
            return false
        }
    }

    final class Observer: NSObject, SKPaymentTransactionObserver {
        func paymentQueue(_ queue: SKPaymentQueue, updatedTransactions transactions: [SKPaymentTransaction]) {
            for transaction in transactions where transaction.transactionState != .purchasing { queue.finishTransaction(transaction) }
        }
    }

    @Test("the delegate is asked when the price rises; the renewal info says pending, then agreed")
    func delegateAndRenewalInfo() async throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        // The sample app, registered under this test process's app identifier.
        let config = (daemon.configFile as NSString).deletingLastPathComponent
        try "[App]\nID=\(TestStoreBinding.appIdentifier)\nCatalog=catalog/example.storekit\n"
            .write(toFile: config + "/apps.d/com.example.game.conf", atomically: true, encoding: .utf8)
        try daemon.start()
        TestStoreBinding.bind(socketPath: daemon.clientSocket, dataHome: daemon.dataHome)
        defer { TestStoreBinding.unbind() }
        SKPaymentQueue.callbackQueue = DispatchQueue(label: "tests.price")
        let delegate = Delegate()
        SKPaymentQueue.default().delegate = delegate
        let observer = Observer()
        SKPaymentQueue.default().add(observer)
        defer { SKPaymentQueue.default().remove(observer) }

        let product = try #require(try await Product.products(for: ["com.example.game.premium.monthly"]).first)
        guard case .success(let verification) = try await product.purchase() else { throw CancellationError() }
        let transaction = try verification.payloadValue
        await transaction.finish()
        #expect(try daemon.ctl(["price-increase", String(transaction.id)]).status == 0)
        let deadline = Date().addingTimeInterval(10)
        while delegate.times == 0, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(delegate.times == 1)
        SKPaymentQueue.default().showPriceConsentIfNeeded()

        func status() async throws -> Product.SubscriptionInfo.RenewalInfo.PriceIncreaseStatus? {
            let statuses = try await product.subscription?.status ?? []
            return try statuses.first?.renewalInfo.payloadValue.priceIncreaseStatus
        }
        #expect(try await status() == .pending)
        #expect(try daemon.ctl(["price-consent", "yes", String(transaction.id)]).status == 0)
        #expect(try await status() == .agreed)
    }

    @Test("SKTestTransaction.isPendingPriceIncreaseConsent follows the subscription's increase")
    func testTransactionSaysPending() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        session.clearTransactions()
        let product = try #require(try await Product.products(for: ["com.example.game.premium.monthly"]).first)
        guard case .success(let verification) = try await product.purchase() else { throw CancellationError() }
        let transaction = try verification.payloadValue
        await transaction.finish()
        func pending() -> Bool? {
            session.allTransactions().first { $0.identifier == Int(transaction.id) }?.isPendingPriceIncreaseConsent
        }
        #expect(pending() == false)
        _ = try session.daemon.control(.priceIncrease, ["id=\(transaction.id)"])
        #expect(pending() == true)
        _ = try session.daemon.control(.priceConsent, ["agreed=yes", "id=\(transaction.id)"])
        #expect(pending() == false)
    }
}
}
