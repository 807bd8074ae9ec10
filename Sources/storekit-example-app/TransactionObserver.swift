import OpenStoreKit

/// Promoted payments the app keeps to add later; touched on the main queue only, like `appObserver`.
nonisolated(unsafe) var deferredPromotedPayments: [SKPayment] = []

/// The app's one transaction observer, added at launch and kept for the process lifetime.
final class TransactionObserver: NSObject, SKPaymentTransactionObserver {
    enum Goal {
        case forever
        /// The purchase of the payment this run adds: its transaction is the one whose `payment`
        /// is this object (another process of the app may buy the same product meanwhile).
        case purchase(SKPayment)
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
    /// `--pause-download`: pause a download at its first progress and exit (status 4), keeping
    /// what it copied and the transaction unfinished; the next launch goes on from there.
    var pausesDownloads = false
    /// Transactions whose hosted content is downloading: granted and finished once it is in.
    private var awaitingContent: [String: SKPaymentTransaction] = [:]
    /// The transaction of this run's purchase, once it is known.
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
            if case .purchase(let payment) = goal, transaction.payment === payment { ownTransactions.insert(id) }
            switch transaction.transactionState {
            case .purchasing:
                Output.line(event: "updated", transaction)
            case .purchased, .restored:
                // Validate the receipt first: it must be signed by the store, be this app's and this
                // device's, and list this transaction unrevoked. A receipt that fails is not trusted:
                // nothing is granted and the transaction stays in the queue (it comes back at the next
                // launch, when a good receipt may be there).
                // Except when the shared ledger already has the grant: then nothing is granted, and
                // the transaction is finished (again, if another instance finished it). That is how
                // a receipt fetched after another instance of the app (its observer, beside a `buy`)
                // finished a consumable reads: it no longer lists it. Whatever the refusal, a grant
                // made earlier, against a receipt that was valid then, is not undone here.
                if let refusal = Self.receiptRefusal(for: id) {
                    if ledger.contains(id) {
                        Output.line(event: "updated", transaction, extra: ["granted": false])
                        queue.finishTransaction(transaction)
                        continue
                    }
                    Output.line(event: "refused", transaction, extra: ["reason": refusal])
                    if case .purchase = goal, ownTransactions.contains(id) { exit(2) }
                    continue
                }
                // Hosted content is downloaded first, and the transaction finished only once it is
                // in (paymentQueue(_:updatedDownloads:)): a finished transaction's content can no
                // longer be downloaded. A redelivery of a granted transaction does not download again.
                let toDownload = transaction.downloads.filter { $0.state != .finished }
                if !toDownload.isEmpty, !ledger.contains(id) {
                    // Told as download events; the transaction's line comes with its grant.
                    awaitingContent[id] = transaction
                    queue.start(toDownload)
                    continue
                }
                // Unlock next, durably; finish only after. A redelivery finds the grant in the ledger.
                let granted = ledger.grant(transaction)
                Output.line(event: "updated", transaction, extra: ["granted": granted])
                queue.finishTransaction(transaction)
            case .failed:
                Output.line(event: "updated", transaction)
                if case .purchase(let payment) = goal, ownTransactions.contains(id) || (id.isEmpty || id == "0") && transaction.payment === payment {
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

    func paymentQueue(_ queue: SKPaymentQueue, updatedDownloads downloads: [SKDownload]) {
        for download in downloads {
            let transaction = download.transaction
            let id = transaction.transactionIdentifier ?? ""
            var event: [String: Any] = [
                "event": "download", "transactionIdentifier": id, "productIdentifier": download.contentIdentifier,
                "state": Output.name(download.state), "progress": Double(download.progress),
                "expectedContentLength": download.expectedContentLength, "contentVersion": download.contentVersion,
            ]
            if download.timeRemaining != SKDownloadTimeRemainingUnknown { event["timeRemaining"] = download.timeRemaining }
            switch download.state {
            case .active:
                Output.event(event)
                if pausesDownloads, download.progress > 0 { queue.pause([download]) }
            case .finished:
                event["contentURL"] = download.contentURL?.path ?? ""
                Output.event(event)
                guard awaitingContent.removeValue(forKey: id) != nil else { continue }
                let granted = ledger.grant(transaction)
                Output.line(event: "updated", transaction, extra: ["granted": granted])
                queue.finishTransaction(transaction)
                exitAfterRestoreIfDone()
            case .failed, .cancelled, .paused:
                if let error = download.error { event["error"] = error.localizedDescription }
                Output.event(event)
                // Neither granted nor finished: the transaction comes back at the next launch, and
                // its download goes on from what was copied. (A download this run did not wait for
                // is cancelled when its transaction is finished without it: granted before.)
                guard awaitingContent.removeValue(forKey: id) != nil else { continue }
                if case .purchase = goal, ownTransactions.contains(id) { exit(download.state == .paused ? 4 : 3) }
                if download.state == .paused, pausesDownloads { exit(4) }
                if case .restore = goal { exit(3) }
            case .waiting:
                Output.event(event)
            @unknown default:
                Output.event(event)
            }
        }
    }

    /// nil when the app receipt is valid and lists `transactionID` unrevoked; else why not.
    static func receiptRefusal(for transactionID: String) -> String? {
        do {
            let receipt = try SKAppReceipt.validated()
            guard let purchase = receipt.purchase(transactionIdentifier: transactionID) else {
                return "the receipt does not list transaction \(transactionID)"
            }
            if purchase.cancellationDate != nil { return "the receipt says transaction \(transactionID) was refunded" }
            return nil
        } catch {
            return error.description
        }
    }

    func paymentQueue(_ queue: SKPaymentQueue, removedTransactions transactions: [SKPaymentTransaction]) {
        for transaction in transactions {
            Output.line(event: "removed", transaction)
            if case .purchase = goal, let id = transaction.transactionIdentifier, ownTransactions.contains(id) {
                // Which purchase was this run's: another process may have bought the same product.
                Output.event(["event": "purchaseDone", "transactionIdentifier": id])
                exit(exitStatus)
            }
        }
    }

    func paymentQueueRestoreCompletedTransactionsFinished(_ queue: SKPaymentQueue) {
        Output.event(["event": "restoreFinished"])
        restoreFinished = true
        exitAfterRestoreIfDone()
    }

    /// Whether content of a transaction is still downloading.
    var isDownloading: Bool { !awaitingContent.isEmpty }

    /// The restore's end was told.
    private var restoreFinished = false

    /// `restore` exits once the restore ended and the content of restored transactions is in.
    private func exitAfterRestoreIfDone() {
        guard case .restore = goal, restoreFinished, awaitingContent.isEmpty else { return }
        // Give the finishes of restored transactions a moment to be sent before exiting; a
        // restored transaction told meanwhile may start a download, which ends the run instead.
        DispatchQueue.main.asyncAfter(deadline: .now() + 0.3) {
            if !(appObserver?.isDownloading ?? false) { exit(0) }
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
