import Foundation
import StoreKitWire

/// A request for products of the store's catalogue by identifier.
///
/// Its delegate is the inherited `delegate` property (typed `SKRequestDelegate?`, because a Swift
/// subclass cannot narrow a stored property's type as Objective-C does); assign an object adopting
/// `SKProductsRequestDelegate` and it receives `productsRequest(_:didReceive:)`.
open class SKProductsRequest: SKRequest {
    private let productIdentifiers: Set<String>
    private let lock = NSLock()
    /// Numbers the starts; `pendingStart` is the one whose answer may still be delivered.
    private var startCount: UInt64 = 0
    private var pendingStart: UInt64?

    /// Creates a request for the products with these identifiers.
    public init(productIdentifiers: Set<String>) {
        self.productIdentifiers = productIdentifiers
        super.init()
    }

    /// Asks the store for the products; a second `start()` while one is pending does nothing.
    ///
    /// The answer is delivered on `SKPaymentQueue.callbackQueue`, the main queue by default, so the
    /// app needs a running main loop (`dispatchMain()`, `RunLoop.main.run()`) or another queue there.
    open override func start() {
        let start: UInt64? = lock.withLock {
            guard pendingStart == nil else { return nil }
            startCount += 1
            pendingStart = startCount
            return startCount
        }
        guard let start else { return }
        // The request stays alive until its answer arrives, as it does on Apple platforms; it is only
        // touched again on the callback queue.
        nonisolated(unsafe) let request = self
        StoreConnection.shared.fetchProducts(productIdentifiers.sorted()) { result in
            SKPaymentQueue.callbackQueue.async {
                request.deliver(result, forStart: start)
            }
        }
    }

    /// Cancels the request; its delegate hears nothing more of it.
    open override func cancel() {
        lock.withLock { pendingStart = nil }
    }

    /// Hands the store's answer to the delegate unless the request was cancelled meanwhile.
    private func deliver(
        _ result: Result<(products: [ProductRecord], invalid: [String]), SKError>, forStart start: UInt64
    ) {
        let current: Bool = lock.withLock {
            guard pendingStart == start else { return false }
            pendingStart = nil
            return true
        }
        guard current else { return }
        switch result {
        case .success(let answer):
            let response = SKProductsResponse(
                products: answer.products.map(SKProduct.init(record:)),
                invalidProductIdentifiers: answer.invalid)
            (delegate as? any SKProductsRequestDelegate)?.productsRequest(self, didReceive: response)
            delegate?.requestDidFinish(self)
        case .failure(let error):
            delegate?.request(self, didFailWithError: error)
        }
    }
}
