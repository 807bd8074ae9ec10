// Code written the way StoreKit 1 apps write it, against `import OpenStoreKit` alone (no
// `@testable`, no `import Foundation`): if this file compiles, such apps compile. The runtime checks
// exercise only the model types; queue calls sit in functions the tests never call.
import OpenStoreKit
import Testing

// MARK: - App types whose names must not clash with the library

/// An app's own payment value.
private struct Payment: Equatable {
    var productID: String
    var amount: Decimal
}

/// An app's own record of something bought.
private struct Purchase: Equatable {
    let productID: String
    let transactionID: String?
}

/// An app's own queue of payments.
private final class PaymentQueue {
    var pending: [Payment] = []
}

// Apps add this themselves; it would not compile if the library declared it. (Apps, in another
// package, write `@retroactive`; within this package the attribute is an error.)
extension SKPaymentTransactionState: CustomDebugStringConvertible {
    public var debugDescription: String {
        switch self {
        case .purchasing: "purchasing"
        case .purchased: "purchased"
        case .failed: "failed"
        case .restored: "restored"
        case .deferred: "deferred"
        @unknown default: "unknown"
        }
    }
}

extension SKProduct {
    /// The localized price, as apps usually format it.
    fileprivate var localizedPrice: String? {
        let formatter = NumberFormatter()
        formatter.numberStyle = .currency
        formatter.locale = priceLocale
        return formatter.string(from: price)
    }
}

// MARK: - The app's store observer

private final class StoreObserver: NSObject, SKPaymentTransactionObserver {
    enum Action: Equatable {
        case wait
        case deliver(Purchase)
        case showError(String)
        case finishSilently
    }

    private(set) var delivered: [Purchase] = []
    let appQueue = PaymentQueue()

    /// What to do with one transaction; pure, so tests can call it without a queue.
    func action(for transaction: SKPaymentTransaction) -> Action {
        switch transaction.transactionState {
        case .purchasing, .deferred:
            return .wait
        case .purchased:
            return .deliver(Purchase(
                productID: transaction.payment.productIdentifier,
                transactionID: transaction.transactionIdentifier))
        case .restored:
            return .deliver(Purchase(
                productID: transaction.payment.productIdentifier,
                transactionID: transaction.original?.transactionIdentifier))
        case .failed:
            if let error = transaction.error as? SKError, error.code == .paymentCancelled {
                return .finishSilently
            }
            return .showError(transaction.error?.localizedDescription ?? "Unknown error")
        @unknown default:
            return .wait
        }
    }

    func paymentQueue(_ queue: SKPaymentQueue, updatedTransactions transactions: [SKPaymentTransaction]) {
        for transaction in transactions {
            switch action(for: transaction) {
            case .wait:
                continue
            case .deliver(let purchase):
                delivered.append(purchase)
            case .showError, .finishSilently:
                break
            }
            finish(transaction, in: queue)
        }
    }

    func paymentQueue(_ queue: SKPaymentQueue, restoreCompletedTransactionsFailedWithError error: Error) {
        if (error as NSError).domain == SKErrorDomain, (error as NSError).code == SKError.paymentCancelled.rawValue {
            return
        }
    }

    func paymentQueueRestoreCompletedTransactionsFinished(_ queue: SKPaymentQueue) {}

    func paymentQueue(_ queue: SKPaymentQueue, shouldAddStorePayment payment: SKPayment, for product: SKProduct) -> Bool {
        false
    }
}

/// Apps make `SKPaymentQueue` conform to their own protocol to swap in a fake queue.
private protocol StorePaymentQueue: AnyObject {
    var transactions: [SKPaymentTransaction] { get }
    func add(_ payment: SKPayment)
    func add(_ observer: SKPaymentTransactionObserver)
    func remove(_ observer: SKPaymentTransactionObserver)
    func finishTransaction(_ transaction: SKPaymentTransaction)
    func restoreCompletedTransactions()
    func restoreCompletedTransactions(withApplicationUsername username: String?)
}

extension SKPaymentQueue: StorePaymentQueue {}

/// A fake queue as apps subclass it in their tests.
// SKPaymentQueue is `@unchecked Sendable`, so Swift 6 asks every subclass to restate it.
private final class FakePaymentQueue: SKPaymentQueue, @unchecked Sendable {
    var finished: [SKPaymentTransaction] = []
    override func finishTransaction(_ transaction: SKPaymentTransaction) {
        finished.append(transaction)
    }
}

extension StoreObserver {
    func startObserving() {
        SKPaymentQueue.default().add(self)
    }

    func stopObserving() {
        SKPaymentQueue.default().remove(self)
    }

    func buy(_ product: SKProduct, quantity: Int = 1) {
        guard SKPaymentQueue.canMakePayments() else { return }
        let payment = SKMutablePayment(product: product)
        payment.quantity = quantity
        payment.applicationUsername = "hashed-account-id"
        appQueue.pending.append(Payment(productID: product.productIdentifier, amount: product.price as Decimal))
        SKPaymentQueue.default().add(payment)
    }

    func restore() {
        SKPaymentQueue.default().restoreCompletedTransactions()
    }

    func finish(_ transaction: SKPaymentTransaction, in queue: SKPaymentQueue) {
        queue.finishTransaction(transaction)
    }
}

// MARK: - The app's product fetcher

private final class ProductFetcher: NSObject, SKProductsRequestDelegate {
    private var request: SKProductsRequest?
    private(set) var products: [SKProduct] = []
    private(set) var lastError: Error?

    func fetch(_ identifiers: Set<String>) {
        request?.cancel()
        let request = SKProductsRequest(productIdentifiers: identifiers)
        request.delegate = self
        request.start()
        self.request = request
    }

    func productsRequest(_ request: SKProductsRequest, didReceive response: SKProductsResponse) {
        products = response.products
        for identifier in response.invalidProductIdentifiers {
            _ = identifier
        }
    }

    func request(_ request: SKRequest, didFailWithError error: Error) {
        lastError = error
    }

    func requestDidFinish(_ request: SKRequest) {
        self.request = nil
    }
}

// MARK: - Error handling as apps write it

private func message(for error: Error) -> String {
    switch error {
    case SKError.paymentCancelled:
        return "cancelled"
    case SKError.paymentNotAllowed:
        return "not allowed"
    case let error as SKError where error.code == .storeProductNotAvailable:
        return "unavailable"
    default:
        return error.localizedDescription
    }
}

private func purchaseOrThrow(_ error: SKError?) throws -> String {
    if let error { throw error }
    return "ok"
}

// MARK: - Test doubles as apps write them

private final class MockTransaction: SKPaymentTransaction {
    private let mockState: SKPaymentTransactionState
    private let mockPayment: SKPayment
    private let mockIdentifier: String?
    private let mockOriginal: SKPaymentTransaction?
    private let mockError: Error?

    init(
        state: SKPaymentTransactionState, productID: String, identifier: String? = "1000",
        original: SKPaymentTransaction? = nil, error: Error? = nil
    ) {
        mockState = state
        let payment = SKMutablePayment()
        payment.productIdentifier = productID
        mockPayment = payment
        mockIdentifier = identifier
        mockOriginal = original
        mockError = error
        super.init()
    }

    override var transactionState: SKPaymentTransactionState { mockState }
    override var payment: SKPayment { mockPayment }
    override var transactionIdentifier: String? { mockIdentifier }
    override var original: SKPaymentTransaction? { mockOriginal }
    override var error: Error? { mockError }
    override var transactionDate: Date? { Date(timeIntervalSince1970: 1_700_000_000) }
}

private final class MockProduct: SKProduct {
    override var productIdentifier: String { "com.example.game.gems" }
    override var price: NSDecimalNumber { NSDecimalNumber(string: "0.99") }
    override var priceLocale: Locale { Locale(identifier: "en_US") }
    override var localizedTitle: String { "100 Gems" }
}

private final class MockStorefront: SKStorefront {
    override var countryCode: String { "USA" }
}

// MARK: - Tests

@Suite("Apple source compatibility")
struct AppleSourceCompatibilityTests {
    @Test func observerHandlesEveryState() {
        let observer = StoreObserver()
        let original = MockTransaction(state: .purchased, productID: "com.example.game.pro", identifier: "7")

        #expect(observer.action(for: MockTransaction(state: .purchasing, productID: "p")) == .wait)
        #expect(observer.action(for: MockTransaction(state: .deferred, productID: "p")) == .wait)
        #expect(observer.action(for: MockTransaction(state: .purchased, productID: "p", identifier: "9"))
            == .deliver(Purchase(productID: "p", transactionID: "9")))
        #expect(observer.action(for: MockTransaction(state: .restored, productID: "com.example.game.pro", original: original))
            == .deliver(Purchase(productID: "com.example.game.pro", transactionID: "7")))
        #expect(observer.action(for: MockTransaction(state: .failed, productID: "p", error: SKError(.paymentCancelled)))
            == .finishSilently)
        let failure = SKError(.paymentInvalid, userInfo: [NSLocalizedDescriptionKey: "Invalid payment"])
        #expect(observer.action(for: MockTransaction(state: .failed, productID: "p", error: failure))
            == .showError("Invalid payment"))
        #expect(observer.paymentQueue(SKPaymentQueue(), shouldAddStorePayment: SKPayment(), for: MockProduct()) == false)
        #expect(String(reflecting: SKPaymentTransactionState.deferred) == "deferred")
    }

    @Test func observerFinishesWhatItHandled() {
        let observer = StoreObserver()
        let queue = FakePaymentQueue()
        let purchasing = MockTransaction(state: .purchasing, productID: "p")
        let purchased = MockTransaction(state: .purchased, productID: "p", identifier: "9")
        let cancelled = MockTransaction(state: .failed, productID: "p", error: SKError(.paymentCancelled))
        observer.paymentQueue(queue, updatedTransactions: [purchasing, purchased, cancelled])
        #expect(queue.finished.map(\.transactionIdentifier) == [purchased.transactionIdentifier, cancelled.transactionIdentifier])
        #expect(queue.finished.allSatisfy { $0 !== purchasing })
        #expect(observer.delivered == [Purchase(productID: "p", transactionID: "9")])

        let conforming: any StorePaymentQueue = queue
        conforming.finishTransaction(purchasing)
        #expect(queue.finished.last === purchasing)
    }

    @Test func errorsMatchAsAppsMatchThem() {
        #expect(message(for: SKError(.paymentCancelled)) == "cancelled")
        #expect(message(for: SKError(.paymentNotAllowed)) == "not allowed")
        #expect(message(for: SKError(.storeProductNotAvailable)) == "unavailable")
        #expect(message(for: SKError(.unknown, userInfo: [NSLocalizedDescriptionKey: "Boom"])) == "Boom")

        var outcome = ""
        do {
            outcome = try purchaseOrThrow(SKError(.paymentCancelled))
        } catch SKError.paymentCancelled {
            outcome = "cancelled"
        } catch let error as SKError {
            outcome = "other \(error.code.rawValue)"
        } catch {
            outcome = "not an SKError"
        }
        #expect(outcome == "cancelled")

        let nsError = SKError(.clientInvalid) as NSError
        #expect(nsError.domain == SKErrorDomain)
        #expect(SKError(_nsError: nsError).code == .clientInvalid)
    }

    @Test func paymentsAndProductsAsAppsUseThem() {
        let product = MockProduct()
        let payment = SKMutablePayment(product: product)
        payment.quantity = 2
        let frozen = payment.copy() as! SKPayment
        #expect(frozen.productIdentifier == "com.example.game.gems")
        #expect(frozen.quantity == 2)
        #expect(product.localizedPrice == "$0.99")
        #expect(MockStorefront().countryCode == "USA")

        let appQueue = PaymentQueue()
        appQueue.pending.append(Payment(productID: product.productIdentifier, amount: product.price as Decimal))
        #expect(appQueue.pending == [Payment(productID: "com.example.game.gems", amount: Decimal(string: "0.99")!)])

        let fetcher = ProductFetcher()
        fetcher.productsRequest(SKProductsRequest(productIdentifiers: ["a"]), didReceive: SKProductsResponse())
        #expect(fetcher.products.isEmpty)
    }
}
