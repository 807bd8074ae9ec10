import Foundation

/// The delegate of a products request, which receives the products the store found.
public protocol SKProductsRequestDelegate: SKRequestDelegate {
    /// Tells the delegate the store's answer: the products found and the identifiers it did not know.
    func productsRequest(_ request: SKProductsRequest, didReceive response: SKProductsResponse)
}
