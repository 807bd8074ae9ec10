import StoreKitLedger
import StoreKitWire

/// StoreKit 1 queue semantics and the simulated store (payment processor, subscriptions on the
/// store clock, Ask to Buy, interrupted purchases, refunds), over the durable store.
///
/// Pure logic: no sockets, no threads. Every mutating call must run inside a store unit of work
/// (`store.begin()` … `store.commit()`); its `Outcome` may be told to clients only after the commit.
/// State cached in memory (switches, clock, next due event) is reloaded when the store reports a
/// rollback, so an undone unit of work leaves no trace here either.
public final class PaymentQueueEngine {
    /// What one client may ask of the store (`[Limits]` in storekitd.conf).
    public struct Limits: Sendable {
        /// Bytes of a payment's applicationUsername (`MaxApplicationUsernameLength=`).
        public var applicationUsernameBytes = 256
        /// Unfinished transactions of one (uid, app) before payments are refused (`MaxUnfinishedPerQueue=`).
        public var unfinishedPerQueue = 10_000
        /// Bytes of a product identifier or a payment key (App Store product ids are shorter).
        public static let identifierBytes = 255

        public init() {}
    }

    /// Set by the daemon from its configuration (and again on reload).
    public var limits = Limits()
    /// The families of the configuration (`[Family]`); `applyFamilies()` brings the ledger's
    /// family copies in line after they change.
    public var families = FamilyGroups()
    /// The apps the ledger marks as having bought with an Advanced Commerce request
    /// (`commerce.app.<app>`), and the store generations they were read at (nil: not yet).
    var commerceApps: Set<String> = []
    /// The ledger keeps requests but marks no app (kept before apps were marked): every app may
    /// have them, until the first mark marks theirs.
    var commerceUnmarked = false
    var commerceAppsGenerations: (UInt64, UInt64)?
    public let store: any Ledger
    public private(set) var catalogs: [String: Catalog]
    public var clock: StoreClock
    /// The storefront of the configuration (or catalogue); `storekitctl storefront set` overrides it.
    public var configuredStorefront: String
    public var locale: String
    /// The test switches set through `storekitctl`, over the catalogues' defaults.
    public internal(set) var switches: StoreSwitches

    /// The store generations (own rollbacks, others' changes) the cached state was read at.
    private var loadedGeneration: UInt64
    private var loadedExternalGeneration: UInt64
    /// The earliest scheduled event; `nil` inside: nothing scheduled; outer `nil`: not known yet.
    private var cachedNextDue: Int64??
    /// The last `fireDueEvents`: the store generation it ran in and when (real ms). If that unit of
    /// work was rolled back (a full disk), the next attempt waits a second instead of spinning.
    private var lastFire: (generation: UInt64, at: Int64)?
    static let retryAfterFailedFire: Int64 = 1000

    /// Most scheduled events fired in one unit of work; the rest fire in the next loop turn.
    public static let eventBatchLimit = 1000
    /// How long an Ask to Buy request waits for a parent before it lapses (store time).
    public static let askToBuyLifetime: Int64 = 24 * 3_600_000

    public init(store: any Ledger, catalogs: [String: Catalog], storefront: String = "USA", locale: String = "en_US") {
        self.store = store
        self.catalogs = catalogs
        self.configuredStorefront = storefront
        self.locale = locale
        self.clock = StoreClock()
        self.switches = StoreSwitches()
        self.loadedGeneration = store.generation
        self.loadedExternalGeneration = store.externalGeneration
        reload()
    }

    /// The storefront in effect: the `storekitctl storefront set` override, else the configured one.
    /// Setting it sets the configured one (the daemon does at start).
    public var storefront: String {
        get { switches.storefront ?? configuredStorefront }
        set { configuredStorefront = newValue }
    }

    /// Swaps the catalogues (reload); transactions are untouched.
    public func replaceCatalogs(_ catalogs: [String: Catalog]) {
        self.catalogs = catalogs
        clock.rate = switches.timeRate ?? defaultTimeRate
        cachedNextDue = nil
    }

    public func isRegistered(app: String) -> Bool { catalogs[app] != nil }

    public func product(app: String, id: String) -> CatalogProduct? { catalogs[app]?.product(id) }

    public var currencyCode: String { Storefronts.currency(for: storefront) }

    // MARK: Cached state

    /// The catalogues' `_timeRate` (of the first app by id), real time when unknown.
    var defaultTimeRate: TimeRate {
        guard let first = catalogs.keys.sorted().first, let raw = catalogs[first]?.settings.timeRate else { return .realTime }
        return TimeRate(rawValue: raw) ?? .realTime
    }

    /// Reads the persisted switches and clock; forgets the cached schedule.
    private func reload() {
        loadedGeneration = store.generation
        loadedExternalGeneration = store.externalGeneration
        switches = (try? StoreSwitches.load(from: store)) ?? StoreSwitches()
        clock.offsetMilliseconds = (try? store.setting(Self.clockOffsetKey)).flatMap { $0 }.flatMap { Int64($0) } ?? 0
        clock.rate = switches.timeRate ?? defaultTimeRate
        cachedNextDue = nil
    }

    /// Reloads what a rollback may have undone, or another daemon of a fleet changed. Cheap
    /// when neither happened.
    func synchronize() {
        if store.generation != loadedGeneration || store.externalGeneration != loadedExternalGeneration { reload() }
    }

    /// Call after changing a subscription's `due` or a request's `expires`.
    func scheduleChanged() {
        cachedNextDue = nil
    }

    static let clockOffsetKey = "clock.offset"

    // MARK: Payments

    public static let quantityRange: ClosedRange<Int32> = 1...10

    /// Records a payment and lets the simulated processor decide it in the same unit of work.
    /// Refused at once (no transaction) for an unknown product, a bad quantity or request data.
    /// The same non-empty `key` never makes a second transaction: the first one's id is returned.
    /// `promotionalOfferID` and `introductoryOfferAllowed`: what the payment's signed requests
    /// (checked by whoever holds the keys) ask: a promotional offer (else the `discount`'s), and
    /// the app server's word on the introductory offer (else the store's rule: a buyer who never
    /// subscribed in the group). `advancedCommerce`: the Advanced Commerce request the payment
    /// carried (checked likewise), which sets what is bought and its price.
    public func addPayment(uid: UInt32, app: String, payment: ClientMessage.AddPayment, promotionalOfferID: String? = nil,
                           introductoryOfferAllowed: Bool? = nil, advancedCommerce: AdvancedCommerceRequest? = nil) throws(LedgerError) -> Outcome {
        guard let catalog = catalogs[app] else {
            return .refused(.unknownApp, "app \(app) is not registered")
        }
        guard payment.productID.utf8.count <= Limits.identifierBytes else {
            return .storeKit(.storeProductNotAvailable, "a product identifier of \(payment.productID.utf8.count) bytes is not in the store")
        }
        guard let product = catalog.product(payment.productID) else {
            return .storeKit(.storeProductNotAvailable, "product \(payment.productID) is not available in the store")
        }
        guard Self.quantityRange.contains(payment.quantity) else {
            return .storeKit(.paymentInvalid, "quantity \(payment.quantity) is outside 1…10")
        }
        guard !payment.hasRequestData else {
            return .storeKit(.unauthorizedRequestData, "payments with request data are not allowed")
        }
        if let username = payment.applicationUsername, username.utf8.count > limits.applicationUsernameBytes {
            return .storeKit(.paymentInvalid, "applicationUsername of \(username.utf8.count) bytes is longer than the "
                             + "\(limits.applicationUsernameBytes) allowed (MaxApplicationUsernameLength=)")
        }
        guard payment.key.utf8.count <= Limits.identifierBytes else {
            return .refused(.invalidArgument, "payment key of \(payment.key.utf8.count) bytes is longer than \(Limits.identifierBytes)")
        }
        let key = payment.key.isEmpty ? nil : payment.key
        if let key, let existing = try store.transaction(uid: uid, app: app, paymentKey: key) {
            return .ok(value: existing.id)
        }
        var applicationUsername = payment.applicationUsername
        if let advancedCommerce {
            if let reused = try reusedCommerce(advancedCommerce, uid: uid, app: app) { return reused }
            if let refusal = try advancedCommerceRefusal(advancedCommerce, payment: payment, product: product, uid: uid, app: app) {
                return refusal
            }
            applicationUsername = applicationUsername ?? advancedCommerce.appAccountToken
        }
        if let offerID = payment.winBackOfferID, offerID.utf8.count > Limits.identifierBytes {
            return .storeKit(.invalidOfferIdentifier, "a win-back offer identifier of \(offerID.utf8.count) bytes is not in the store")
        }
        if payment.winBackOfferID != nil, promotionalOfferID != nil || payment.discount != nil {
            return .storeKit(.missingOfferParams, "the payment carries a promotional and a win-back offer: it may carry one")
        }
        let plan: BillingPlan?
        switch billingPlan(payment.billingPlanType, of: product) {
        case .success(let found): plan = found
        case .failure(let refusal): return refusal.outcome
        }
        // The offers of a monthly plan are its own.
        let billed = product.billed(with: plan)
        var promotion: SubscriptionOffer?
        var promotionKind = TransactionOffer.Kind.promotional
        if let offerID = promotionalOfferID ?? payment.discount?.offerID {
            switch try promotionalOffer(offerID, of: billed, uid: uid, app: app) {
            case .success(let offer): promotion = offer
            case .failure(let refusal): return refusal.outcome
            }
        } else if let offerID = payment.winBackOfferID {
            switch try winBackOffer(offerID, of: billed, uid: uid, app: app) {
            case .success(let offer):
                promotion = offer
                promotionKind = .winBack
            case .failure(let refusal): return refusal.outcome
            }
        }
        let unfinished = try store.unfinishedCount(of: QueueKey(uid: uid, app: app))
        guard unfinished < limits.unfinishedPerQueue else {
            return .refused(.quotaExceeded, "the queue holds \(unfinished) unfinished transactions, the most allowed "
                            + "(MaxUnfinishedPerQueue=); finish some first")
        }
        return try process(uid: uid, app: app, productID: payment.productID, quantity: payment.quantity,
                           applicationUsername: applicationUsername, paymentKey: key,
                           simulatesAskToBuy: payment.simulatesAskToBuy, promotion: promotion, promotionKind: promotionKind,
                           introductoryOfferAllowed: introductoryOfferAllowed, plan: plan, advancedCommerce: advancedCommerce)
    }

    /// A refusal of a payment, as StoreKit reports it (`SKError`).
    public struct PaymentRefusal: Error {
        public var outcome: Outcome
    }

    /// The promotional offer `offerID` of `product`, when `uid` may have it: the product is an
    /// auto-renewable subscription whose catalogue lists the offer (`adHocOffers`), and the buyer
    /// is a current or lapsed subscriber of its group (as the App Store decides eligibility; the
    /// app decides anything more). The signature is checked before, by whoever holds the keys.
    public func promotionalOffer(_ offerID: String, of product: CatalogProduct, uid: UInt32, app: String) throws(LedgerError)
        -> Result<SubscriptionOffer, PaymentRefusal>
    {
        guard product.kind == .autoRenewable, let offer = product.promotionalOffers.first(where: { $0.id == offerID }) else {
            return .failure(PaymentRefusal(outcome: .storeKit(.invalidOfferIdentifier,
                "\(product.id) has no promotional offer \(offerID)")))
        }
        let groupID = product.subscriptionGroupID ?? product.id
        guard try store.subscription(uid: uid, app: app, groupID: groupID) != nil else {
            return .failure(PaymentRefusal(outcome: .storeKit(.ineligibleForOffer,
                "promotional offers are for current and lapsed subscribers, and uid \(uid) never subscribed in group \(groupID)")))
        }
        return .success(offer)
    }

    /// The simulated payment processor: decides a valid new payment, in this order — a failure
    /// asked for with `fail-next` (or the catalogue's `_failTransactionsEnabled`), Ask to Buy
    /// (`deferred`, duplicates consolidated into the open request), an interrupted purchase
    /// (`failed` until `resolve`), else `purchased`. Observers see `purchasing`, then the decision.
    func process(
        uid: UInt32, app: String, productID: String, quantity: Int32, applicationUsername: String?,
        paymentKey: String?, simulatesAskToBuy: Bool, promotion: SubscriptionOffer? = nil,
        promotionKind: TransactionOffer.Kind = .promotional, introductoryOfferAllowed: Bool? = nil, plan: BillingPlan? = nil,
        advancedCommerce: AdvancedCommerceRequest? = nil
    ) throws(LedgerError) -> Outcome {
        synchronize()
        guard let catalog = catalogs[app], let product = catalog.product(productID) else {
            return .storeKit(.storeProductNotAvailable, "product \(productID) is not available in the store")
        }
        let queue = QueueKey(uid: uid, app: app)
        let now = clock.now()
        let askToBuy = simulatesAskToBuy || askToBuyEnabled(uid: uid, catalog: catalog)
        let failure = try takeFailure(catalog: catalog)

        // A purchase with an Advanced Commerce request is its own: the request says what it buys
        // under the generic SKU, so it is neither merged into nor merges a waiting one.
        if failure == nil, askToBuy, advancedCommerce == nil,
           let open = try store.openPurchaseRequest(uid: uid, app: app, productID: productID, kind: .askToBuy),
           var pending = try store.transaction(id: open.transactionID), pending.state == .deferred, !pending.finished,
           try !hasCommerce(pending) {
            // "Duplicate requests are consolidated": the parent sees one request; the app sees it again.
            pending.sequence = try store.nextSequence(uid: uid, app: app)
            _ = try store.touch(id: pending.id, sequence: pending.sequence)
            return .ok(value: pending.id, [.updated(queue, [pending])])
        }

        var startsPeriod = true
        var record = TransactionRecord(
            id: try store.allocateTransactionID(), uid: uid, app: app, productID: productID, quantity: quantity,
            state: .purchasing, sequence: try store.nextSequence(uid: uid, app: app), date: now,
            applicationUsername: applicationUsername)
        let purchasing = record
        // Kept before the purchase completes (a subscription's period is the request's).
        if failure == nil, let advancedCommerce {
            try recordCommerce(advancedCommerce, period: 0, of: record.id, app: app)
            try recordCommerceReference(advancedCommerce, uid: uid, app: app, transactionID: record.id)
        }
        if let failure {
            record.state = .failed
            record.errorCode = failure
            record.errorMessage = Self.failureMessage(failure)
        } else if askToBuy {
            record.state = .deferred
            try store.insert(PurchaseRequest(
                transactionID: record.id, kind: .askToBuy, uid: uid, app: app, productID: productID,
                created: now, expires: now + Self.askToBuyLifetime))
            try keepWaitingOffer(promotion, kind: promotionKind, introductoryOfferAllowed: introductoryOfferAllowed,
                                 product: product, of: record.id)
            try keepWaitingPlan(plan, of: record.id)
            scheduleChanged()
        } else if interrupted(productID: productID, catalog: catalog) {
            record.state = .failed
            record.errorCode = StoreKitErrorCode.unknown.rawValue
            record.errorMessage = Self.interruptedMessage
            try store.insert(PurchaseRequest(
                transactionID: record.id, kind: .interrupted, uid: uid, app: app, productID: productID,
                created: now, expires: nil))
            try keepWaitingOffer(promotion, kind: promotionKind, introductoryOfferAllowed: introductoryOfferAllowed,
                                 product: product, of: record.id)
            try keepWaitingPlan(plan, of: record.id)
        } else {
            record.state = .purchased
            if product.kind == .autoRenewable {
                startsPeriod = try applySubscriptionPurchase(&record, product: product, catalog: catalog, at: now, promotion: promotion,
                                                             promotionKind: promotionKind, introductoryOfferAllowed: introductoryOfferAllowed,
                                                             plan: plan)
            }
        }
        record.sequence = try store.nextSequence(uid: uid, app: app)
        try store.insert(record, paymentKey: paymentKey)
        return .ok(value: record.id, [.updated(queue, [purchasing]), .updated(queue, [record])]
                   + (try shareWithFamily(record, startsPeriod: startsPeriod)))
    }

    static let interruptedMessage = "The purchase was interrupted: the buyer must act (storekitctl resolve) before it completes"

    static func failureMessage(_ code: Int32) -> String {
        "The purchase failed as the store was told to (\(StoreKitErrorCode.name(of: code)))"
    }

    /// Whether a purchase by `uid` needs a parent's approval: the account's switch, else the
    /// switch for every account, else the catalogue's `_askToBuyEnabled`.
    func askToBuyEnabled(uid: UInt32, catalog: Catalog) -> Bool {
        switches.askToBuyByUID[uid] ?? switches.askToBuy ?? catalog.settings.askToBuyEnabled
    }

    func interrupted(productID: String, catalog: Catalog) -> Bool {
        switches.interrupted ?? catalog.settings.interruptedPurchases.contains(productID)
    }

    /// The error the next purchase must fail with, counting it down; nil: it goes through.
    private func takeFailure(catalog: Catalog) throws(LedgerError) -> Int32? {
        if let failure = switches.failure {
            guard failure.remaining != 0 else { return nil }
            if failure.remaining > 0 {
                switches.failure = failure.remaining == 1 ? nil : (failure.code, failure.remaining - 1)
                try switches.save(to: store)
            }
            return failure.code
        }
        guard catalog.settings.failTransactionsEnabled else { return nil }
        return catalog.settings.failErrorCode ?? StoreKitErrorCode.unknown.rawValue
    }

    // MARK: Finishing

    /// Finishes a transaction of this queue: durable, idempotent, refused while purchasing or deferred.
    public func finish(uid: UInt32, app: String, transactionID: UInt64) throws(LedgerError) -> Outcome {
        guard let record = try store.transaction(id: transactionID), record.uid == uid, record.app == app else {
            return .refused(.transactionNotFound, "transaction \(transactionID) is not in this queue")
        }
        if record.finished { return .ok(value: record.id) }
        guard record.state.isFinishable else {
            return .refused(.notFinishable, "cannot finish transaction \(transactionID) while it is \(record.state)")
        }
        let sequence = try store.nextSequence(uid: uid, app: app)
        guard try store.markFinished(id: transactionID, sequence: sequence, of: QueueKey(uid: uid, app: app)) else {
            // A fleet's ledger: another host's queue holds it (a purchase made there, which
            // StoreKit 2's Transaction.updates announced here). This queue holds nothing of it to
            // finish, as finishing on one device leaves another's queue alone: done, and the
            // other host's queue keeps it until its own app finishes it.
            return .ok(value: record.id)
        }
        var finished = record
        finished.finished = true
        finished.sequence = sequence
        return .ok(value: record.id, [.removed(QueueKey(uid: uid, app: app), [finished])])
    }

    // MARK: Restore

    /// Creates a new `restored` transaction for every finished, unrevoked purchase of a
    /// non-consumable or auto-renewable product that has no unfinished restore pending, and a
    /// family copy of what the buyer's family shares (`restoreFromFamily`).
    public func restore(uid: UInt32, app: String, applicationUsername: String?) throws(LedgerError) -> Outcome {
        guard let catalog = catalogs[app] else {
            return .refused(.unknownApp, "app \(app) is not registered")
        }
        let history = try store.all(uid: uid, app: app)
        var pendingRestores = Set<UInt64>()
        for record in history where record.state == .restored && !record.finished {
            if let original = record.originalID { pendingRestores.insert(original) }
        }
        var originals: [String: TransactionRecord] = [:]
        var latestExpiry: [String: Int64] = [:]
        var order: [String] = []
        for record in history where record.state == .purchased && record.finished && record.revocationDate == nil {
            guard let product = catalog.product(record.productID),
                  product.kind == .nonConsumable || product.kind == .autoRenewable else { continue }
            if let username = applicationUsername, record.applicationUsername != username { continue }
            // Each non-consumable bought with an Advanced Commerce request is its own purchase (its
            // request's items), not a purchase again of the generic SKU.
            let ownPurchase = product.kind == .nonConsumable ? try hasCommerce(record) : false
            let key = ownPurchase ? "\(record.productID)#\(record.id)" : record.productID
            if originals[key] == nil { order.append(key) }
            // The first purchase is the original of every later one (renewals link back to it).
            let root = record.originalID.flatMap { id in history.first { $0.id == id } } ?? record
            if originals[key] == nil { originals[key] = root }
            if let expires = record.expiresDate { latestExpiry[key] = max(latestExpiry[key] ?? expires, expires) }
        }
        let now = clock.now()
        var restored: [TransactionRecord] = []
        for key in order {
            guard let original = originals[key], !pendingRestores.contains(original.id) else { continue }
            let record = TransactionRecord(
                id: try store.allocateTransactionID(), originalID: original.id, uid: uid, app: app,
                productID: original.productID, quantity: original.quantity, state: .restored,
                sequence: try store.nextSequence(uid: uid, app: app), date: now,
                applicationUsername: original.applicationUsername,
                expiresDate: latestExpiry[key] ?? original.expiresDate)
            try store.insert(record)
            restored.append(record)
        }
        // What the family shares is restored with the buyer's own (a restore asked for one
        // account of the app's, `applicationUsername`, restores that account's purchases only).
        if applicationUsername == nil {
            restored += try restoreFromFamily(uid: uid, app: app, pending: pendingRestores)
        }
        let effects: [Effect] = restored.isEmpty ? [] : [.updated(QueueKey(uid: uid, app: app), restored)]
        return .ok(value: UInt64(restored.count), effects)
    }

    // MARK: Scheduled events

    /// Real milliseconds until the next scheduled event (renewal, expiry, grace end, Ask-to-Buy
    /// expiry) falls due on the store clock, nil when nothing is scheduled. Cheap: the due time is
    /// cached and read again only after the schedule changed or a rollback.
    public func millisecondsUntilNextEvent() throws(LedgerError) -> Int64? {
        synchronize()
        let next: Int64?
        if let cached = cachedNextDue {
            next = cached
        } else {
            next = try store.nextDueTime()
            cachedNextDue = .some(next)
        }
        guard let next else { return nil }
        let wait = next - clock.now()
        if let lastFire, lastFire.generation != store.generation {
            let retry = Self.retryAfterFailedFire - (StoreClock.realTimeMilliseconds() - lastFire.at)
            if retry > 0 { return max(wait, retry) }
        }
        return wait
    }

    /// Fires every scheduled event that is due on the store clock (also those that fell due while
    /// the daemon was down), oldest first, at most `eventBatchLimit` of them; the loop calls again
    /// for the rest. Runs inside a unit of work; the effects are delivered after commit.
    public func fireDueEvents() throws(LedgerError) -> [Effect] {
        synchronize()
        lastFire = (store.generation, StoreClock.realTimeMilliseconds())
        let now = clock.now()
        var effects: [Effect] = []
        var budget = Self.eventBatchLimit
        for request in try store.duePurchaseRequests(at: now, limit: budget) {
            budget -= 1
            effects += try lapse(request, at: request.expires ?? now)
        }
        while budget > 0 {
            let due = try store.dueSubscriptions(at: now, limit: min(budget, 100))
            if due.isEmpty { break }
            for subscription in due {
                budget -= 1
                effects += try fire(subscription, now: now)
            }
        }
        scheduleChanged()
        return effects
    }

    // MARK: Changes made elsewhere

    /// What other daemons of a fleet did to the queues `observed` (purchases approved, renewals,
    /// refunds, lapsed requests, the account's purchases made there), as effects for this daemon's
    /// observers: a transaction in this host's queue is updated, a purchase made on another host
    /// is announced as updated and finished, a refunded purchase of the account (wherever it was
    /// made) revokes its product. Also the unobserved queues with work waiting here after such a change (their
    /// observers may be started). Runs inside a unit of work; nothing for a ledger no one else writes.
    public func changesElsewhere(observed: Set<QueueKey>) throws(LedgerError) -> (effects: [Effect], waiting: [QueueKey]) {
        guard store.hasChangesElsewhere else { return ([], []) }
        synchronize()
        var effects: [Effect] = []
        let changes = try store.changesElsewhere(of: observed)
        for record in changes.transactions {
            let queue = QueueKey(uid: record.uid, app: record.app)
            if record.revocationDate != nil {
                effects.append(.revoked(queue, [record.productID]))
                if !record.finished { effects.append(.updated(queue, [record])) }
            } else if !record.finished || record.state == .purchased {
                // In this host's queue; or (finished here) a purchase of the account made on
                // another host: StoreKit 2's `Transaction.updates` announces it, StoreKit 1's
                // queue ignores it (it is not in this queue).
                effects.append(.updated(queue, [record]))
            }
        }
        return (effects, changes.waiting)
    }

    // MARK: Reads

    public func unfinished(uid: UInt32, app: String) throws(LedgerError) -> [TransactionRecord] {
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
