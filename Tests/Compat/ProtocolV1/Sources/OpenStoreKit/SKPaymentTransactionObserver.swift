import Foundation

/// An object the payment queue tells about transaction updates; the queue holds it `weak`.
///
/// Every callback is a protocol requirement; all but `paymentQueue(_:updatedTransactions:)` have a
/// default implementation, so an adopter implements only what it needs and its own implementations
/// are the ones called (Linux has no `@objc optional`).
///
/// - Note: As with any Swift protocol, the conformance is fixed where it is declared: a subclass of
///   an adopting class that adds a callback its superclass did not implement is not called for it.
///   Implement the callbacks in the class that declares the conformance (and override them there).
public protocol SKPaymentTransactionObserver: NSObjectProtocol {
    /// Tells the observer that transactions were added to the queue or changed state.
    func paymentQueue(_ queue: SKPaymentQueue, updatedTransactions transactions: [SKPaymentTransaction])

    /// Tells the observer that finished transactions were removed from the queue.
    func paymentQueue(_ queue: SKPaymentQueue, removedTransactions transactions: [SKPaymentTransaction])

    /// Tells the observer that restoring completed transactions failed.
    func paymentQueue(_ queue: SKPaymentQueue, restoreCompletedTransactionsFailedWithError error: any Error)

    /// Tells the observer that all restorable transactions were delivered.
    func paymentQueueRestoreCompletedTransactionsFinished(_ queue: SKPaymentQueue)

    /// Tells the observer that downloads changed; never called here, as the store hosts no content.
    func paymentQueue(_ queue: SKPaymentQueue, updatedDownloads downloads: [SKDownload])

    /// Asks whether to continue a purchase the user started in the App Store (a promoted purchase).
    func paymentQueue(_ queue: SKPaymentQueue, shouldAddStorePayment payment: SKPayment, for product: SKProduct) -> Bool

    /// Tells the observer that the storefront of the user's account changed.
    func paymentQueueDidChangeStorefront(_ queue: SKPaymentQueue)

    /// Tells the observer that the user lost access to these products (refund, Family Sharing).
    func paymentQueue(_ queue: SKPaymentQueue, didRevokeEntitlementsForProductIdentifiers productIdentifiers: [String])
}

extension SKPaymentTransactionObserver {
    /// Does nothing.
    public func paymentQueue(_ queue: SKPaymentQueue, removedTransactions transactions: [SKPaymentTransaction]) {}

    /// Does nothing.
    public func paymentQueue(_ queue: SKPaymentQueue, restoreCompletedTransactionsFailedWithError error: any Error) {}

    /// Does nothing.
    public func paymentQueueRestoreCompletedTransactionsFinished(_ queue: SKPaymentQueue) {}

    /// Does nothing.
    public func paymentQueue(_ queue: SKPaymentQueue, updatedDownloads downloads: [SKDownload]) {}

    /// Returns `true`: the promoted purchase continues at once.
    public func paymentQueue(_ queue: SKPaymentQueue, shouldAddStorePayment payment: SKPayment, for product: SKProduct) -> Bool {
        true
    }

    /// Does nothing.
    public func paymentQueueDidChangeStorefront(_ queue: SKPaymentQueue) {}

    /// Does nothing.
    public func paymentQueue(_ queue: SKPaymentQueue, didRevokeEntitlementsForProductIdentifiers productIdentifiers: [String]) {}
}
