import Foundation

/// A payment whose values the app can change before adding it to the payment queue.
open class SKMutablePayment: SKPayment {
    /// The identifier of the product to buy.
    open override var productIdentifier: String {
        get { storedProductIdentifier }
        set { storedProductIdentifier = newValue }
    }

    /// Data the app's server defined for the payment; the store rejects payments that set it.
    open override var requestData: Data? {
        get { storedRequestData }
        set { storedRequestData = newValue }
    }

    /// How many units to buy (1…10).
    open override var quantity: Int {
        get { storedQuantity }
        set { storedQuantity = newValue }
    }

    /// An opaque identifier of the user's account in the app.
    open override var applicationUsername: String? {
        get { storedApplicationUsername }
        set { storedApplicationUsername = newValue }
    }

    /// Whether the sandbox treats the payment as an Ask to Buy request.
    open override var simulatesAskToBuyInSandbox: Bool {
        get { storedSimulatesAskToBuyInSandbox }
        set { storedSimulatesAskToBuyInSandbox = newValue }
    }

    /// The signed promotional offer to apply, if any.
    open override var paymentDiscount: SKPaymentDiscount? {
        get { storedPaymentDiscount }
        set { storedPaymentDiscount = newValue }
    }
}
