import Foundation

/// Receipt properties of `SKReceiptRefreshRequest(receiptProperties:)`, as Apple names them.
/// (Apple uses them only in its sandbox to make test receipts; storekitd accepts and ignores them.)
public let SKReceiptPropertyIsExpired = "expired"
public let SKReceiptPropertyIsRevoked = "revoked"
public let SKReceiptPropertyIsVolumePurchase = "vpp"

/// A request for a new app receipt: storekitd makes and signs it, the library writes it to
/// `SKPaymentQueue.appStoreReceiptURL`, then the delegate hears `requestDidFinish(_:)`, or
/// `request(_:didFailWithError:)` (`SKError.cloudServiceNetworkConnectionFailed` when storekitd
/// cannot be reached).
open class SKReceiptRefreshRequest: SKRequest {
    /// The properties the request was made with.
    public let receiptProperties: [String: Any]?

    /// A request for the current receipt.
    public override convenience init() {
        self.init(receiptProperties: nil)
    }

    /// A request with receipt properties (accepted for source compatibility; see the constants).
    public init(receiptProperties properties: [String: Any]?) {
        receiptProperties = properties
        super.init()
    }

    /// Fetches and writes the receipt; a second `start()` while one is pending does nothing.
    /// The delegate is called on `SKPaymentQueue.callbackQueue`.
    open override func start() {
        guard let start = beginStart() else { return }
        nonisolated(unsafe) let request = self
        let connection = StoreConnection.shared
        ReceiptFile.refresh(connection: connection, app: connection.resolvedAppIdentifier) { result in
            SKPaymentQueue.callbackQueue.async { request.deliver(result, forStart: start) }
        }
    }

    /// Cancels the request; its delegate hears nothing more of it.
    open override func cancel() {
        super.cancel()
    }

    private func deliver(_ result: Result<[UInt8], SKError>, forStart start: UInt64) {
        guard endStart(start) else { return }
        switch result {
        case .success: delegate?.requestDidFinish(self)
        case .failure(let error): delegate?.request(self, didFailWithError: error)
        }
    }
}
