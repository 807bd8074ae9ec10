import OpenStoreKit

/// The request of `refresh-receipt`, kept alive until its delegate is called (on the main queue).
nonisolated(unsafe) var receiptRefresh: ReceiptRefresh?

/// `validate-receipt` and `refresh-receipt`: the app receipt, validated, as one JSON line.
enum ReceiptCheck {
    static func print(url: URL) -> Int32 {
        do {
            let receipt = try SKAppReceipt.validated(contentsOf: url)
            Output.event([
                "event": "receipt", "valid": true, "bundleIdentifier": receipt.bundleIdentifier,
                "receiptType": receipt.receiptType, "appVersion": receipt.appVersion,
                "transactions": receipt.inAppPurchases.map(\.transactionIdentifier),
            ])
            return 0
        } catch {
            Output.event(["event": "receipt", "valid": false, "reason": error.description])
            return 1
        }
    }
}

/// Refreshes the receipt as an app does when it finds none or a bad one.
final class ReceiptRefresh: NSObject, SKRequestDelegate {
    let request = SKReceiptRefreshRequest()

    func start() {
        request.delegate = self
        request.start()
    }

    func requestDidFinish(_ request: SKRequest) {
        exit(ReceiptCheck.print(url: SKPaymentQueue.appStoreReceiptURL))
    }

    func request(_ request: SKRequest, didFailWithError error: any Error) {
        Output.event(["event": "receiptRefreshFailed", "error": error.localizedDescription,
                      "code": (error as? SKError)?.code.rawValue ?? -1])
        exit(1)
    }
}
