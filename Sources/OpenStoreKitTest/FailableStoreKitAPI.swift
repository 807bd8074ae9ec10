@_spi(StoreKitTest) import OpenStoreKit

/// Apple's `FailableStoreKitAPI` (StoreKitTest): a StoreKit API a test session can make fail
/// (`SKTestSession.setSimulatedError(_:forAPI:)`), written `.loadProducts`, `.purchase`, ….
///
/// Of Apple's values, `.manageSubscriptions`, `.offerCodeRedeem` and `.refundRequest` are left
/// out: OpenStoreKit has no subscription-management sheet, offer-code sheet or refund request
/// on Linux, so there is no call they could make fail.
public protocol FailableStoreKitAPI<Failure>: Sendable {
    /// The errors this API can be made to fail with.
    associatedtype Failure: SKTestFailure
}

/// `AppStore.sync()`.
public struct StoreKitAppStoreSyncAPI: FailableStoreKitAPI {
    public typealias Failure = SKTestFailures.AppStoreSync
    public init() {}
}

/// `AppTransaction.shared` and `AppTransaction.refresh()`.
public struct StoreKitAppTransactionAPI: FailableStoreKitAPI {
    public typealias Failure = SKTestFailures.AppTransaction
    public init() {}
}

/// `Product.products(for:)`.
public struct StoreKitLoadProductsAPI: FailableStoreKitAPI {
    public typealias Failure = SKTestFailures.LoadProducts
    public init() {}
}

/// `Product.purchase(options:)`.
public struct StoreKitPurchaseAPI: FailableStoreKitAPI {
    public typealias Failure = SKTestFailures.Purchase
    public init() {}
}

/// `Product.SubscriptionInfo.status(for:)` and a subscription's `status`.
public struct StoreKitSubscriptionStatusAPI: FailableStoreKitAPI {
    public typealias Failure = SKTestFailures.SubscriptionStatus
    public init() {}
}

/// The verification of signed values: transactions, renewal infos, the app transaction.
public struct StoreKitVerificationAPI: FailableStoreKitAPI {
    public typealias Failure = SKTestFailures.Verification
    public init() {}
}

extension FailableStoreKitAPI where Self == StoreKitAppStoreSyncAPI {
    /// `AppStore.sync()`.
    public static var appStoreSync: StoreKitAppStoreSyncAPI { StoreKitAppStoreSyncAPI() }
}

extension FailableStoreKitAPI where Self == StoreKitAppTransactionAPI {
    /// `AppTransaction.shared` and `AppTransaction.refresh()`.
    public static var appTransaction: StoreKitAppTransactionAPI { StoreKitAppTransactionAPI() }
}

extension FailableStoreKitAPI where Self == StoreKitLoadProductsAPI {
    /// `Product.products(for:)`.
    public static var loadProducts: StoreKitLoadProductsAPI { StoreKitLoadProductsAPI() }
}

extension FailableStoreKitAPI where Self == StoreKitPurchaseAPI {
    /// `Product.purchase(options:)`.
    public static var purchase: StoreKitPurchaseAPI { StoreKitPurchaseAPI() }
}

extension FailableStoreKitAPI where Self == StoreKitSubscriptionStatusAPI {
    /// `Product.SubscriptionInfo.status(for:)`.
    public static var subscriptionStatus: StoreKitSubscriptionStatusAPI { StoreKitSubscriptionStatusAPI() }
}

extension FailableStoreKitAPI where Self == StoreKitVerificationAPI {
    /// The verification of signed values.
    public static var verification: StoreKitVerificationAPI { StoreKitVerificationAPI() }
}

// MARK: - Which OpenStoreKit entry point each API is

/// The OpenStoreKit API a `FailableStoreKitAPI` value stands for.
protocol SimulatedRoute {
    var route: SimulatedFailures.API { get }
}

extension StoreKitAppStoreSyncAPI: SimulatedRoute { var route: SimulatedFailures.API { .appStoreSync } }
extension StoreKitAppTransactionAPI: SimulatedRoute { var route: SimulatedFailures.API { .appTransaction } }
extension StoreKitLoadProductsAPI: SimulatedRoute { var route: SimulatedFailures.API { .loadProducts } }
extension StoreKitPurchaseAPI: SimulatedRoute { var route: SimulatedFailures.API { .purchase } }
extension StoreKitSubscriptionStatusAPI: SimulatedRoute { var route: SimulatedFailures.API { .subscriptionStatus } }
extension StoreKitVerificationAPI: SimulatedRoute { var route: SimulatedFailures.API { .verification } }
