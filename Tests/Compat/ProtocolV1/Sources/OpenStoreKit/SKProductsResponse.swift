import Foundation

/// The store's answer to a products request.
open class SKProductsResponse: NSObject {
    private let storedProducts: [SKProduct]
    private let storedInvalidProductIdentifiers: [String]

    /// Creates an empty response; useful for test doubles.
    public override init() {
        storedProducts = []
        storedInvalidProductIdentifiers = []
        super.init()
    }

    /// Creates a response with the products found and the identifiers the store did not know.
    init(products: [SKProduct], invalidProductIdentifiers: [String]) {
        storedProducts = products
        storedInvalidProductIdentifiers = invalidProductIdentifiers
        super.init()
    }

    /// The products the store found.
    open var products: [SKProduct] { storedProducts }
    /// The requested identifiers the store does not sell.
    open var invalidProductIdentifiers: [String] { storedInvalidProductIdentifiers }
}
