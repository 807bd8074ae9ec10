import Foundation
import StoreKitWire

/// A request to buy a product, which the app adds to the payment queue.
///
/// `SKPayment` is immutable; use `SKMutablePayment` to set a quantity, an application username or
/// a discount. Both keep their values in the same storage, so either class reads what the other set.
open class SKPayment: NSObject, NSCopying, NSMutableCopying {
    // Shared with SKMutablePayment, whose overrides add setters over the same storage.
    var storedProductIdentifier = ""
    var storedRequestData: Data?
    var storedQuantity = 1
    var storedApplicationUsername: String?
    var storedSimulatesAskToBuyInSandbox = false
    var storedPaymentDiscount: SKPaymentDiscount?

    /// Creates an empty payment (no product, quantity 1).
    public override init() {
        super.init()
    }

    /// Creates a payment for one unit of `product`.
    public convenience init(product: SKProduct) {
        self.init()
        storedProductIdentifier = product.productIdentifier
    }

    /// The identifier of the product to buy.
    open var productIdentifier: String { storedProductIdentifier }
    /// Data the app's server defined for the payment; the store rejects payments that set it.
    open var requestData: Data? { storedRequestData }
    /// How many units to buy (1…10).
    open var quantity: Int { storedQuantity }
    /// An opaque identifier of the user's account in the app.
    open var applicationUsername: String? { storedApplicationUsername }
    /// Whether the sandbox treats the payment as an Ask to Buy request.
    open var simulatesAskToBuyInSandbox: Bool { storedSimulatesAskToBuyInSandbox }
    /// The signed promotional offer to apply, if any.
    open var paymentDiscount: SKPaymentDiscount? { storedPaymentDiscount }

    /// Returns an immutable `SKPayment` with this payment's values.
    open func copy(with zone: NSZone? = nil) -> Any {
        copyValues(into: SKPayment())
    }

    /// Returns an `SKMutablePayment` with this payment's values.
    open func mutableCopy(with zone: NSZone? = nil) -> Any {
        copyValues(into: SKMutablePayment())
    }

    /// Copies through the public getters, so a subclass's overrides are what the copy holds.
    private func copyValues<Copy: SKPayment>(into copy: Copy) -> Copy {
        copy.storedProductIdentifier = productIdentifier
        copy.storedRequestData = requestData
        copy.storedQuantity = quantity
        copy.storedApplicationUsername = applicationUsername
        copy.storedSimulatesAskToBuyInSandbox = simulatesAskToBuyInSandbox
        copy.storedPaymentDiscount = paymentDiscount
        return copy
    }
}

extension SKPayment {
    /// A payment rebuilt from a record, for transactions the app did not add in this process.
    convenience init(record: TransactionRecord) {
        self.init()
        storedProductIdentifier = record.productID
        storedQuantity = Int(record.quantity)
        storedApplicationUsername = record.applicationUsername
    }
}
