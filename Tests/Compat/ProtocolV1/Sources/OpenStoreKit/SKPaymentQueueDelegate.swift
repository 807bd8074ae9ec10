import Foundation

/// An object the payment queue asks about storefront changes and price consent.
///
/// Both requirements have default implementations that answer `true`.
public protocol SKPaymentQueueDelegate: NSObjectProtocol {
    /// Asks whether to continue a transaction after the storefront changed during it.
    func paymentQueue(_ paymentQueue: SKPaymentQueue, shouldContinue transaction: SKPaymentTransaction, in newStorefront: SKStorefront) -> Bool

    /// Asks whether to show the price-increase consent sheet now.
    func paymentQueueShouldShowPriceConsent(_ paymentQueue: SKPaymentQueue) -> Bool
}

extension SKPaymentQueueDelegate {
    /// Returns `true`: the transaction continues in the new storefront.
    public func paymentQueue(_ paymentQueue: SKPaymentQueue, shouldContinue transaction: SKPaymentTransaction, in newStorefront: SKStorefront) -> Bool {
        true
    }

    /// Returns `true`: the consent sheet is shown at once.
    public func paymentQueueShouldShowPriceConsent(_ paymentQueue: SKPaymentQueue) -> Bool {
        true
    }
}
