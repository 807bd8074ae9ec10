import Foundation

/// An abstract request to the store; `SKProductsRequest` is the concrete one.
open class SKRequest: NSObject {
    /// The object told when the request finishes or fails; held `weak`, as on Apple platforms.
    ///
    /// A products request's delegate is this same property: assign an `SKProductsRequestDelegate`
    /// and the request calls its `productsRequest(_:didReceive:)`.
    open weak var delegate: (any SKRequestDelegate)?

    /// Numbers the starts; `pendingStart` is the one whose answer may still be delivered.
    private let startLock = NSLock()
    private var startCount: UInt64 = 0
    private var pendingStart: UInt64?

    /// Creates a request.
    public override init() {
        super.init()
    }

    /// Sends the request to the store; the delegate hears the result.
    open func start() {}

    /// Cancels the request; its delegate hears nothing more of it.
    open func cancel() {
        startLock.withLock { pendingStart = nil }
    }

    /// A number for a new start, or nil while one is pending (a second `start()` does nothing).
    func beginStart() -> UInt64? {
        startLock.withLock {
            guard pendingStart == nil else { return nil }
            startCount += 1
            pendingStart = startCount
            return startCount
        }
    }

    /// Whether the answer to `start` may be delivered (it is the pending one, not cancelled);
    /// it is no longer pending afterwards.
    func endStart(_ start: UInt64) -> Bool {
        startLock.withLock {
            guard pendingStart == start else { return false }
            pendingStart = nil
            return true
        }
    }
}
