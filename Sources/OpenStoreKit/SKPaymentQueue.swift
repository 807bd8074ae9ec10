import StoreKitWire

/// The queue of payment transactions the store processes for this app (StoreKit 1).
open class SKPaymentQueue: NSObject {
    /// The queue shared by the whole app.
    open class func `default`() -> SKPaymentQueue { sharedQueue }

    public override init() {
        super.init()
    }
}

nonisolated(unsafe) private let sharedQueue = SKPaymentQueue()
