import OpenStoreKit

/// Promoted payments the app keeps to add later; touched on the main queue only, like `appObserver`.
nonisolated(unsafe) var deferredPromotedPayments: [SKPayment] = []

/// The app's one transaction observer, added at launch and kept for the process lifetime.
final class TransactionObserver: NSObject, SKPaymentTransactionObserver {
    enum Goal {
        case forever
        case purchase(productID: String)
        case restore
    }

    /// What to answer when the App Store offers a promoted purchase.
    enum PromotedPolicy: String {
        /// Add the payment at once.
        case accept
        /// Keep the payment and add it a moment later (as an app finishing its onboarding would).
        case `defer`
        /// Do not buy.
        case decline
    }

    let ledger: Ledger
    let goal: Goal
    var promotedPolicy = PromotedPolicy.accept
    /// Transactions of this run's purchase, seen in `purchasing` before anything else.
    private var ownTransactions: Set<String> = []
    private var exitStatus: Int32 = 0

    init(ledger: Ledger, goal: Goal) {
        self.ledger = ledger
        self.goal = goal
    }

    func start() {
        SKPaymentQueue.default().add(self)
    }

    func paymentQueue(_ queue: SKPaymentQueue, updatedTransactions transactions: [SKPaymentTransaction]) {
        for transaction in transactions {
            let id = transaction.transactionIdentifier ?? ""
            switch transaction.transactionState {
            case .purchasing:
                Output.line(event: "updated", transaction)
                if case .purchase(let productID) = goal, transaction.payment.productIdentifier == productID {
                    ownTransactions.insert(id)
                }
            case .purchased, .restored:
                // Unlock first, durably; finish only after. A redelivery finds the grant in the ledger.
                let granted = ledger.grant(transaction)
                Output.line(event: "updated", transaction, extra: ["granted": granted])
                queue.finishTransaction(transaction)
            case .failed:
                Output.line(event: "updated", transaction)
                if case .purchase(let productID) = goal, transaction.payment.productIdentifier == productID,
                   ownTransactions.contains(id) || id.isEmpty || id == "0" {
                    exitStatus = 1
                    if id.isEmpty || id == "0" { exit(exitStatus) }
                }
                queue.finishTransaction(transaction)
            case .deferred:
                Output.line(event: "updated", transaction)
                if case .purchase = goal, ownTransactions.contains(id) { exit(0) }
            @unknown default:
                Output.line(event: "updated", transaction)
            }
        }
    }

    func paymentQueue(_ queue: SKPaymentQueue, removedTransactions transactions: [SKPaymentTransaction]) {
        for transaction in transactions {
            Output.line(event: "removed", transaction)
            if case .purchase = goal, ownTransactions.contains(transaction.transactionIdentifier ?? "") {
                exit(exitStatus)
            }
        }
    }

    func paymentQueueRestoreCompletedTransactionsFinished(_ queue: SKPaymentQueue) {
        Output.event(["event": "restoreFinished"])
        if case .restore = goal {
            // Give the finishes of restored transactions a moment to be sent before exiting.
            DispatchQueue.main.asyncAfter(deadline: .now() + 0.3) { exit(0) }
        }
    }

    func paymentQueue(_ queue: SKPaymentQueue, restoreCompletedTransactionsFailedWithError error: any Error) {
        Output.event(["event": "restoreFailed", "error": error.localizedDescription])
        if case .restore = goal { exit(1) }
    }

    func paymentQueue(_ queue: SKPaymentQueue, didRevokeEntitlementsForProductIdentifiers productIdentifiers: [String]) {
        Output.event(["event": "revoked", "productIdentifiers": productIdentifiers])
    }

    func paymentQueue(_ queue: SKPaymentQueue, shouldAddStorePayment payment: SKPayment, for product: SKProduct) -> Bool {
        Output.event(["event": "promoted", "productIdentifier": product.productIdentifier,
                      "decision": promotedPolicy.rawValue])
        switch promotedPolicy {
        case .accept:
            return true
        case .decline:
            return false
        case .defer:
            // Keep the payment; add it once the app is ready (here: half a second later).
            deferredPromotedPayments.append(payment)
            DispatchQueue.main.asyncAfter(deadline: .now() + 0.5) { TransactionObserver.addDeferredPromotedPayments() }
            return false
        }
    }

    /// Adds the promoted payments kept by the `defer` policy (on the main queue).
    static func addDeferredPromotedPayments() {
        let payments = deferredPromotedPayments
        deferredPromotedPayments.removeAll()
        for payment in payments {
            Output.event(["event": "promotedAdded", "productIdentifier": payment.productIdentifier])
            SKPaymentQueue.default().add(payment)
        }
    }

    func paymentQueueDidChangeStorefront(_ queue: SKPaymentQueue) {
        Output.event(["event": "storefrontChanged", "countryCode": queue.storefront?.countryCode ?? ""])
    }
}
