import StoreKitLedger
import StoreKitWire

// Purchases that wait for someone else: Ask to Buy requests (a `deferred` transaction until a
// parent approves → `purchased`, declines → `failed`, or lets it lapse after a day → `failed`) and
// interrupted purchases (a `failed` transaction; `resolve` makes a new `purchased` one linked to it).
// `resolve` also recovers a subscription from a billing issue.

extension PaymentQueueEngine {
    /// Approves an Ask to Buy request: the deferred transaction becomes `purchased`.
    public func approve(transactionID: UInt64) throws(LedgerError) -> Outcome {
        synchronize()
        switch try openAskToBuy(transactionID) {
        case .refused(let outcome): return outcome
        case .open(var record):
            _ = try store.removePurchaseRequest(transactionID: record.id)
            scheduleChanged()
            let now = clock.now()
            record.state = .purchased
            record.date = now
            if let refusal = try approvalCommerceRefusal(record) {
                // Approved, but the request cannot buy now: it fails, and nothing is charged.
                return .ok(value: record.id, try fail(record, code: .paymentInvalid, message: refusal.message, at: now))
            }
            var startsPeriod = true
            if let catalog = catalogs[record.app], let product = catalog.product(record.productID), product.kind == .autoRenewable {
                let plan: BillingPlan?
                switch try takeWaitingPlan(of: record.id, product: product) {
                case .success(let found): plan = found
                case .failure(let refusal):
                    // Approved, but the plan it asked for is gone: it fails, as StoreKit fails it.
                    return .ok(value: record.id, try fail(record, code: .storeProductNotAvailable, message: refusal.outcome.message, at: now))
                }
                let asked = try takeWaitingOffer(of: record.id, product: product.billed(with: plan))
                startsPeriod = try applySubscriptionPurchase(&record, product: product, catalog: catalog, at: now, promotion: asked.promotion,
                                                             promotionKind: asked.kind, introductoryOfferAllowed: asked.introductoryOfferAllowed,
                                                             plan: plan)
            }
            record.sequence = try store.nextSequence(uid: record.uid, app: record.app)
            guard try store.transition(id: record.id, from: .deferred, to: .purchased, sequence: record.sequence, date: now,
                                       errorCode: nil, errorMessage: nil, expiresDate: record.expiresDate,
                                       originalID: record.originalID) else {
                return .refused(.invalidArgument, "transaction \(record.id) is no longer deferred")
            }
            return .ok(value: record.id, [.updated(QueueKey(uid: record.uid, app: record.app), [record])]
                       + (try shareWithFamily(record, startsPeriod: startsPeriod)))
        }
    }

    /// Declines an Ask to Buy request: the deferred transaction fails (`paymentCancelled`).
    public func decline(transactionID: UInt64) throws(LedgerError) -> Outcome {
        synchronize()
        switch try openAskToBuy(transactionID) {
        case .refused(let outcome): return outcome
        case .open(let record):
            _ = try store.removePurchaseRequest(transactionID: record.id)
            scheduleChanged()
            let effects = try fail(record, code: .paymentCancelled, message: "The Ask to Buy request was declined", at: clock.now())
            return .ok(value: record.id, effects)
        }
    }

    enum OpenRequest {
        case open(TransactionRecord)
        case refused(Outcome)
    }

    private func openAskToBuy(_ transactionID: UInt64) throws(LedgerError) -> OpenRequest {
        guard let record = try store.transaction(id: transactionID) else {
            return .refused(.refused(.transactionNotFound, "transaction \(transactionID) does not exist"))
        }
        guard record.state == .deferred, !record.finished,
              let request = try store.purchaseRequest(transactionID: transactionID), request.kind == .askToBuy else {
            return .refused(.refused(.invalidArgument,
                                     "transaction \(transactionID) is not an Ask to Buy request waiting for an answer (it is \(record.state))"))
        }
        return .open(record)
    }

    /// An Ask to Buy request nobody answered in time: its transaction fails.
    func lapse(_ request: PurchaseRequest, at time: Int64) throws(LedgerError) -> [Effect] {
        _ = try store.removePurchaseRequest(transactionID: request.transactionID)
        scheduleChanged()
        guard let record = try store.transaction(id: request.transactionID), record.state == .deferred, !record.finished else {
            return []
        }
        return try fail(record, code: .paymentCancelled, message: "The Ask to Buy request expired unanswered", at: time)
    }

    private func fail(_ record: TransactionRecord, code: StoreKitErrorCode, message: String, at time: Int64) throws(LedgerError) -> [Effect] {
        try dropWaitingOffer(of: record.id)
        if try store.setting(Self.waitingPlanKey(record.id)) != nil { try store.setSetting(Self.waitingPlanKey(record.id), nil) }
        try dropCommerce(of: record)
        var failed = record
        failed.state = .failed
        failed.date = time
        failed.errorCode = code.rawValue
        failed.errorMessage = message
        failed.sequence = try store.nextSequence(uid: record.uid, app: record.app)
        guard try store.transition(id: record.id, from: .deferred, to: .failed, sequence: failed.sequence, date: time,
                                   errorCode: failed.errorCode, errorMessage: message, expiresDate: nil,
                                   originalID: nil) else { return [] }
        return [.updated(QueueKey(uid: record.uid, app: record.app), [failed])]
    }

    /// Resolves the issue of a transaction (`SKTestSession.resolveIssueForTransaction`): an
    /// interrupted purchase completes as a new `purchased` transaction whose original is the failed
    /// one; a subscription in billing retry or grace period renews. Value: the new transaction's id.
    public func resolve(transactionID: UInt64) throws(LedgerError) -> Outcome {
        synchronize()
        guard let record = try store.transaction(id: transactionID) else {
            return .refused(.transactionNotFound, "transaction \(transactionID) does not exist")
        }
        if let request = try store.purchaseRequest(transactionID: transactionID), request.kind == .interrupted {
            _ = try store.removePurchaseRequest(transactionID: transactionID)
            let now = clock.now()
            var purchase = TransactionRecord(
                id: try store.allocateTransactionID(), originalID: record.id, uid: record.uid, app: record.app,
                productID: record.productID, quantity: record.quantity, state: .purchased,
                sequence: 0, date: now, applicationUsername: record.applicationUsername)
            var startsPeriod = true
            if let catalog = catalogs[record.app], let product = catalog.product(record.productID), product.kind == .autoRenewable {
                let plan: BillingPlan?
                switch try takeWaitingPlan(of: record.id, product: product) {
                case .success(let found): plan = found
                case .failure(let refusal):
                    // The plan it was asked with is gone: no purchase, the transaction stays failed.
                    try dropWaitingOffer(of: record.id)
                    return refusal.outcome
                }
                try moveCommerce(of: record, to: purchase.id)
                let asked = try takeWaitingOffer(of: record.id, product: product.billed(with: plan))
                startsPeriod = try applySubscriptionPurchase(&purchase, product: product, catalog: catalog, at: now, promotion: asked.promotion,
                                                             promotionKind: asked.kind, introductoryOfferAllowed: asked.introductoryOfferAllowed,
                                                             plan: plan)
            } else {
                try moveCommerce(of: record, to: purchase.id)
            }
            purchase.sequence = try store.nextSequence(uid: record.uid, app: record.app)
            try store.insert(purchase)
            return .ok(value: purchase.id, [.updated(QueueKey(uid: record.uid, app: record.app), [purchase])]
                       + (try shareWithFamily(purchase, startsPeriod: startsPeriod)))
        }
        if case .found(let subscription) = try locate(.transaction(transactionID)),
           subscription.status == .billingRetry || subscription.status == .gracePeriod {
            return try recover(subscription)
        }
        return .refused(.invalidArgument,
                        "transaction \(transactionID) has no issue to resolve (it is neither an interrupted purchase "
                        + "nor a subscription in billing retry)")
    }

    /// The app chose not to continue a deferred purchase after the storefront changed
    /// (`paymentQueue(_:shouldContinue:in:)` answered false, or not in time): it fails with
    /// `storeProductNotAvailable`, as StoreKit fails it. Only the buyer's own queue may do this.
    public func cancelDeferred(uid: UInt32, app: String, transactionID: UInt64) throws(LedgerError) -> Outcome {
        synchronize()
        guard let record = try store.transaction(id: transactionID), record.uid == uid, record.app == app else {
            return .refused(.transactionNotFound, "transaction \(transactionID) is not in this queue")
        }
        guard record.state == .deferred, !record.finished else {
            return .refused(.notFinishable, "transaction \(transactionID) is \(record.state), not deferred")
        }
        _ = try store.removePurchaseRequest(transactionID: transactionID)
        scheduleChanged()
        let effects = try fail(record, code: .storeProductNotAvailable,
                               message: "The storefront changed and the app did not continue the purchase", at: clock.now())
        return .ok(value: transactionID, effects)
    }

    /// Open Ask to Buy requests and unresolved interrupted purchases, filtered by uid and app.
    public func purchaseRequests(uid: UInt32?, app: String?) throws(LedgerError) -> [PurchaseRequest] {
        try store.purchaseRequests(uid: uid, app: app)
    }
}
