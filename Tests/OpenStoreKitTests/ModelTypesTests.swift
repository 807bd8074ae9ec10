import Foundation
@testable import OpenStoreKit
import StoreKitWire
import Testing

// MARK: - Test doubles, written the way apps write them

/// A transaction double that overrides what StoreKit makes read-only.
private final class StubTransaction: SKPaymentTransaction {
    var stubState: SKPaymentTransactionState = .purchased
    var stubIdentifier: String? = "stub-1"
    var stubPayment = SKPayment()

    override var transactionState: SKPaymentTransactionState { stubState }
    override var transactionIdentifier: String? { stubIdentifier }
    override var payment: SKPayment { stubPayment }
    override var transactionDate: Date? { Date(timeIntervalSince1970: 0) }
    override var error: (any Error)? { SKError(.paymentCancelled) }
}

/// A product double with a fixed identifier and price.
private final class StubProduct: SKProduct {
    let identifier: String
    init(identifier: String) {
        self.identifier = identifier
        super.init()
    }
    override var productIdentifier: String { identifier }
    override var price: NSDecimalNumber { NSDecimalNumber(string: "4.99") }
    override var localizedTitle: String { "Stub" }
}

/// Implements only the one required callback.
private final class MinimalObserver: NSObject, SKPaymentTransactionObserver {
    func paymentQueue(_ queue: SKPaymentQueue, updatedTransactions transactions: [SKPaymentTransaction]) {}
}

/// Implements optional callbacks too; they must be the ones called through the protocol.
private final class RecordingObserver: NSObject, SKPaymentTransactionObserver {
    var removed: [String?] = []
    var storefrontChanges = 0

    func paymentQueue(_ queue: SKPaymentQueue, updatedTransactions transactions: [SKPaymentTransaction]) {}

    func paymentQueue(_ queue: SKPaymentQueue, removedTransactions transactions: [SKPaymentTransaction]) {
        removed += transactions.map(\.transactionIdentifier)
    }

    func paymentQueue(_ queue: SKPaymentQueue, shouldAddStorePayment payment: SKPayment, for product: SKProduct) -> Bool {
        false
    }

    func paymentQueueDidChangeStorefront(_ queue: SKPaymentQueue) {
        storefrontChanges += 1
    }
}

private final class MinimalQueueDelegate: NSObject, SKPaymentQueueDelegate {}

private final class ProductsDelegate: NSObject, SKProductsRequestDelegate {
    func productsRequest(_ request: SKProductsRequest, didReceive response: SKProductsResponse) {}
}

private func record(
    id: UInt64 = 42, originalID: UInt64? = nil, state: TransactionState = .purchased,
    errorCode: Int32? = nil, errorMessage: String? = nil
) -> TransactionRecord {
    TransactionRecord(
        id: id, originalID: originalID, uid: 1000, app: "com.example.game", productID: "com.example.gems",
        quantity: 3, state: state, sequence: 9, date: 1_700_000_000_250, errorCode: errorCode,
        errorMessage: errorMessage, applicationUsername: "player-7")
}

private func productRecord(period: String? = nil) -> ProductRecord {
    ProductRecord(
        productID: "com.example.pro.monthly", kind: .autoRenewable, localizedTitle: "Pro",
        localizedDescription: "All levels", priceCents: 499, displayPrice: "4,99 €", currencyCode: "EUR",
        locale: "de_DE", subscriptionGroupID: "pro", subscriptionPeriod: period, familyShareable: true)
}

// MARK: - SKError

@Suite("SKError")
struct SKErrorTests {
    @Test func bridgesToNSErrorWithDomainCodeAndMessage() {
        let error: any Error = SKError(.paymentNotAllowed, userInfo: [NSLocalizedDescriptionKey: "Not allowed"])
        let nsError = error as NSError
        #expect(nsError.domain == SKErrorDomain)
        #expect(SKErrorDomain == "SKErrorDomain")
        #expect(SKError.errorDomain == SKErrorDomain)
        #expect(nsError.code == 4)
        #expect(nsError.localizedDescription == "Not allowed")
        #expect(error.localizedDescription == "Not allowed")
    }

    @Test func roundTripsThroughNSError() {
        let original = SKError(.invalidSignature, userInfo: [NSLocalizedDescriptionKey: "Bad signature"])
        let back = SKError(_nsError: original as NSError)
        #expect(back.code == .invalidSignature)
        #expect(back.errorCode == 12)
        #expect(back.localizedDescription == "Bad signature")
        #expect(back == original)
        #expect(Set([back, original]).count == 1)
        #expect(back != SKError(.unknown))
    }

    @Test func keepsACodeItDoesNotKnow() {
        let error = SKError(_nsError: NSError(domain: SKErrorDomain, code: 99))
        #expect(error.code == .unknown)
        #expect(error.errorCode == 99)
        #expect((error as NSError).code == 99)
    }

    /// StoreKit 1 code wraps whatever its restore-failure callback got, `SKError(_nsError: error as
    /// NSError)`; Apple's initializer accepts an error of any domain, and so must this one.
    @Test func wrapsAnNSErrorOfAnotherDomain() {
        let network = NSError(domain: NSURLErrorDomain, code: NSURLErrorNotConnectedToInternet,
                              userInfo: [NSLocalizedDescriptionKey: "The Internet connection appears to be offline."])
        let error = SKError(_nsError: network)
        #expect(error._nsError === network)
        #expect(error.code == .unknown, "-1009 is not an SKError.Code")
        #expect(error.errorCode == NSURLErrorNotConnectedToInternet)
        #expect(error.localizedDescription == "The Internet connection appears to be offline.")
        #expect(error.userInfo[NSLocalizedDescriptionKey] as? String == "The Internet connection appears to be offline.")
        #expect(error != SKError(_nsError: NSError(domain: SKErrorDomain, code: NSURLErrorNotConnectedToInternet)),
                "same code, other domain")

        // A code that happens to be an SKError.Code raw value reads as that code, as on Apple platforms.
        let cocoa = SKError(_nsError: CocoaError(.fileNoSuchFile) as NSError)
        #expect(cocoa.errorCode == CocoaError.Code.fileNoSuchFile.rawValue)
        #expect(cocoa.code == SKError.Code(rawValue: CocoaError.Code.fileNoSuchFile.rawValue) ?? .unknown)

        // Any Error, wrapped the way apps do it: its bridged domain and code are kept.
        struct AppFailure: Error {}
        let bridged = AppFailure() as NSError
        let wrapped = SKError(_nsError: bridged)
        #expect(wrapped._nsError.domain == bridged.domain)
        #expect(wrapped.errorCode == bridged.code)
    }

    @Test func catchPatternMatchesThrownErrors() {
        func buy(failingWith error: any Error) throws { throw error }

        var caught = ""
        do {
            try buy(failingWith: SKError(.paymentCancelled))
        } catch SKError.paymentCancelled {
            caught = "cancelled"
        } catch {
            caught = "other"
        }
        #expect(caught == "cancelled")

        do {
            try buy(failingWith: SKError(.storeProductNotAvailable))
        } catch SKError.paymentCancelled {
            caught = "cancelled"
        } catch SKError.storeProductNotAvailable {
            caught = "unavailable"
        } catch {
            caught = "other"
        }
        #expect(caught == "unavailable")

        // An NSError of SKErrorDomain matches too, one of another domain does not.
        #expect(SKError.paymentCancelled ~= NSError(domain: SKErrorDomain, code: 2))
        #expect(!(SKError.paymentCancelled ~= NSError(domain: NSCocoaErrorDomain, code: 2)))
        #expect(!(SKError.paymentCancelled ~= CocoaError(.fileNoSuchFile)))
    }

    @Test func codesHaveApplesRawValues() {
        let expected: [(SKError.Code, Int)] = [
            (.unknown, 0), (.clientInvalid, 1), (.paymentCancelled, 2), (.paymentInvalid, 3),
            (.paymentNotAllowed, 4), (.storeProductNotAvailable, 5), (.cloudServicePermissionDenied, 6),
            (.cloudServiceNetworkConnectionFailed, 7), (.cloudServiceRevoked, 8),
            (.privacyAcknowledgementRequired, 9), (.unauthorizedRequestData, 10), (.invalidOfferIdentifier, 11),
            (.invalidSignature, 12), (.missingOfferParams, 13), (.invalidOfferPrice, 14),
            (.overlayCancelled, 15), (.overlayInvalidConfiguration, 16), (.overlayTimeout, 17),
            (.ineligibleForOffer, 18), (.unsupportedPlatform, 19), (.overlayPresentedInBackgroundScene, 20),
        ]
        for (code, rawValue) in expected {
            #expect(code.rawValue == rawValue)
            #expect(SKError.Code(rawValue: rawValue) == code)
        }
        #expect((0...20).allSatisfy { SKError.Code(rawValue: $0) != nil })
        #expect(SKError.Code(rawValue: 21) == nil)
    }

    @Test func staticMembersNameTheCodes() {
        #expect(SKError.unknown == .unknown)
        #expect(SKError.paymentCancelled == .paymentCancelled)
        #expect(SKError.overlayPresentedInBackgroundScene == .overlayPresentedInBackgroundScene)
        #expect(SKError(.clientInvalid).code == SKError.clientInvalid)
    }
}

// MARK: - Protocols

@Suite("Observer and delegate protocols")
struct ProtocolTests {
    @Test func minimalObserverGetsDefaults() {
        let queue = SKPaymentQueue()
        let observer: any SKPaymentTransactionObserver = MinimalObserver()
        #expect(observer.paymentQueue(queue, shouldAddStorePayment: SKPayment(), for: SKProduct()))
        observer.paymentQueue(queue, removedTransactions: [])
        observer.paymentQueue(queue, restoreCompletedTransactionsFailedWithError: SKError(.unknown))
        observer.paymentQueueRestoreCompletedTransactionsFinished(queue)
        observer.paymentQueue(queue, updatedDownloads: [])
        observer.paymentQueueDidChangeStorefront(queue)
        observer.paymentQueue(queue, didRevokeEntitlementsForProductIdentifiers: ["x"])
    }

    @Test func implementedOptionalCallbacksAreDynamicallyDispatched() {
        let queue = SKPaymentQueue()
        let recording = RecordingObserver()
        let observer: any SKPaymentTransactionObserver = recording
        let transaction = StubTransaction()
        observer.paymentQueue(queue, removedTransactions: [transaction])
        observer.paymentQueueDidChangeStorefront(queue)
        #expect(recording.removed == ["stub-1"])
        #expect(recording.storefrontChanges == 1)
        #expect(!observer.paymentQueue(queue, shouldAddStorePayment: SKPayment(), for: SKProduct()))
    }

    @Test func observersAreClassBoundAndComparedByIdentity() {
        let recording = RecordingObserver()
        let observers: [any SKPaymentTransactionObserver] = [recording, MinimalObserver()]
        #expect(observers.contains { $0 === recording })
        #expect(observers[0].isEqual(recording))
        weak var weakObserver: (any SKPaymentTransactionObserver)?
        do {
            let temporary = MinimalObserver()
            weakObserver = temporary
            #expect(weakObserver != nil)
        }
        #expect(weakObserver == nil)
    }

    @Test func queueAndRequestDelegatesGetDefaults() {
        let queue = SKPaymentQueue()
        let delegate: any SKPaymentQueueDelegate = MinimalQueueDelegate()
        #expect(delegate.paymentQueue(queue, shouldContinue: SKPaymentTransaction(), in: SKStorefront()))
        #expect(delegate.paymentQueueShouldShowPriceConsent(queue))

        let request = SKProductsRequest(productIdentifiers: ["a"])
        let productsDelegate = ProductsDelegate()
        request.delegate = productsDelegate
        #expect(request.delegate === productsDelegate)
        #expect(request.delegate is any SKProductsRequestDelegate)
        productsDelegate.requestDidFinish(request)
        productsDelegate.request(request, didFailWithError: SKError(.unknown))
    }

    @Test func requestDelegateIsWeak() {
        let request = SKProductsRequest(productIdentifiers: ["a"])
        do {
            let delegate = ProductsDelegate()
            request.delegate = delegate
            #expect(request.delegate != nil)
        }
        #expect(request.delegate == nil)
    }
}

// MARK: - Payments

@Suite("SKPayment")
struct PaymentTests {
    @Test func paymentForProductHasQuantityOne() {
        let payment = SKPayment(product: StubProduct(identifier: "com.example.gems"))
        #expect(payment.productIdentifier == "com.example.gems")
        #expect(payment.quantity == 1)
        #expect(payment.requestData == nil)
        #expect(payment.applicationUsername == nil)
        #expect(!payment.simulatesAskToBuyInSandbox)
        #expect(payment.paymentDiscount == nil)
    }

    @Test func mutablePaymentInheritsInitAndIsSettable() throws {
        let payment = SKMutablePayment(product: StubProduct(identifier: "com.example.gems"))
        let discount = SKPaymentDiscount(
            identifier: "winback", keyIdentifier: "KEY1", nonce: UUID(), signature: "c2ln",
            timestamp: NSNumber(value: 1_700_000_000_000 as Int64))
        payment.quantity = 5
        payment.applicationUsername = "player-7"
        payment.simulatesAskToBuyInSandbox = true
        payment.requestData = Data([1, 2])
        payment.paymentDiscount = discount
        payment.productIdentifier = "com.example.coins"

        let immutable: SKPayment = payment
        #expect(immutable.productIdentifier == "com.example.coins")
        #expect(immutable.quantity == 5)

        let copy = payment.copy()
        #expect(!(copy is SKMutablePayment))
        let copied = try #require(copy as? SKPayment)
        #expect(copied !== payment)
        #expect(copied.productIdentifier == "com.example.coins")
        #expect(copied.quantity == 5)
        #expect(copied.applicationUsername == "player-7")
        #expect(copied.simulatesAskToBuyInSandbox)
        #expect(copied.requestData == Data([1, 2]))
        #expect(copied.paymentDiscount === discount)
        #expect(discount.identifier == "winback")
        #expect(discount.keyIdentifier == "KEY1")
        #expect(discount.timestamp.int64Value == 1_700_000_000_000)

        let mutable = try #require(copied.mutableCopy() as? SKMutablePayment)
        mutable.quantity = 2
        #expect(mutable.quantity == 2)
        #expect(copied.quantity == 5)
    }
}

// MARK: - Transactions

@Suite("SKPaymentTransaction")
struct TransactionTests {
    @Test func stateRawValues() {
        #expect(SKPaymentTransactionState.purchasing.rawValue == 0)
        #expect(SKPaymentTransactionState.purchased.rawValue == 1)
        #expect(SKPaymentTransactionState.failed.rawValue == 2)
        #expect(SKPaymentTransactionState.restored.rawValue == 3)
        #expect(SKPaymentTransactionState.deferred.rawValue == 4)
        for state in TransactionState.allCases {
            #expect(SKPaymentTransactionState(state).rawValue == Int(state.rawValue))
        }
    }

    @Test func testDoublesOverrideTheReadOnlyProperties() {
        let transaction = StubTransaction()
        transaction.stubState = .deferred
        transaction.stubPayment = SKPayment(product: StubProduct(identifier: "p"))
        let seen: SKPaymentTransaction = transaction
        #expect(seen.transactionState == .deferred)
        #expect(seen.transactionIdentifier == "stub-1")
        #expect(seen.payment.productIdentifier == "p")
        #expect(seen.original == nil)
        #expect(seen.downloads.isEmpty)
        #expect((seen.error as? SKError)?.code == .paymentCancelled)

        let product: SKProduct = StubProduct(identifier: "com.example.x")
        #expect(product.productIdentifier == "com.example.x")
        #expect(product.price == NSDecimalNumber(string: "4.99"))
        #expect(product.localizedTitle == "Stub")
    }

    @Test func emptyTransactionIsPurchasing() {
        let transaction = SKPaymentTransaction()
        #expect(transaction.transactionState == .purchasing)
        #expect(transaction.transactionIdentifier == nil)
        #expect(transaction.transactionDate == nil)
        #expect(transaction.error == nil)
        #expect(transaction.payment.quantity == 1)
        #expect(transaction.record == nil)
    }

    @Test func mapsARecord() throws {
        let transaction = SKPaymentTransaction(record: record(id: 42, originalID: 7, state: .restored), payment: nil)
        #expect(transaction.record?.id == 42)
        #expect(transaction.transactionIdentifier == "42")
        #expect(transaction.transactionState == .restored)
        #expect(transaction.transactionDate == Date(timeIntervalSince1970: 1_700_000_000.25))
        #expect(transaction.error == nil)
        #expect(transaction.downloads.isEmpty)
        #expect(transaction.payment.productIdentifier == "com.example.gems")
        #expect(transaction.payment.quantity == 3)
        #expect(transaction.payment.applicationUsername == "player-7")

        let original = try #require(transaction.original)
        #expect(original.transactionIdentifier == "7")
        #expect(original.transactionState == .purchased)
        #expect(original.payment.productIdentifier == "com.example.gems")
        #expect(original.original == nil)
    }

    @Test func keepsTheAppsPayment() {
        let payment = SKMutablePayment()
        payment.productIdentifier = "com.example.gems"
        let transaction = SKPaymentTransaction(record: record(state: .purchasing), payment: payment)
        #expect(transaction.payment === payment)
        #expect(transaction.original == nil)

        transaction.update(from: record(state: .purchased))
        #expect(transaction.transactionState == .purchased)
        #expect(transaction.payment === payment)
    }

    @Test func mapsAFailure() throws {
        let failed = SKPaymentTransaction(
            record: record(state: .failed, errorCode: 2, errorMessage: "The user cancelled."), payment: nil)
        let error = try #require(failed.error)
        #expect(SKError.paymentCancelled ~= error)
        let skError = try #require(error as? SKError)
        #expect(skError.code == .paymentCancelled)
        #expect(skError.localizedDescription == "The user cancelled.")
        #expect((error as NSError).domain == SKErrorDomain)

        let withoutCode = SKPaymentTransaction(record: record(state: .failed), payment: nil)
        #expect((withoutCode.error as? SKError)?.code == .unknown)

        let unknownCode = SKPaymentTransaction(record: record(state: .failed, errorCode: 99), payment: nil)
        #expect((unknownCode.error as? SKError)?.code == .unknown)
        #expect((unknownCode.error as? SKError)?.errorCode == 99)
    }
}

// MARK: - Products

@Suite("SKProduct")
struct ProductTests {
    @Test func mapsARecord() {
        let product = SKProduct(record: productRecord(period: "P1M"))
        #expect(product.record == productRecord(period: "P1M"))
        #expect(product.productIdentifier == "com.example.pro.monthly")
        #expect(product.localizedTitle == "Pro")
        #expect(product.localizedDescription == "All levels")
        #expect(product.price == NSDecimalNumber(string: "4.99"))
        #expect(product.priceLocale.currency?.identifier == "EUR")
        #expect(product.priceLocale.language.languageCode?.identifier == "de")
        #expect(product.subscriptionPeriod?.numberOfUnits == 1)
        #expect(product.subscriptionPeriod?.unit == .month)
        #expect(product.subscriptionGroupIdentifier == "pro")
        #expect(product.isFamilyShareable)
        #expect(!product.isDownloadable)
        #expect(product.downloadContentLengths.isEmpty)
        #expect(product.introductoryPrice == nil)
        #expect(product.discounts.isEmpty)
    }

    @Test func pricesAreExactDecimals() {
        var cheap = productRecord()
        cheap.priceCents = 99
        #expect(SKProduct(record: cheap).price == NSDecimalNumber(string: "0.99"))
        cheap.priceCents = 0
        #expect(SKProduct(record: cheap).price == NSDecimalNumber.zero)
        cheap.priceCents = 1_999_999
        #expect(SKProduct(record: cheap).price == NSDecimalNumber(string: "19999.99"))
    }

    @Test(arguments: [
        ("P1D", 1, SKProduct.PeriodUnit.day), ("P3D", 3, .day), ("P1W", 1, .week), ("P2W", 2, .week),
        ("P1M", 1, .month), ("P6M", 6, .month), ("P1Y", 1, .year),
    ])
    func parsesSubscriptionPeriods(text: String, units: Int, unit: SKProduct.PeriodUnit) {
        let period = SKProduct(record: productRecord(period: text)).subscriptionPeriod
        #expect(period?.numberOfUnits == units)
        #expect(period?.unit == unit)
    }

    @Test(arguments: ["", "P", "1M", "PM", "P1X", "P0M", "P-1M", "P1Y2M", "PT1H"])
    func rejectsOtherDurations(text: String) {
        #expect(SKProductSubscriptionPeriod(iso8601: text) == nil)
    }

    @Test func nonSubscriptionHasNoPeriod() {
        #expect(SKProduct(record: productRecord(period: nil)).subscriptionPeriod == nil)
        #expect(SKProduct().subscriptionPeriod == nil)
        #expect(SKProduct().productIdentifier == "")
    }

    @Test func enumsHaveApplesRawValues() {
        #expect(SKProduct.PeriodUnit.day.rawValue == 0)
        #expect(SKProduct.PeriodUnit.week.rawValue == 1)
        #expect(SKProduct.PeriodUnit.month.rawValue == 2)
        #expect(SKProduct.PeriodUnit.year.rawValue == 3)
        #expect(SKProductDiscount.PaymentMode.payAsYouGo.rawValue == 0)
        #expect(SKProductDiscount.PaymentMode.payUpFront.rawValue == 1)
        #expect(SKProductDiscount.PaymentMode.freeTrial.rawValue == 2)
        let introductory: SKProductDiscount.`Type` = .introductory
        let subscription: SKProductDiscount.`Type` = .subscription
        #expect(introductory.rawValue == 0)
        #expect(subscription.rawValue == 1)
        #expect(SKDownloadState.waiting.rawValue == 0)
        #expect(SKDownloadState.cancelled.rawValue == 5)
        #expect(SKProductDiscount().type == .introductory)
    }

    @Test func responseAndStorefrontCarryTheirValues() {
        let response = SKProductsResponse(
            products: [SKProduct(record: productRecord())], invalidProductIdentifiers: ["nope"])
        #expect(response.products.map(\.productIdentifier) == ["com.example.pro.monthly"])
        #expect(response.invalidProductIdentifiers == ["nope"])
        #expect(SKProductsResponse().products.isEmpty)

        let storefront = SKStorefront(countryCode: "DEU", identifier: "143443")
        #expect(storefront.countryCode == "DEU")
        #expect(storefront.identifier == "143443")
    }
}

/// What an app sees of the daemon's refusals: the `SKError` StoreKit would give for each.
@Suite struct DaemonRefusalMappingTests {
    @Test("the store being unreachable, full or failing is StoreKit's network error; other refusals keep their meaning")
    func refusalsBecomeStoreKitErrors() {
        for code in [ResultCode.storeUnreachable, .storageFailure, .storageFull, .shuttingDown] {
            let error = StoreConnection.error(code: code, detail: 0, message: "PostgreSQL is unreachable")
            #expect(error.code == .cloudServiceNetworkConnectionFailed, "\(code.name)")
            #expect(error.userInfo["StoreKitDaemonResult"] as? String == code.name)
            #expect(error.localizedDescription == "PostgreSQL is unreachable")
        }
        #expect(StoreConnection.error(code: .storeKit, detail: 2, message: "").code == .paymentCancelled)
        #expect(StoreConnection.error(code: .permissionDenied, detail: 0, message: "").code == .clientInvalid)
        #expect(StoreConnection.error(code: .rateLimited, detail: 0, message: "").code == .unknown)
    }
}
