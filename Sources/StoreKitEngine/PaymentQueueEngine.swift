import StoreKitStore
import StoreKitWire

/// StoreKit 1 queue semantics and the simulated payment processor, over the durable store.
///
/// Pure logic: no sockets, no threads. Every mutating call must run inside a store unit of work
/// (`store.begin()` … `store.commit()`); its `Outcome` may be told to clients only after the commit.
public final class PaymentQueueEngine {
    public let store: TransactionStore
    public private(set) var catalogs: [String: Catalog]
    public var clock: StoreClock
    public var storefront: String
    public var locale: String

    public init(store: TransactionStore, catalogs: [String: Catalog], storefront: String = "USA", locale: String = "en_US") {
        self.store = store
        self.catalogs = catalogs
        self.storefront = storefront
        self.locale = locale
        self.clock = StoreClock()
    }

    /// Swaps the catalogues (reload); transactions are untouched.
    public func replaceCatalogs(_ catalogs: [String: Catalog]) {
        self.catalogs = catalogs
    }

    public func isRegistered(app: String) -> Bool { catalogs[app] != nil }

    public func product(app: String, id: String) -> CatalogProduct? { catalogs[app]?.product(id) }

    public var currencyCode: String { Storefronts.currency(for: storefront) }

    // MARK: Payments

    public static let quantityRange: ClosedRange<Int32> = 1...10

    /// Records a payment and lets the simulated processor decide it in the same unit of work.
    /// Refused at once (no transaction) for an unknown product, a bad quantity or request data.
    /// The same non-empty `key` never makes a second transaction: the first one's id is returned.
    public func addPayment(uid: UInt32, app: String, payment: ClientMessage.AddPayment) throws(StoreError) -> Outcome {
        guard let catalog = catalogs[app] else {
            return .refused(.unknownApp, "app \(app) is not registered")
        }
        guard catalog.product(payment.productID) != nil else {
            return .storeKit(.storeProductNotAvailable, "product \(payment.productID) is not available in the store")
        }
        guard Self.quantityRange.contains(payment.quantity) else {
            return .storeKit(.paymentInvalid, "quantity \(payment.quantity) is outside 1…10")
        }
        guard !payment.hasRequestData else {
            return .storeKit(.unauthorizedRequestData, "payments with request data are not allowed")
        }
        let key = payment.key.isEmpty ? nil : payment.key
        if let key, let existing = try store.transaction(uid: uid, app: app, paymentKey: key) {
            return .ok(value: existing.id)
        }
        let now = clock.now()
        var record = TransactionRecord(
            id: store.allocateTransactionID(), uid: uid, app: app, productID: payment.productID,
            quantity: payment.quantity, state: .purchasing, sequence: try store.nextSequence(uid: uid, app: app),
            date: now, applicationUsername: payment.applicationUsername)
        let purchasing = record
        record.state = .purchased
        record.sequence = try store.nextSequence(uid: uid, app: app)
        try store.insert(record, paymentKey: key)
        let queue = QueueKey(uid: uid, app: app)
        return .ok(value: record.id, [.updated(queue, [purchasing]), .updated(queue, [record])])
    }

    // MARK: Finishing

    /// Finishes a transaction of this queue: durable, idempotent, refused while purchasing or deferred.
    public func finish(uid: UInt32, app: String, transactionID: UInt64) throws(StoreError) -> Outcome {
        guard let record = try store.transaction(id: transactionID), record.uid == uid, record.app == app else {
            return .refused(.transactionNotFound, "transaction \(transactionID) is not in this queue")
        }
        if record.finished { return .ok(value: record.id) }
        guard record.state.isFinishable else {
            return .refused(.notFinishable, "cannot finish transaction \(transactionID) while it is \(record.state)")
        }
        let sequence = try store.nextSequence(uid: uid, app: app)
        guard try store.markFinished(id: transactionID, sequence: sequence) else {
            return .refused(.notFinishable, "transaction \(transactionID) changed state while finishing")
        }
        var finished = record
        finished.finished = true
        finished.sequence = sequence
        return .ok(value: record.id, [.removed(QueueKey(uid: uid, app: app), [finished])])
    }

    // MARK: Restore

    /// Creates a new `restored` transaction for every finished, unrevoked purchase of a
    /// non-consumable or auto-renewable product that has no unfinished restore pending.
    public func restore(uid: UInt32, app: String, applicationUsername: String?) throws(StoreError) -> Outcome {
        guard let catalog = catalogs[app] else {
            return .refused(.unknownApp, "app \(app) is not registered")
        }
        let history = try store.all(uid: uid, app: app)
        var pendingRestores = Set<UInt64>()
        for record in history where record.state == .restored && !record.finished {
            if let original = record.originalID { pendingRestores.insert(original) }
        }
        var originals: [String: TransactionRecord] = [:]
        var order: [String] = []
        for record in history where record.state == .purchased && record.finished && record.revocationDate == nil {
            guard let product = catalog.product(record.productID),
                  product.kind == .nonConsumable || product.kind == .autoRenewable else { continue }
            if let username = applicationUsername, record.applicationUsername != username { continue }
            if originals[record.productID] == nil { order.append(record.productID) }
            // The first purchase is the original of every later one (renewals link back to it).
            let root = record.originalID.flatMap { id in history.first { $0.id == id } } ?? record
            if originals[record.productID] == nil { originals[record.productID] = root }
        }
        let now = clock.now()
        var restored: [TransactionRecord] = []
        for productID in order {
            guard let original = originals[productID], !pendingRestores.contains(original.id) else { continue }
            let record = TransactionRecord(
                id: store.allocateTransactionID(), originalID: original.id, uid: uid, app: app,
                productID: productID, quantity: original.quantity, state: .restored,
                sequence: try store.nextSequence(uid: uid, app: app), date: now,
                applicationUsername: original.applicationUsername, expiresDate: original.expiresDate)
            try store.insert(record)
            restored.append(record)
        }
        let effects: [Effect] = restored.isEmpty ? [] : [.updated(QueueKey(uid: uid, app: app), restored)]
        return .ok(value: UInt64(restored.count), effects)
    }

    // MARK: Scheduled events (the serving loop asks; the store's flows fill these in)

    /// Real milliseconds until the next scheduled event (renewal, expiry, grace end, Ask-to-Buy
    /// expiry) falls due on the store clock, nil when nothing is scheduled.
    public func millisecondsUntilNextEvent() throws(StoreError) -> Int64? {
        nil
    }

    /// Fires every scheduled event that is due on the store clock (also those that fell due while
    /// the daemon was down). Runs inside a unit of work; the effects are delivered after commit.
    public func fireDueEvents() throws(StoreError) -> [Effect] {
        []
    }

    // MARK: Reads

    public func unfinished(uid: UInt32, app: String) throws(StoreError) -> [TransactionRecord] {
        try store.unfinished(uid: uid, app: app)
    }

    /// Products of `app` for the identifiers asked, and the identifiers the store does not know.
    public func products(app: String, identifiers: [String]) -> (products: [ProductRecord], invalid: [String]) {
        guard let catalog = catalogs[app] else { return ([], identifiers) }
        var products: [ProductRecord] = []
        var invalid: [String] = []
        for identifier in identifiers {
            if let product = catalog.product(identifier) {
                products.append(product.record(locale: locale, currencyCode: currencyCode))
            } else {
                invalid.append(identifier)
            }
        }
        return (products, invalid)
    }
}
