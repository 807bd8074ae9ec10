import OpenStoreKit

/// The queue holds observers weakly, as StoreKit does: the app keeps its observer alive.
nonisolated(unsafe) var appObserver: TransactionObserver?
/// The queue's delegate, also held weakly by the queue.
nonisolated(unsafe) var storefrontDelegate: StorefrontDelegate?

/// Decides whether deferred payments continue when the storefront changes.
final class StorefrontDelegate: NSObject, SKPaymentQueueDelegate {
    let continuePayments: Bool

    init(continuePayments: Bool) {
        self.continuePayments = continuePayments
    }

    func paymentQueue(_ paymentQueue: SKPaymentQueue, shouldContinue transaction: SKPaymentTransaction,
                      in newStorefront: SKStorefront) -> Bool {
        Output.event(["event": "shouldContinue", "transactionIdentifier": transaction.transactionIdentifier ?? "",
                      "storefront": newStorefront.countryCode, "answer": continuePayments])
        return continuePayments
    }
}

enum ExampleApp {
    static let usage = """
        Usage: storekit-example-app [--app ID] [--ledger FILE] [--promoted accept|defer|decline]
                                    [--storefront-change continue|cancel] [--pause-download] COMMAND

        A sample app using OpenStoreKit (acts as com.example.game unless --app).

        Commands:
          observe            process every transaction as it arrives, until stopped
          buy PRODUCT        buy PRODUCT (--quantity N), wait until it is delivered and finished
          restore            restore completed purchases, wait until the restore ends
          list               print this user's unfinished transactions of the app
          refresh-receipt    fetch a new app receipt (SKReceiptRefreshRequest) and validate it
          validate-receipt [FILE]  validate the app receipt (default: SKPaymentQueue.appStoreReceiptURL)

        --promoted: the answer to a purchase promoted in the App Store (default accept; defer keeps
        the payment and adds it half a second later).

        --storefront-change: whether deferred payments continue when the storefront changes
        (the queue delegate's paymentQueue(_:shouldContinue:in:); default continue).

        Hosted content (a product with [HostedContent]) is downloaded before its transaction is
        granted and finished (event download, with state and progress; the content lands in
        $XDG_CACHE_HOME/storekit/APP/downloads/PRODUCT). A failed download leaves the transaction
        unfinished (buy exits with status 3); --pause-download pauses it at its first progress
        and exits with status 4, and the next launch goes on from what was copied.

        Each update is printed as one JSON line (events: updated, removed, download, restoreFinished,
        restoreFailed, revoked, storefrontChanged, promoted, promotedAdded). Content is granted into the ledger file
        (default: $XDG_STATE_HOME/storekit-example-app/APP.ledger) before a transaction is finished,
        so a redelivered transaction is never granted twice; before that the app receipt is
        validated (signed by storekitd's root, this app's, this device's, listing the transaction
        unrevoked) and a transaction it does not vouch for is neither granted nor finished (event
        refused, exit status 2 for buy).

        """

    static func main(_ raw: [String]) -> Int32 {
        var arguments = raw
        var app = "com.example.game"
        var ledgerPath: String?
        var quantity = 1
        func option(_ name: String) -> String?? {
            guard let index = arguments.firstIndex(of: name) else { return .none }
            guard index + 1 < arguments.count else { return .some(nil) }
            let value = arguments[index + 1]
            arguments.removeSubrange(index...(index + 1))
            return .some(value)
        }
        if arguments.contains("-h") || arguments.contains("--help") {
            print(usage, terminator: "")
            return 0
        }
        switch option("--app") {
        case .some(let value?): app = value
        case .some(nil): return usageError("--app needs an ID")
        case .none: break
        }
        switch option("--ledger") {
        case .some(let value?): ledgerPath = value
        case .some(nil): return usageError("--ledger needs a FILE")
        case .none: break
        }
        switch option("--quantity") {
        case .some(let value?):
            guard let number = Int(value) else { return usageError("--quantity needs a number") }
            quantity = number
        case .some(nil): return usageError("--quantity needs a number")
        case .none: break
        }
        var promotedPolicy = TransactionObserver.PromotedPolicy.accept
        switch option("--promoted") {
        case .some(let value?):
            guard let policy = TransactionObserver.PromotedPolicy(rawValue: value) else {
                return usageError("--promoted takes accept, defer or decline")
            }
            promotedPolicy = policy
        case .some(nil): return usageError("--promoted needs accept, defer or decline")
        case .none: break
        }
        var continueOnStorefrontChange = true
        switch option("--storefront-change") {
        case .some("continue"?): continueOnStorefrontChange = true
        case .some("cancel"?): continueOnStorefrontChange = false
        case .some: return usageError("--storefront-change takes continue or cancel")
        case .none: break
        }
        let pausesDownloads = arguments.contains("--pause-download")
        arguments.removeAll { $0 == "--pause-download" }
        guard let command = arguments.first else { return usageError("a COMMAND is required") }
        storefrontDelegate = StorefrontDelegate(continuePayments: continueOnStorefrontChange)
        SKPaymentQueue.default().delegate = storefrontDelegate
        SKPaymentQueue.applicationIdentifier = app
        let ledger = Ledger(path: ledgerPath ?? Ledger.defaultPath(app: app))

        switch (command, arguments.count) {
        case ("observe", 1):
            appObserver = TransactionObserver(ledger: ledger, goal: .forever)
            appObserver?.promotedPolicy = promotedPolicy
            appObserver?.pausesDownloads = pausesDownloads
            appObserver?.start()
        case ("buy", 2):
            let payment = SKMutablePayment()
            payment.productIdentifier = arguments[1]
            payment.quantity = quantity
            appObserver = TransactionObserver(ledger: ledger, goal: .purchase(payment))
            appObserver?.pausesDownloads = pausesDownloads
            appObserver?.start()
            SKPaymentQueue.default().add(payment)
        case ("restore", 1):
            appObserver = TransactionObserver(ledger: ledger, goal: .restore)
            appObserver?.pausesDownloads = pausesDownloads
            appObserver?.start()
            SKPaymentQueue.default().restoreCompletedTransactions()
        case ("list", 1):
            Task {
                do {
                    for transaction in try await SKPaymentQueue.default().unfinishedTransactions() {
                        Output.line(event: "unfinished", transaction)
                    }
                    exit(0)
                } catch {
                    Output.error("cannot list transactions: \(error.localizedDescription)")
                    exit(1)
                }
            }
        case ("validate-receipt", 1), ("validate-receipt", 2):
            let url = arguments.count == 2 ? URL(fileURLWithPath: arguments[1]) : SKPaymentQueue.appStoreReceiptURL
            return ReceiptCheck.print(url: url)
        case ("refresh-receipt", 1):
            receiptRefresh = ReceiptRefresh()
            receiptRefresh?.start()
        default:
            return usageError("unknown command or wrong arguments: \(arguments.joined(separator: " "))")
        }
        // Callbacks arrive on the main queue, as on Apple platforms: run it.
        dispatchMain()
    }

    static func usageError(_ message: String) -> Int32 {
        FileHandle.standardError.write(Data("storekit-example-app: \(message)\n\n\(usage)".utf8))
        return 64
    }
}
