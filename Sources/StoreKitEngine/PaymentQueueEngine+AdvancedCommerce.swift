import StoreKitLedger
import StoreKitWire

// Purchases of Apple's Advanced Commerce API: a generic SKU of the catalogue bought with the
// developer's signed request (`AdvancedCommerceRequest`, checked by whoever holds the keys): the
// checks of a request against the store, what a request bought already (`commerce.ref.…`), and
// what a signed transaction or renewal info tells of it. How it is kept: +CommerceStorage.

extension PaymentQueueEngine {
    /// The purchase a request (by its `requestReferenceId`) made in `app`: `UID\tTRANSACTION`.
    static func commerceReferenceKey(app: String, _ reference: String) -> String { "commerce.ref.\(app).\(reference)" }

    /// What a payment carrying `request` is when the request bought already (Apple's
    /// `requestReferenceId` names a request once, and a retry of one that timed out must not
    /// charge again): the same buyer gets the transaction it made back, and nothing is charged;
    /// another buyer is refused (`paymentInvalid`), whatever account the request was signed for.
    /// Nil when the request bought nothing yet.
    func reusedCommerce(_ request: AdvancedCommerceRequest, uid: UInt32, app: String) throws(LedgerError) -> Outcome? {
        guard let text = try store.setting(Self.commerceReferenceKey(app: app, request.requestReferenceID)) else { return nil }
        let fields = text.split(separator: "\t")
        guard fields.count == 2, let buyer = UInt32(fields[0]), let transactionID = UInt64(fields[1]) else { return nil }
        guard buyer == uid else {
            return .storeKit(.paymentInvalid, "the request \(request.requestReferenceID) was used by another buyer: a signed request "
                             + "buys once")
        }
        return .ok(value: transactionID)
    }

    /// Why an Advanced Commerce request cannot buy `product` for `uid` now (StoreKit's error);
    /// nil when it can. The request's own form was checked when it was read.
    func advancedCommerceRefusal(_ request: AdvancedCommerceRequest, payment: ClientMessage.AddPayment, product: CatalogProduct,
                                 uid: UInt32, app: String) throws(LedgerError) -> Outcome? {
        if let refusal = Self.commerceProductRefusal(request, product: product) { return refusal }
        guard payment.quantity == 1 else {
            return .storeKit(.paymentInvalid, "an Advanced Commerce purchase has quantity 1 (the request lists what is bought)")
        }
        guard payment.discount == nil, payment.offerJWS == nil, payment.eligibilityJWS == nil, payment.winBackOfferID == nil else {
            return .storeKit(.paymentInvalid, "an Advanced Commerce purchase takes no App Store offers: the request sets its prices and offers")
        }
        guard payment.billingPlanType != .monthly else {
            return .storeKit(.paymentInvalid, "an Advanced Commerce purchase takes no monthly billing plan: the request sets its period and prices")
        }
        // Apple's rule: an app account token given with the purchase must be the request's too.
        if let username = payment.applicationUsername, username.lowercased() != request.appAccountToken {
            return .storeKit(.paymentInvalid, "the payment's app account token \(username) is not the request's "
                             + "(requestInfo.appAccountToken \(request.appAccountToken ?? "absent"))")
        }
        return try commerceStandingRefusal(request, product: product, uid: uid, app: app)
    }

    /// Why `request` cannot buy `product` whoever pays: the operation is not the product's kind,
    /// or an item's offer is not in the subscription's period.
    static func commerceProductRefusal(_ request: AdvancedCommerceRequest, product: CatalogProduct) -> Outcome? {
        switch request.operation {
        case .oneTimeCharge where product.kind != .consumable && product.kind != .nonConsumable:
            return .storeKit(.paymentInvalid, "\(product.id) is not a one-time purchase: a CREATE_ONE_TIME_CHARGE request buys a "
                             + "consumable or non-consumable generic SKU")
        case .subscription where product.kind != .autoRenewable:
            return .storeKit(.paymentInvalid, "\(product.id) is not an auto-renewable subscription: a CREATE_SUBSCRIPTION request buys one")
        default: break
        }
        // Apple does not say how an offer shorter or longer than the subscription's period is billed;
        // billing it in whole periods would charge the offer's price for longer (or the item's
        // price sooner) than the offer says, so such an offer is refused.
        if let period = request.period,
           let (index, item) = request.items.enumerated().first(where: { $0.element.offer.map { $0.period != period.description } ?? false }) {
            return .storeKit(.paymentInvalid, "items[\(index)].offer.period \(item.offer?.period ?? "") is not the subscription's period "
                             + "\(period): an item's offer here lasts whole periods of the subscription")
        }
        return nil
    }

    /// Why `request` cannot buy `product` for `uid` in the store as it stands: checked when the
    /// payment is made and again when a parent approves it (the storefront may have changed, or the
    /// buyer subscribed in the group meanwhile).
    func commerceStandingRefusal(_ request: AdvancedCommerceRequest, product: CatalogProduct, uid: UInt32,
                                 app: String) throws(LedgerError) -> Outcome? {
        if let refusal = Self.commerceProductRefusal(request, product: product) { return refusal }
        guard request.currency == currencyCode else {
            return .storeKit(.paymentInvalid, "the request is priced in \(request.currency); storefront \(storefront) sells in \(currencyCode)")
        }
        if let front = request.storefront, front != storefront {
            return .storeKit(.paymentInvalid, "the request is for storefront \(front); the store's is \(storefront)")
        }
        if request.operation == .subscription,
           let current = try store.subscription(uid: uid, app: app, groupID: product.subscriptionGroupID ?? product.id), current.status.isLive {
            return .storeKit(.paymentInvalid, "uid \(uid) is subscribed in group \(current.groupID) already: a CREATE_SUBSCRIPTION "
                             + "request starts a subscription (changing one is a modify request, which this store does not take)")
        }
        return nil
    }

    /// Whether `record` was bought (or asked for) with an Advanced Commerce request.
    func hasCommerce(_ record: TransactionRecord) throws(LedgerError) -> Bool {
        try advancedCommerce(of: record.id, app: record.app) != nil
    }

    /// Why the request a deferred purchase was asked with cannot buy now that a parent approves it.
    func approvalCommerceRefusal(_ record: TransactionRecord) throws(LedgerError) -> Outcome? {
        guard let request = try advancedCommerce(of: record.id, app: record.app)?.request,
              let product = catalogs[record.app]?.product(record.productID) else { return nil }
        return try commerceStandingRefusal(request, product: product, uid: record.uid, app: record.app)
    }

    /// Notes that `request` was used by `uid` for `transactionID` (see `reusedCommerce`).
    func recordCommerceReference(_ request: AdvancedCommerceRequest, uid: UInt32, app: String, transactionID: UInt64) throws(LedgerError) {
        try store.setSetting(Self.commerceReferenceKey(app: app, request.requestReferenceID), "\(uid)\t\(transactionID)")
    }

    /// The reference settings of the requests `records` were bought with, those that name them (a
    /// renewal's request names its subscription's first purchase): they go with the transaction.
    func commerceReferenceKeys(of records: [TransactionRecord]) throws(LedgerError) -> [String] {
        var keys: [String] = []
        for record in records {
            guard let request = try advancedCommerce(of: record.id, app: record.app)?.request else { continue }
            let key = Self.commerceReferenceKey(app: record.app, request.requestReferenceID)
            if try store.setting(key) == "\(record.uid)\t\(record.id)" { keys.append(key) }
        }
        return keys
    }

    /// Forgets the request of a waiting purchase that failed (declined, or lapsed unanswered).
    /// Nothing was charged, so its request may be used again.
    func dropCommerce(of record: TransactionRecord) throws(LedgerError) {
        guard try mayHaveCommerce(app: record.app) else { return }
        try forgetSettings(try commerceReferenceKeys(of: [record]) + [Self.commerceKey(record.id)])
    }

    /// Gives the request an interrupted purchase was asked with to the purchase that resolves it
    /// (which is priced, and a subscription's period set, by it), the reference note with it.
    func moveCommerce(of record: TransactionRecord, to purchaseID: UInt64) throws(LedgerError) {
        guard let commerce = try advancedCommerce(of: record.id, app: record.app) else { return }
        let references = try commerceReferenceKeys(of: [record])
        try forgetSettings([Self.commerceKey(record.id)])
        try recordCommerce(commerce.request, period: commerce.period, of: purchaseID, app: record.app)
        if !references.isEmpty {
            try recordCommerceReference(commerce.request, uid: record.uid, app: record.app, transactionID: purchaseID)
        }
    }

    /// The Advanced Commerce terms a signed transaction tells: a purchase's or renewal's own, a
    /// restored copy's original's.
    func signedCommerce(of record: TransactionRecord) throws(LedgerError) -> KeptCommerce? {
        if let own = try advancedCommerce(of: record.id, app: record.app) { return own }
        guard record.state == .restored, let originalID = record.originalID, originalID != record.id else { return nil }
        return try advancedCommerce(of: originalID, app: record.app)
    }

    /// The `advancedCommerceInfo` of a subscription's renewal info: what its next renewal sells,
    /// when it was bought with an Advanced Commerce request (nil otherwise).
    public func renewalCommerceInfo(of subscription: Subscription) throws(LedgerError) -> JSONValue? {
        try runningCommerce(of: subscription.originalID, app: subscription.app).map { $0.request.renewalInfo(period: $0.period + 1) }
    }
}
