import OpenStoreKit

/// One JSON object per line on stdout, flushed at once (stdout is a pipe in tests and journals).
enum Output {
    static func line(event: String, _ transaction: SKPaymentTransaction, extra: [String: Any] = [:]) {
        var object: [String: Any] = [
            "event": event,
            "transactionIdentifier": transaction.transactionIdentifier ?? NSNull(),
            "state": name(transaction.transactionState),
            "productIdentifier": transaction.payment.productIdentifier,
            "quantity": transaction.payment.quantity,
            "originalTransactionIdentifier": transaction.original?.transactionIdentifier ?? NSNull(),
        ]
        if let date = transaction.transactionDate { object["transactionDate"] = ISO8601DateFormatter().string(from: date) }
        if let error = transaction.error as? SKError {
            object["error"] = ["code": error.code.rawValue, "message": error.localizedDescription]
        }
        for (key, value) in extra { object[key] = value }
        self.event(object)
    }

    static func event(_ object: [String: Any]) {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    static func error(_ message: String) {
        FileHandle.standardError.write(Data("storekit-example-app: \(message)\n".utf8))
    }

    static func name(_ state: SKDownloadState) -> String {
        switch state {
        case .waiting: "waiting"
        case .active: "active"
        case .paused: "paused"
        case .finished: "finished"
        case .failed: "failed"
        case .cancelled: "cancelled"
        }
    }

    static func name(_ state: SKPaymentTransactionState) -> String {
        switch state {
        case .purchasing: "purchasing"
        case .purchased: "purchased"
        case .failed: "failed"
        case .restored: "restored"
        case .deferred: "deferred"
        @unknown default: "unknown"
        }
    }
}
