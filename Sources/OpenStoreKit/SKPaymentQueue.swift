import Foundation
import StoreKitWire
import Synchronization

/// The queue of payment transactions the store processes for this app (StoreKit 1).
///
/// Add an observer at launch and keep it for the life of the process: the queue delivers every
/// unfinished transaction to it (again after every relaunch or reconnect) until you call
/// `finishTransaction(_:)`. Callbacks arrive on `SKPaymentQueue.callbackQueue`, the main queue by
/// default as on Apple platforms — a command-line app must run a main loop (`dispatchMain()`,
/// `RunLoop.main.run()`) or set another queue before adding observers.
open class SKPaymentQueue: NSObject {
    /// The queue shared by the whole app.
    open class func `default`() -> SKPaymentQueue { sharedQueue }

    /// Whether this user may make payments (always true for the simulated store).
    open class func canMakePayments() -> Bool { true }

    /// The dispatch queue on which observers and request delegates are called (default: main).
    public static var callbackQueue: DispatchQueue {
        get { callbackQueueStorage.withLock { $0 } }
        set { callbackQueueStorage.withLock { $0 = newValue } }
    }

    /// The app identifier sent to storekitd (default: `$STOREKIT_APP_ID`, the bundle id, or the executable name).
    /// Set it before the queue is first used.
    public static var applicationIdentifier: String? {
        get { configurationStorage.withLock { $0.app } }
        set {
            configurationStorage.withLock { $0.app = newValue }
            StoreConnection.shared.configure(appIdentifier: newValue, socketPath: socketPath)
        }
    }

    /// Where the app receipt is on Linux, in place of `Bundle.main.appStoreReceiptURL` (nil here):
    /// `$XDG_DATA_HOME/storekit/APP/receipt` (default `~/.local/share/storekit/APP/receipt`), readable
    /// only by this user. The library writes it before it tells observers of a change the receipt
    /// reflects; `SKReceiptRefreshRequest` writes it on demand. `SKAppReceipt` validates it.
    public static var appStoreReceiptURL: URL {
        ReceiptFile.url(app: StoreConnection.shared.resolvedAppIdentifier)
    }

    /// The client socket path (default: `$STOREKITD_SOCKET`, else the runtime directory's storekitd.sock).
    public static var socketPath: String? {
        get { configurationStorage.withLock { $0.socket } }
        set {
            configurationStorage.withLock { $0.socket = newValue }
            StoreConnection.shared.configure(appIdentifier: applicationIdentifier, socketPath: newValue)
        }
    }

    private struct State {
        var observers: [WeakObserver] = []
        var transactions: [UInt64: SKPaymentTransaction] = [:]
        var order: [UInt64] = []
        var storefront: SKStorefront?
        var restoring = false
        weak var delegate: (any SKPaymentQueueDelegate)?
        /// Payments this process added and how many of them the daemon has answered; the
        /// transaction each answered one made, with the app's own `SKPayment`.
        var paymentsSent: UInt64 = 0
        var paymentsAnswered: UInt64 = 0
        var ownPayments: [UInt64: SKPayment] = [:]
    }

    private struct WeakObserver {
        weak var observer: (any SKPaymentTransactionObserver)?
    }

    private let lock = NSLock()
    private var unlockedState = State()
    private let connection: StoreConnection

    /// The queue's mutable state, under its lock (observers and transactions are app objects,
    /// which is why this is a lock and not a `Mutex` of a `Sendable` value).
    private func withState<T>(_ body: (inout State) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&unlockedState)
    }

    /// A queue; only `default()` is connected to storekitd (others are inert, e.g. for test doubles).
    public override init() {
        connection = StoreConnection()
        super.init()
    }

    private init(connection: StoreConnection) {
        self.connection = connection
        super.init()
        wire()
    }

    fileprivate static func makeShared() -> SKPaymentQueue { SKPaymentQueue(connection: .shared) }

    private var isConnected: Bool { connection === StoreConnection.shared }

    // MARK: Properties

    /// The delegate asked about storefront changes and price consent.
    open var delegate: (any SKPaymentQueueDelegate)? {
        get { withState { $0.delegate } }
        set { withState { $0.delegate = newValue } }
    }

    /// The storefront of the current account, known once connected.
    open var storefront: SKStorefront? { withState { $0.storefront } }

    /// The unfinished transactions delivered so far (while observers are registered).
    open var transactions: [SKPaymentTransaction] {
        withState { state in state.order.compactMap { state.transactions[$0] } }
    }

    /// Forgets every transaction delivered so far (the library now talks to another daemon).
    func forgetTransactions() {
        withState { state in
            state.transactions.removeAll()
            state.order.removeAll()
        }
    }

    /// The registered observers.
    open var transactionObservers: [any SKPaymentTransactionObserver] {
        withState { $0.observers.compactMap(\.observer) }
    }

    // MARK: Observers

    /// Adds an observer (held weakly); the first one starts delivery of the queue's transactions.
    open func add(_ observer: any SKPaymentTransactionObserver) {
        let first = withState { state -> Bool in
            state.observers.removeAll { $0.observer == nil }
            guard !state.observers.contains(where: { $0.observer === observer }) else { return false }
            state.observers.append(WeakObserver(observer: observer))
            return state.observers.count == 1
        }
        if first && isConnected { connection.observe(true) }
    }

    /// Removes an observer; with none left, delivery stops.
    open func remove(_ observer: any SKPaymentTransactionObserver) {
        let none = withState { state -> Bool in
            state.observers.removeAll { $0.observer == nil || $0.observer === observer }
            return state.observers.isEmpty
        }
        if none && isConnected { connection.observe(false) }
    }

    // MARK: Payments

    /// Adds a payment: the store answers through the observers (`purchasing`, then `purchased`,
    /// `failed` or `deferred`). Never blocks; sent when the daemon is reachable.
    ///
    /// The transaction the payment makes has this very `SKPayment` as its `payment`, so that an
    /// app can tell its own purchase from another process's purchase of the same product
    /// (`transaction.payment === payment`): updates that arrive while a payment of this process
    /// is unanswered wait for its answer, which names the transaction (it follows them at once).
    open func add(_ payment: SKPayment) {
        guard isConnected else { return }
        let original = PaymentReference(payment: payment)
        let payment = payment.copy() as? SKPayment ?? payment
        let request = ClientMessage.AddPayment(
            requestID: 0, key: Self.idempotencyKey(), productID: payment.productIdentifier,
            quantity: Int32(clamping: payment.quantity), applicationUsername: payment.applicationUsername,
            hasRequestData: payment.requestData != nil, simulatesAskToBuy: payment.simulatesAskToBuyInSandbox,
            discount: payment.paymentDiscount.map { discount in
                ClientMessage.Discount(offerID: discount.identifier, keyID: discount.keyIdentifier,
                                       nonce: discount.nonce.uuidString.lowercased(), signature: discount.signature,
                                       timestamp: discount.timestamp.int64Value)
            })
        withState { $0.paymentsSent += 1 }
        connection.request({ id in
            var withID = request
            withID.requestID = id
            return .addPayment(withID)
        }, completion: { [reference = QueueReference(self)] result in
            guard let queue = reference.queue else { return }
            let answered = queue.withState { state -> UInt64 in
                state.paymentsAnswered += 1
                if case .success(.result(_, _, _, let id, _)) = result, id != 0 { state.ownPayments[id] = original.payment }
                return state.paymentsAnswered
            }
            ReceiptFile.shared.paymentsAnswered(answered)
            guard case .failure(let error) = result else { return }
            // A refused payment (unknown product, bad quantity, request data) becomes a failed
            // transaction for the observers, as StoreKit reports it.
            queue.deliverRefusal(of: original.payment, error: error)
        })
    }

    /// A payment's idempotency key: time-ordered (milliseconds in hex first) so that the store's
    /// key index grows at its end instead of at random places, then a UUID for uniqueness.
    static func idempotencyKey() -> String {
        idempotencyKey(milliseconds: UInt64(Date().timeIntervalSince1970 * 1000))
    }

    /// The key of a payment made at `milliseconds` since 1970.
    static func idempotencyKey(milliseconds: UInt64) -> String {
        let hex = String(milliseconds, radix: 16)
        return String(repeating: "0", count: max(0, 12 - hex.count)) + hex + "-" + UUID().uuidString
    }

    private func deliverRefusal(of payment: SKPayment, error: SKError) {
        // Id 0: a refused payment never entered the queue, so there is nothing to finish.
        let record = TransactionRecord(
            id: 0, uid: 0, app: "", productID: payment.productIdentifier, quantity: Int32(clamping: payment.quantity),
            state: .failed, sequence: 0, date: Int64(Date().timeIntervalSince1970 * 1000),
            errorCode: Int32(error.code.rawValue), errorMessage: error.localizedDescription)
        let transaction = SKPaymentTransaction(record: record, payment: payment)
        notify { queue, observer in observer.paymentQueue(queue, updatedTransactions: [transaction]) }
    }

    /// Finishes a transaction once its content is delivered. Finishing a `purchasing` transaction is
    /// a programming error and stops the program, as StoreKit raises an exception.
    open func finishTransaction(_ transaction: SKPaymentTransaction) {
        if transaction.transactionState == .purchasing {
            fatalError("Cannot finish a purchasing transaction")
        }
        guard isConnected else { return }
        guard let id = transaction.record?.id ?? transaction.transactionIdentifier.flatMap({ UInt64($0) }), id != 0 else {
            // A refused payment never reached the queue: there is nothing to finish.
            return
        }
        cancelDownloads(of: transaction)
        connection.request({ .finish(requestID: $0, transactionID: id) }) { result in
            if case .failure(let error) = result {
                FileHandle.standardError.write(Data("OpenStoreKit: finishing transaction \(id) failed: \(error.localizedDescription)\n".utf8))
            }
        }
    }

    /// Restores completed non-consumable and auto-renewable purchases as new `restored` transactions.
    open func restoreCompletedTransactions() {
        restoreCompletedTransactions(withApplicationUsername: nil)
    }

    /// Restores the purchases made with `username` as the payment's application username.
    open func restoreCompletedTransactions(withApplicationUsername username: String?) {
        guard isConnected else { return }
        let alreadyRunning = withState { state -> Bool in
            defer { state.restoring = true }
            return state.restoring
        }
        guard !alreadyRunning else { return }
        connection.request({ .restore(requestID: $0, applicationUsername: username) }) { [reference = QueueReference(self)] result in
            guard let queue = reference.queue else { return }
            queue.withState { $0.restoring = false }
            switch result {
            case .success:
                queue.notify { queue, observer in observer.paymentQueueRestoreCompletedTransactionsFinished(queue) }
            case .failure(let error):
                queue.notify { queue, observer in observer.paymentQueue(queue, restoreCompletedTransactionsFailedWithError: error) }
            }
        }
    }

    // MARK: Downloads

    /// Starts downloading hosted content (`.waiting`, or `.failed` to try again, going on from
    /// what was copied); each goes `.active`, then `.finished`, `.failed`, `.paused` or
    /// `.cancelled`, told in `paymentQueue(_:updatedDownloads:)`. Finished, active and cancelled
    /// downloads are left as they are: a cancelled download (finishing its transaction cancels
    /// it) is no longer queueable, as in StoreKit.
    open func start(_ downloads: [SKDownload]) {
        run(downloads, from: [.waiting, .failed])
    }

    /// Pauses active downloads after their current chunk (`.paused`); what they copied is kept.
    open func pause(_ downloads: [SKDownload]) {
        for download in downloads {
            download.withProgress { $0.worker }?.stop(.pause)
        }
    }

    /// Resumes paused downloads from where they stopped, even after the app or storekitd restarted.
    open func resume(_ downloads: [SKDownload]) {
        run(downloads, from: [.paused])
    }

    /// Cancels downloads that are not finished (`.cancelled`), deleting what they copied.
    open func cancel(_ downloads: [SKDownload]) {
        var told: [SKDownload] = []
        for download in downloads {
            let worker = download.withProgress { progress -> ContentDownloader?? in
                switch progress.state {
                case .active: return .some(progress.worker)
                case .waiting, .paused, .failed:
                    progress.state = .cancelled
                    progress.progress = 0
                    progress.timeRemaining = SKDownloadTimeRemainingUnknown
                    return .none
                case .finished, .cancelled: return .some(nil)
                }
            }
            switch worker {
            case .some(let running?): running.stop(.cancel)   // it tells when it stopped
            case .some(nil): break
            case .none:
                ContentDownloader.discardStaging(app: connection.resolvedAppIdentifier, productID: download.contentIdentifier,
                                                 version: download.contentVersion)
                told.append(download)
            }
        }
        if !told.isEmpty { tellObservers(about: told) }
    }

    private func run(_ downloads: [SKDownload], from states: Set<SKDownloadState>) {
        guard isConnected else { return }
        var told: [SKDownload] = []
        for download in downloads where download.transactionID != 0 {
            let worker = download.withProgress { progress -> ContentDownloader? in
                guard states.contains(progress.state) else { return nil }
                let worker = ContentDownloader(download: download, app: connection.resolvedAppIdentifier,
                                               socketPath: connection.resolvedSocketPath)
                progress.state = .active
                progress.error = nil
                progress.worker = worker
                return worker
            }
            if let worker {
                told.append(download)
                worker.start()
            }
        }
        if !told.isEmpty { tellObservers(about: told) }
    }

    /// Tells the observers of downloads that changed, on the callback queue.
    func tellObservers(about downloads: [SKDownload]) {
        let list = UncheckedDownloads(downloads: downloads)
        notify { queue, observer in observer.paymentQueue(queue, updatedDownloads: list.downloads) }
    }

    /// Finishing a transaction cancels its downloads that are not finished (as StoreKit: after
    /// the transaction is finished, its downloads are no longer queueable).
    private func cancelDownloads(of transaction: SKPaymentTransaction) {
        let unfinished = transaction.downloads.filter { $0.state != .finished && $0.state != .cancelled }
        if !unfinished.isEmpty { cancel(unfinished) }
    }

    // MARK: Sheets (no App Store UI on Linux)

    /// There is no code redemption sheet on Linux.
    open func presentCodeRedemptionSheet() {}
    /// Shows the price-consent sheet a delegate put off (`paymentQueueShouldShowPriceConsent(_:)`
    /// answered false). There is no sheet on Linux: the subscriber answers with `storekitctl
    /// price-consent`, so this does nothing.
    open func showPriceConsentIfNeeded() {}

    // MARK: Delivery

    private func wire() {
        var handlers = StoreConnection.Handlers()
        let reference = QueueReference(self)
        // The receipt is fetched before a batch that changes it reaches the observers (ReceiptFile).
        let connection = self.connection
        handlers.updated = { records in
            let signable = records.contains { $0.state == .purchased || $0.state == .restored }
            let sent = reference.queue?.withState { $0.paymentsSent } ?? 0
            ReceiptFile.shared.sequence(refreshFirst: signable, afterPayments: sent, connection: connection,
                                        app: connection.resolvedAppIdentifier) {
                reference.queue?.received(updated: records, receipt: $0)
            }
        }
        handlers.removed = { records in
            ReceiptFile.shared.sequence(refreshFirst: true, connection: connection, app: connection.resolvedAppIdentifier) {
                reference.queue?.received(removed: records, receipt: $0)
            }
        }
        handlers.connected = { country, identifier in
            reference.queue?.withState { $0.storefront = SKStorefront(countryCode: country, identifier: identifier) }
        }
        handlers.storefrontChanged = { country, identifier in
            guard let queue = reference.queue else { return }
            let storefront = SKStorefront(countryCode: country, identifier: identifier)
            queue.withState { $0.storefront = storefront }
            queue.notify { queue, observer in observer.paymentQueueDidChangeStorefront(queue) }
            queue.askWhetherToContinueDeferred(in: storefront)
        }
        handlers.revoked = { productIDs in
            reference.queue?.notify { queue, observer in
                observer.paymentQueue(queue, didRevokeEntitlementsForProductIdentifiers: productIDs)
            }
        }
        handlers.promoted = { record in
            guard let queue = reference.queue else { return }
            let product = SKProduct(record: record)
            let payment = SKPayment(product: product)
            // Every observer is asked; the payment is added once if any of them says yes. One that
            // says no keeps the payment and adds it when the app is ready.
            let decision = PromotionDecision()
            queue.notify { queue, observer in
                if observer.paymentQueue(queue, shouldAddStorePayment: payment, for: product), !decision.added {
                    decision.added = true
                    queue.add(payment)
                }
            }
        }
        handlers.priceConsent = { _ in
            // The App Store would show its consent sheet; the delegate is asked first, on the
            // callback queue, as there. There is no sheet on Linux: the subscriber answers with
            // `storekitctl price-consent`, whatever the delegate says.
            guard let queue = reference.queue else { return }
            let box = UncheckedDelivery(queue: queue, prepare: {}, body: { _, _ in })
            SKPaymentQueue.callbackQueue.async {
                _ = box.queue.delegate?.paymentQueueShouldShowPriceConsent(box.queue)
            }
        }
        connection.setHandlers(handlers)
    }

    /// How long the delegate has to answer `paymentQueue(_:shouldContinue:in:)` after a storefront
    /// change; no answer in time means the deferred payment does not continue.
    public static var storefrontDecisionTimeout: TimeInterval { 5 }

    /// Asks the delegate, on the callback queue, whether each deferred payment continues in the new
    /// storefront; a "no", or no answer within `storefrontDecisionTimeout`, withdraws it.
    private func askWhetherToContinueDeferred(in storefront: SKStorefront) {
        let decision = StorefrontDecision()
        let reference = QueueReference(self)
        let cancel: @Sendable ([UInt64]) -> Void = { ids in
            guard let queue = reference.queue, queue.isConnected else { return }
            for id in ids { queue.connection.request({ .cancelPayment(requestID: $0, transactionID: id) }, completion: nil) }
        }
        let deferredIDs: @Sendable () -> [UInt64] = {
            guard let queue = reference.queue else { return [] }
            return queue.withState { state in
                state.order.compactMap { state.transactions[$0]?.record }.filter { $0.state == .deferred }.map(\.id)
            }
        }
        let box = UncheckedDelivery(queue: self, prepare: {}, body: { _, _ in })
        let storefrontBox = StorefrontReference(storefront: storefront)
        SKPaymentQueue.callbackQueue.async {
            let queue = box.queue
            guard decision.decide() else { return }
            let delegate = queue.delegate
            var withdrawn: [UInt64] = []
            for transaction in queue.transactions where transaction.transactionState == .deferred {
                let proceed = delegate?.paymentQueue(queue, shouldContinue: transaction, in: storefrontBox.storefront) ?? true
                if !proceed, let id = transaction.record?.id { withdrawn.append(id) }
            }
            cancel(withdrawn)
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + SKPaymentQueue.storefrontDecisionTimeout) {
            if decision.decide() { cancel(deferredIDs()) }
        }
    }

    private func received(updated records: [TransactionRecord], receipt: [UInt8]?) {
        // One object per transaction from `purchasing` on, as StoreKit does. Its state is updated on
        // the callback queue, just before the observers run, so that each callback sees the state
        // it reports even when `purchasing` and `purchased` arrive back to back. Pushes that arrive
        // while the queue has no observer (the connection is subscribed for StoreKit 2's
        // `Transaction.updates`) are not the queue's: it keeps no transactions without observers.
        // A finished transaction in an update is not in this queue: a purchase made on another
        // host of a fleet, announced for StoreKit 2's `Transaction.updates`; StoreKit 1 shows it
        // only on restore.
        let pairs = withState { state -> [(SKPaymentTransaction, TransactionRecord)] in
            guard state.observers.contains(where: { $0.observer != nil }) else { return [] }
            return records.filter { !$0.finished }.map { record -> (SKPaymentTransaction, TransactionRecord) in
                if let existing = state.transactions[record.id] { return (existing, record) }
                let transaction = SKPaymentTransaction(record: record, payment: state.ownPayments.removeValue(forKey: record.id))
                state.transactions[record.id] = transaction
                state.order.append(record.id)
                return (transaction, record)
            }
        }
        guard !pairs.isEmpty else { return }
        let transactions = pairs.map(\.0)
        notify(receipt: receipt, prepare: { for (transaction, record) in pairs { transaction.update(from: record) } }) { queue, observer in
            observer.paymentQueue(queue, updatedTransactions: transactions)
        }
    }

    private func received(removed records: [TransactionRecord], receipt: [UInt8]?) {
        let transactions = records.map { SKPaymentTransaction(record: $0, payment: nil) }
        withState { state in
            for record in records where state.transactions.removeValue(forKey: record.id) != nil {
                state.order.removeAll { $0 == record.id }
            }
        }
        notify(receipt: receipt) { queue, observer in observer.paymentQueue(queue, removedTransactions: transactions) }
    }

    /// Calls `body` for each live observer on the callback queue; with the `receipt` fetched for
    /// the batch, what `SKAppReceipt.validated()` reads meanwhile.
    private func notify(
        receipt: [UInt8]? = nil,
        prepare: @escaping () -> Void = {},
        _ body: @escaping (SKPaymentQueue, any SKPaymentTransactionObserver) -> Void
    ) {
        let delivery = UncheckedDelivery(queue: self, prepare: prepare, body: body)
        SKPaymentQueue.callbackQueue.async {
            delivery.prepare()
            ReceiptFile.withBatchReceipt(receipt) {
                for observer in delivery.queue.transactionObservers { delivery.body(delivery.queue, observer) }
            }
        }
    }
}

/// Whether a promoted payment was added already; read and written on the callback queue only.
private final class PromotionDecision {
    var added = false
}

/// A weak reference to the queue that the connection thread may hold. The queue's state is
/// behind its lock, so reaching it from that thread is safe; apps' subclasses need not be `Sendable`.
private struct QueueReference: @unchecked Sendable {
    weak var queue: SKPaymentQueue?
    init(_ queue: SKPaymentQueue) { self.queue = queue }
}

/// Which of the delegate's answer and the deadline came first.
private final class StorefrontDecision: @unchecked Sendable {
    private let lock = NSLock()
    private var decided = false

    /// True for the first caller only.
    func decide() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if decided { return false }
        decided = true
        return true
    }
}

private struct StorefrontReference: @unchecked Sendable {
    let storefront: SKStorefront
}

/// Carries observer calls to the callback queue. The observers are app objects that StoreKit, too,
/// calls from its own queue; their thread-safety is the app's contract with the callback queue.
private struct UncheckedDelivery: @unchecked Sendable {
    let queue: SKPaymentQueue
    let prepare: () -> Void
    let body: (SKPaymentQueue, any SKPaymentTransactionObserver) -> Void
}

/// Downloads carried to the callback queue; their state is behind their own locks.
private struct UncheckedDownloads: @unchecked Sendable {
    let downloads: [SKDownload]
}

/// The app's payment object, kept to report a refusal with it; StoreKit payments are immutable
/// once added (the queue copies mutable ones), so reading it from the connection thread is safe.
private struct PaymentReference: @unchecked Sendable {
    let payment: SKPayment
}

nonisolated(unsafe) private let sharedQueue = SKPaymentQueue.makeShared()
private let callbackQueueStorage = Mutex(DispatchQueue.main)
private let configurationStorage = Mutex<(app: String?, socket: String?)>((nil, nil))
