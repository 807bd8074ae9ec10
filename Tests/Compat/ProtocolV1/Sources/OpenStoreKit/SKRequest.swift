import Foundation

/// An abstract request to the store; `SKProductsRequest` is the concrete one.
open class SKRequest: NSObject {
    /// The object told when the request finishes or fails; held `weak`, as on Apple platforms.
    ///
    /// A products request's delegate is this same property: assign an `SKProductsRequestDelegate`
    /// and the request calls its `productsRequest(_:didReceive:)`.
    open weak var delegate: (any SKRequestDelegate)?

    /// Creates a request.
    public override init() {
        super.init()
    }

    /// Sends the request to the store; the delegate hears the result.
    open func start() {}

    /// Cancels the request; its delegate hears nothing more of it.
    open func cancel() {}
}
