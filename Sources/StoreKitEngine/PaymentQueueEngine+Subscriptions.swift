import StoreKitLedger
import StoreKitWire

// Auto-renewable subscriptions on the store clock.
//
// A buyer holds at most one subscription per group: one `subscriptions` row, found by
// (uid, app, group). Buying in a group starts the row (or resubscribes it, keeping its original
// transaction id), upgrades it at once, or schedules a downgrade for the next renewal. When `due`
// comes the row renews (a new `purchased` transaction linked to the original, dated at the renewal
// time even when fired late), expires (auto-renew off), or enters billing retry / grace period
// (billing issue switch). Every length comes from the clock's `TimeRate`.

typealias StoreSubscription = Subscription

/// How control commands name a subscription: by one of its transactions, or by product and buyer.
public enum SubscriptionSelector: Sendable, Equatable {
    case transaction(UInt64)
    case product(uid: UInt32, app: String, productID: String)
}

extension PaymentQueueEngine {
    static let defaultPeriod = SubscriptionPeriod(value: 1, unit: .month)

    // MARK: Purchases

    /// Applies a `purchased` transaction of an auto-renewable product to the buyer's subscription
    /// in its group; sets the record's `expiresDate` (and `originalID` for a chain that exists).
    /// A `promotion` (a promotional offer the payment carried, checked) sets the length of a
    /// period that starts now: a free trial or a pay-up-front offer lasts its periods; pay as you
    /// go keeps the product's period (its periods are the product's, at another price, and the
    /// store keeps no prices). An offer bought while subscribed to the same product changes no
    /// period of it here.
    /// Whether the purchase starts a period now (a new subscription or run, an upgrade): not a
    /// purchase of the running product again, nor a downgrade that waits for the renewal.
    /// `plan`: a monthly billing plan (nil: up front): the period that starts now is its first
    /// billing period, priced and as long as the plan's, with the plan's offers.
    @discardableResult
    func applySubscriptionPurchase(
        _ record: inout TransactionRecord, product catalogProduct: CatalogProduct, catalog: Catalog, at now: Int64,
        promotion: SubscriptionOffer? = nil, promotionKind: TransactionOffer.Kind = .promotional, introductoryOfferAllowed: Bool? = nil,
        plan: BillingPlan? = nil
    ) throws(LedgerError) -> Bool {
        let product = catalogProduct.billed(with: plan)
        let groupID = product.subscriptionGroupID ?? product.id
        // An Advanced Commerce purchase's period is its request's.
        let commerce = try advancedCommerce(of: record.id, app: record.app)
        let period = commerce?.request.period ?? product.subscriptionPeriod ?? Self.defaultPeriod
        let existing = try store.subscription(uid: record.uid, app: record.app, groupID: groupID)
        if var current = existing, current.status.isLive {
            if record.originalID == nil { record.originalID = current.originalID }
            current.autoRenew = true
            var startsPeriod = false
            if current.productID == product.id {
                // Already subscribed: nothing changes but the wish to renew, and any pending downgrade is dropped.
                // Buying it again after declining a price increase agrees to it.
                if try priceIncrease(of: current.originalID) == .declined { try setPriceIncrease(.agreed, of: current.originalID) }
                current.nextProductID = nil
                try setNextPlan(nil, of: current.originalID)
                current.lastTransactionID = record.id
                record.expiresDate = current.expiresDate
                // The period goes on as it was billed: in a commitment, this is its billing period too.
                if let running = try runningCommitment(of: current.originalID) {
                    try store.setSetting(Self.commitmentKey(record.id), running.stored)
                }
                // An offer bought while subscribed to the product starts with the next period.
                if let promotion, let id = promotion.id {
                    try store.setSetting(Self.nextOfferKey(current.originalID), "\(promotionKind.rawValue)\t\(id)\t\(current.periodStart)")
                }
            } else if Self.switchesImmediately(from: catalog.product(current.productID), to: catalogProduct) {
                // Upgrade, or crossgrade to the same period: the new subscription starts now, at
                // its own price (a price increase of the product left is over).
                try setPriceIncrease(nil, of: current.originalID)
                try setRunningCommerce(nil, of: current.originalID, app: record.app)
                let end = promotion.flatMap { offerEnd($0, from: now) } ?? clock.rate.end(of: period, from: now)
                current.productID = product.id
                current.quantity = record.quantity
                current.status = .active
                current.periodStart = now
                current.expiresDate = end
                current.due = end
                current.nextProductID = nil
                try setNextPlan(nil, of: current.originalID)
                current.offerPeriodsLeft = Self.promotionalPeriodsLeft(promotion)
                try setRunningOffer(promotion.flatMap { current.offerPeriodsLeft > 0 ? TransactionOffer($0, kind: promotionKind) : nil },
                                    of: current.originalID)
                current.gracePeriodEnd = nil
                current.billingRetryEnd = nil
                current.lastTransactionID = record.id
                record.expiresDate = end
                startsPeriod = true
                if let promotion { try recordOffer(promotion, type: promotionKind, of: record.id) }
                try continueCommitment(nil, plan: plan, originalID: current.originalID, transactionID: record.id, start: now, periodEnd: end)
            } else {
                // Downgrade, or crossgrade to another period: takes effect at the next renewal (in
                // a commitment, the renewal after its end), billed with the plan it was bought with.
                current.nextProductID = product.id
                try setNextPlan(plan, of: current.originalID)
                let start = try runningCommitment(of: current.originalID).flatMap { $0.continues ? $0.expires : nil } ?? current.expiresDate
                record.expiresDate = clock.rate.end(of: period, from: start)
            }
            try saveSubscription(current)
            return startsPeriod
        }
        // A new subscription, or a resubscription in a group the buyer had before (same original).
        let originalID = existing?.originalID ?? record.id
        if record.originalID == nil, originalID != record.id { record.originalID = originalID }
        var end = promotion.flatMap { offerEnd($0, from: now) } ?? clock.rate.end(of: period, from: now)
        var offerPeriodsLeft = Self.promotionalPeriodsLeft(promotion)
        if promotion != nil, promotionKind == .winBack { try recordWinBack(of: originalID) }
        // An offer bought for the next period of an earlier run is not this run's.
        if existing != nil, try store.setting(Self.nextOfferKey(originalID)) != nil { try store.setSetting(Self.nextOfferKey(originalID), nil) }
        try setRunningOffer(promotion.flatMap { offerPeriodsLeft > 0 ? TransactionOffer($0, kind: promotionKind) : nil }, of: originalID)
        if let promotion { try recordOffer(promotion, type: promotionKind, of: record.id) }
        // An Advanced Commerce subscription renews with its request (an ordinary one with none).
        try setRunningCommerce(commerce, of: originalID, app: record.app)
        // Introductory offers: once per group, for a buyer who never subscribed in it, unless the
        // app's server said otherwise (a signed eligibility, either way); an Advanced Commerce
        // request sets its own offers.
        if introductoryOfferAllowed ?? (existing == nil), promotion == nil, commerce == nil, let offer = product.introductoryOffer,
           let offerPeriod = offer.period {
            try recordOffer(offer, type: .introductory, of: record.id)
            if offer.paymentMode == SubscriptionOffer.payAsYouGo {
                end = clock.rate.end(of: offerPeriod, from: now)
                offerPeriodsLeft = max(offer.periodCount - 1, 0)
            } else {
                end = clock.rate.end(of: offerPeriod, times: offer.periodCount, from: now)
            }
        }
        record.expiresDate = end
        try continueCommitment(nil, plan: plan, originalID: originalID, transactionID: record.id, start: now, periodEnd: end)
        // A new run of the subscription starts at today's price: no increase of an earlier run waits.
        if existing != nil {
            try setPriceIncrease(nil, of: originalID)
            try setNextPlan(nil, of: originalID)
        }
        try saveSubscription(StoreSubscription(
            originalID: originalID, uid: record.uid, app: record.app, groupID: groupID, productID: product.id,
            quantity: record.quantity, applicationUsername: record.applicationUsername, status: .active,
            periodStart: now, expiresDate: end, autoRenew: true, offerPeriodsLeft: offerPeriodsLeft, due: end,
            lastTransactionID: record.id, renewals: existing?.renewals ?? 0))
        return true
    }

    static func nextOfferKey(_ originalID: UInt64) -> String { "offer.next.\(originalID)" }
    static func runningOfferKey(_ originalID: UInt64) -> String { "offer.running.\(originalID)" }

    /// The promotional or win-back offer whose periods a subscription is in, if any.
    func runningOffer(of originalID: UInt64) throws(LedgerError) -> TransactionOffer? {
        try store.setting(Self.runningOfferKey(originalID)).flatMap(TransactionOffer.init(stored:))
    }

    func setRunningOffer(_ offer: TransactionOffer?, of originalID: UInt64) throws(LedgerError) {
        if offer == nil, try store.setting(Self.runningOfferKey(originalID)) == nil { return }
        try store.setSetting(Self.runningOfferKey(originalID), offer?.stored)
    }

    /// The offer a subscriber bought for the next period while subscribed to the product (taken:
    /// the renewal that starts it forgets it); nil when there is none, when it was bought in
    /// another period than the one ending (the subscription lapsed or was refunded since, and a
    /// later run does not inherit it), or when the catalogue no longer has it.
    func nextOffer(of subscription: Subscription, product: CatalogProduct) throws(LedgerError) -> (offer: SubscriptionOffer, kind: TransactionOffer.Kind)? {
        guard let text = try store.setting(Self.nextOfferKey(subscription.originalID)) else { return nil }
        try store.setSetting(Self.nextOfferKey(subscription.originalID), nil)
        let parts = text.split(separator: "\t").map(String.init)
        guard parts.count == 3, let number = Int(parts[0]), let kind = TransactionOffer.Kind(rawValue: number),
              Int64(parts[2]) == subscription.periodStart else { return nil }
        let offers = kind == .winBack ? product.winBackOffers.map(\.offer) : product.promotionalOffers
        return offers.first { $0.id == parts[1] }.map { ($0, kind) }
    }

    /// The periods after the first that a promotional offer still gives (pay as you go: its count
    /// less one; others are one period of their own length).
    static func promotionalPeriodsLeft(_ promotion: SubscriptionOffer?) -> Int {
        guard let promotion, promotion.paymentMode == SubscriptionOffer.payAsYouGo else { return 0 }
        return max(promotion.periodCount - 1, 0)
    }

    /// The end of a period that starts at `start` with a promotional offer: its periods for a free
    /// trial or a pay-up-front offer; nil (the product's period) for pay as you go.
    func offerEnd(_ offer: SubscriptionOffer, from start: Int64) -> Int64? {
        guard offer.paymentMode != SubscriptionOffer.payAsYouGo, let offerPeriod = offer.period else { return nil }
        return clock.rate.end(of: offerPeriod, times: offer.periodCount, from: start)
    }

    /// Upgrades (a higher level: a smaller `groupNumber`) and crossgrades of the same period switch
    /// at once; downgrades and crossgrades to another period wait for the renewal (App Store rules).
    static func switchesImmediately(from old: CatalogProduct?, to new: CatalogProduct) -> Bool {
        guard let old else { return true }
        let oldLevel = old.groupLevel ?? Int.max
        let newLevel = new.groupLevel ?? Int.max
        if newLevel != oldLevel { return newLevel < oldLevel }
        return old.subscriptionPeriod == new.subscriptionPeriod
    }

    /// Whether `uid` may still use the group's introductory offer: never subscribed in the group.
    public func isEligibleForIntroductoryOffer(uid: UInt32, app: String, groupID: String) throws(LedgerError) -> Bool {
        try store.subscription(uid: uid, app: app, groupID: groupID) == nil
    }

    func saveSubscription(_ subscription: StoreSubscription) throws(LedgerError) {
        try store.upsert(subscription)
        scheduleChanged()
    }

    // MARK: Scheduled events

    /// One due event of a subscription: renewal, expiry, end of grace period, end of billing retry.
    func fire(_ subscription: StoreSubscription, now: Int64) throws(LedgerError) -> [Effect] {
        var subscription = subscription
        switch subscription.status {
        case .active:
            // A commitment's next billing period comes at its locked price: a price increase
            // waits, answered or not, for the renewal into a new commitment.
            let committed = try commitmentContinues(subscription)
            if !committed, subscription.autoRenew, try !priceIncreaseAllowsRenewal(&subscription) {
                subscription.status = .expired
                subscription.due = nil
                try saveSubscription(subscription)
                return []
            }
            // Auto-renew off ends a subscription at the end of its period, or of its commitment.
            guard subscription.autoRenew || committed else {
                subscription.status = .expired
                subscription.due = nil
                // Turned off by the subscriber (not a declined increase): no increase waits any more.
                if try priceIncrease(of: subscription.originalID) == .pending { try setPriceIncrease(nil, of: subscription.originalID) }
                try saveSubscription(subscription)
                return []
            }
            if billingIssueEnabled(app: subscription.app) {
                let period = catalogs[subscription.app]?.product(subscription.productID)?.subscriptionPeriod ?? Self.defaultPeriod
                let retryEnd = subscription.expiresDate + clock.rate.billingRetryPeriod(for: period)
                subscription.billingRetryEnd = retryEnd
                if gracePeriodEnabled(app: subscription.app) {
                    let graceEnd = min(subscription.expiresDate + clock.rate.gracePeriod(for: period), retryEnd)
                    subscription.status = .gracePeriod
                    subscription.gracePeriodEnd = graceEnd
                    subscription.due = graceEnd
                } else {
                    subscription.status = .billingRetry
                    subscription.due = retryEnd
                }
                try saveSubscription(subscription)
                return []
            }
            return try renew(&subscription, at: subscription.expiresDate)
        case .gracePeriod:
            if let retryEnd = subscription.billingRetryEnd, retryEnd > (subscription.due ?? now) {
                subscription.status = .billingRetry
                subscription.due = retryEnd
            } else {
                subscription.status = .expired
                subscription.due = nil
            }
            try saveSubscription(subscription)
            return []
        case .billingRetry, .expired, .revoked:
            if subscription.status == .billingRetry { subscription.status = .expired }
            subscription.due = nil
            try saveSubscription(subscription)
            return []
        }
    }

    func billingIssueEnabled(app: String) -> Bool {
        switches.billingIssue ?? catalogs[app]?.settings.renewalBillingIssuesEnabled ?? false
    }

    func gracePeriodEnabled(app: String) -> Bool {
        switches.billingGracePeriod ?? catalogs[app]?.settings.billingGracePeriodEnabled ?? false
    }

    /// Starts the next period at `start`: a new `purchased` transaction linked to the original
    /// (for the pending downgrade's product, if any). A product gone from the catalogue expires.
    /// A live subscription in a commitment renews its product, billed monthly, until the
    /// commitment ends (a downgrade waits for that); then a new commitment starts while the
    /// product has the plan.
    func renew(_ subscription: inout StoreSubscription, at start: Int64) throws(LedgerError) -> [Effect] {
        // An expired subscription renewed (`storekitctl renew`) starts again up front, as a purchase does.
        let running = subscription.status.isLive ? try runningCommitment(of: subscription.originalID) : nil
        let committed = running?.continues ?? false
        let productID = committed ? subscription.productID : subscription.nextProductID ?? subscription.productID
        // A commitment's billing periods are billed at its own price even if the catalogue lost
        // the plan; a downgrade bought monthly renews monthly.
        let found = catalogs[subscription.app]?.product(productID)
        let planned = try renewalPlan(of: subscription, running: running, product: found)
        guard let catalogProduct = found, catalogProduct.kind == .autoRenewable, planned != .some(nil) else {
            subscription.status = .expired
            subscription.due = nil
            try saveSubscription(subscription)
            return []
        }
        let plan = planned ?? nil
        if !committed { try setNextPlan(nil, of: subscription.originalID) }
        let product = catalogProduct.billed(with: plan)
        var period = product.subscriptionPeriod ?? Self.defaultPeriod
        // An Advanced Commerce subscription renews in its request's period, into its next one.
        let commerce = productID == subscription.productID
            ? try runningCommerce(of: subscription.originalID, app: subscription.app).map { (request: $0.request, period: $0.period + 1, source: $0.source) } : nil
        if let requested = commerce?.request.period { period = requested }
        // A pay-as-you-go offer goes on for its periods: each renewal is at its price (a
        // promotional one in the product's period, an introductory one in its own).
        var carried: TransactionOffer?
        var offerEnd: Int64?
        if productID == subscription.productID, let next = try nextOffer(of: subscription, product: product) {
            // An offer bought during the last period: this one starts it.
            carried = TransactionOffer(next.offer, kind: next.kind)
            offerEnd = self.offerEnd(next.offer, from: start)
            subscription.offerPeriodsLeft = Self.promotionalPeriodsLeft(next.offer)
        } else if subscription.offerPeriodsLeft > 0, productID == subscription.productID {
            if let last = try runningOffer(of: subscription.originalID) {
                carried = last
                subscription.offerPeriodsLeft -= 1
            } else if let offer = product.introductoryOffer, let offerPeriod = offer.period {
                period = offerPeriod
                carried = TransactionOffer(offer, kind: .introductory)
                subscription.offerPeriodsLeft -= 1
            } else {
                subscription.offerPeriodsLeft = 0
            }
        } else {
            subscription.offerPeriodsLeft = 0
        }
        let end = offerEnd ?? clock.rate.end(of: period, from: start)
        let record = TransactionRecord(
            id: try store.allocateTransactionID(), originalID: subscription.originalID, uid: subscription.uid,
            app: subscription.app, productID: productID, quantity: subscription.quantity, state: .purchased,
            sequence: try store.nextSequence(uid: subscription.uid, app: subscription.app), date: start,
            applicationUsername: subscription.applicationUsername, expiresDate: end)
        try store.insert(record)
        try store.markRenewal(transactionID: record.id)
        if let carried { try store.setSetting(Self.offerKey(record.id), carried.stored) }
        try continueCommitment(running, plan: plan, originalID: subscription.originalID, transactionID: record.id, start: start,
                               periodEnd: end)
        if let commerce { try recordCommerce(commerce, of: record.id) }
        try setRunningCommerce(commerce, of: subscription.originalID, app: subscription.app)
        // A promotional or win-back offer still running is kept with the subscription (a purchase
        // of the same product meanwhile does not end it); it goes with its last period.
        try setRunningOffer(carried?.kind != .introductory && subscription.offerPeriodsLeft > 0 ? carried : nil,
                            of: subscription.originalID)
        // A period at the new price starts: a price increase (agreed, or forced with `renew`) is
        // done; within a commitment the price is the commitment's, and the increase still waits.
        if !committed { try setPriceIncrease(nil, of: subscription.originalID) }
        subscription.productID = productID
        if !committed { subscription.nextProductID = nil }
        subscription.status = .active
        subscription.periodStart = start
        subscription.expiresDate = end
        subscription.due = end
        subscription.gracePeriodEnd = nil
        subscription.billingRetryEnd = nil
        subscription.lastTransactionID = record.id
        subscription.renewals += 1
        try saveSubscription(subscription)
        return [.updated(QueueKey(uid: subscription.uid, app: subscription.app), [record])] + (try shareWithFamily(record))
    }

    // MARK: Control (storekitctl expire, renew, auto-renew)

    enum Located {
        case found(StoreSubscription)
        case refused(Outcome)
    }

    /// The subscription a control command names, or the refusal that says why there is none.
    func locate(_ selector: SubscriptionSelector) throws(LedgerError) -> Located {
        switch selector {
        case .transaction(let id):
            guard let record = try store.transaction(id: id) else {
                return .refused(.refused(.transactionNotFound, "transaction \(id) does not exist"))
            }
            guard let product = catalogs[record.app]?.product(record.productID), product.kind == .autoRenewable else {
                return .refused(.refused(.invalidArgument,
                                         "transaction \(id) (\(record.productID)) is not an auto-renewable subscription"))
            }
            guard let subscription = try store.subscription(
                uid: record.uid, app: record.app, groupID: product.subscriptionGroupID ?? product.id) else {
                return .refused(.refused(.invalidArgument, "transaction \(id) belongs to no subscription"))
            }
            return .found(subscription)
        case .product(let uid, let app, let productID):
            guard let catalog = catalogs[app] else { return .refused(.refused(.unknownApp, "app \(app) is not registered")) }
            guard let product = catalog.product(productID) else {
                return .refused(.refused(.invalidArgument, "product \(productID) is not in the catalogue of \(app)"))
            }
            guard product.kind == .autoRenewable else {
                return .refused(.refused(.invalidArgument, "product \(productID) is not an auto-renewable subscription"))
            }
            let groupID = product.subscriptionGroupID ?? product.id
            guard let subscription = try store.subscription(uid: uid, app: app, groupID: groupID),
                  subscription.productID == productID || subscription.nextProductID == productID else {
                return .refused(.refused(.invalidArgument, "uid \(uid) has no subscription to \(productID) in \(app)"))
            }
            return .found(subscription)
        }
    }

    /// `SKTestSession.expireSubscription`: the subscription ends now, and will not renew. Value:
    /// its original id.
    ///
    /// Auto-renew goes off with it, so the renewal info says what the subscription object says
    /// (`autoRenewStatus` 0, `expirationIntent` 1, as the App Store reports a subscription that
    /// ends without renewing). Its `expiresDate` stays that of its latest transaction, which is
    /// not changed: Apple's status gives no expiry date but the transaction's, and two dates for
    /// one period would disagree.
    public func expire(_ selector: SubscriptionSelector) throws(LedgerError) -> Outcome {
        synchronize()
        guard case .found(var subscription) = try locate(selector) else { return try refusal(selector) }
        guard subscription.status.isLive else {
            return .refused(.invalidArgument, "the subscription to \(subscription.productID) is already \(subscription.status.name)")
        }
        subscription.status = .expired
        subscription.autoRenew = false
        subscription.due = nil
        subscription.gracePeriodEnd = nil
        subscription.billingRetryEnd = nil
        try saveSubscription(subscription)
        return .ok(value: subscription.originalID)
    }

    /// `SKTestSession.forceRenewalOfSubscription`: the current period ends and the next starts now.
    /// Value: the new transaction's id.
    public func forceRenewal(_ selector: SubscriptionSelector) throws(LedgerError) -> Outcome {
        synchronize()
        guard case .found(var subscription) = try locate(selector) else { return try refusal(selector) }
        guard subscription.status != .revoked else {
            return .refused(.invalidArgument, "the subscription to \(subscription.productID) was refunded; buy it again")
        }
        // Renewing an expired subscription subscribes again, with auto-renew on, as buying does.
        if !subscription.status.isLive { subscription.autoRenew = true }
        let effects = try renew(&subscription, at: clock.now())
        guard subscription.status == .active else {
            return .refused(.invalidArgument, "\(subscription.productID) is no longer in the catalogue")
        }
        return .ok(value: subscription.lastTransactionID, effects)
    }

    /// Turns auto-renew on or off (`SKTestSession.disableAutoRenewForTransaction`). Value: the original id.
    public func setAutoRenew(_ on: Bool, _ selector: SubscriptionSelector) throws(LedgerError) -> Outcome {
        synchronize()
        guard case .found(var subscription) = try locate(selector) else { return try refusal(selector) }
        guard subscription.status.isLive else {
            return .refused(.invalidArgument, "the subscription to \(subscription.productID) is \(subscription.status.name)")
        }
        subscription.autoRenew = on
        // Turning auto-renew back on after declining a price increase renews at the new price.
        if on, try priceIncrease(of: subscription.originalID) == .declined { try setPriceIncrease(.agreed, of: subscription.originalID) }
        try saveSubscription(subscription)
        return .ok(value: subscription.originalID)
    }

    /// Recovers from a billing issue (`SKTestSession.resolveIssueForTransaction`): renews now, or at
    /// the original renewal date when still in the grace period.
    func recover(_ subscription: StoreSubscription) throws(LedgerError) -> Outcome {
        var subscription = subscription
        let start = subscription.status == .gracePeriod ? subscription.expiresDate : clock.now()
        let effects = try renew(&subscription, at: start)
        return .ok(value: subscription.lastTransactionID, effects)
    }

    func refusal(_ selector: SubscriptionSelector) throws(LedgerError) -> Outcome {
        if case .refused(let outcome) = try locate(selector) { return outcome }
        return .refused(.invalidArgument, "no such subscription")
    }

    /// The buyers' subscriptions, filtered by uid and app.
    public func subscriptions(uid: UInt32?, app: String?) throws(LedgerError) -> [Subscription] {
        try store.subscriptions(uid: uid, app: app)
    }
}
