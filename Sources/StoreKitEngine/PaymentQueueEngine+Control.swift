import StoreKitLedger
import StoreKitWire

// What `storekitctl` can do besides buying (SKTestSession parity): refunds, the test switches,
// the storefront, promoted purchases, the clock, and the read-outs (entitlements, history), clear.

extension PaymentQueueEngine {
    // MARK: Refunds

    /// Refunds a purchase: sets its revocation date (now) and reason, revokes the subscription it
    /// is the current transaction of, and tells the queue's observers
    /// `didRevokeEntitlementsForProductIdentifiers`. Value: the transaction id.
    public func refund(transactionID: UInt64, reason: Int32 = 0) throws(LedgerError) -> Outcome {
        synchronize()
        guard let record = try store.transaction(id: transactionID) else {
            return .refused(.transactionNotFound, "transaction \(transactionID) does not exist")
        }
        guard record.state == .purchased || record.state == .restored else {
            return .refused(.invalidArgument, "transaction \(transactionID) is \(record.state): only purchases can be refunded")
        }
        guard record.revocationDate == nil else {
            return .refused(.invalidArgument, "transaction \(transactionID) was already refunded")
        }
        if let purchase = try familyPurchase(of: record) {
            return .refused(.invalidArgument, "transaction \(transactionID) is uid \(record.uid)'s through Family Sharing: "
                            + "refund the purchase, transaction \(purchase.id) of uid \(purchase.uid)")
        }
        let now = clock.now()
        let sequence = try store.nextSequence(uid: record.uid, app: record.app)
        guard try store.setRevocation(id: transactionID, date: now, reason: reason, sequence: sequence) else {
            return .refused(.invalidArgument, "transaction \(transactionID) was already refunded")
        }
        if let product = catalogs[record.app]?.product(record.productID), product.kind == .autoRenewable,
           var subscription = try store.subscription(uid: record.uid, app: record.app,
                                                     groupID: product.subscriptionGroupID ?? product.id),
           subscription.lastTransactionID == record.id {
            subscription.status = .revoked
            subscription.due = nil
            subscription.autoRenew = false
            try saveSubscription(subscription)
        }
        var queues = [QueueKey(uid: record.uid, app: record.app)]
        for copy in try alsoRevoked(byRefundOf: record) {
            let copySequence = try store.nextSequence(uid: copy.uid, app: copy.app)
            guard try store.setRevocation(id: copy.id, date: now, reason: reason, sequence: copySequence) else { continue }
            let queue = QueueKey(uid: copy.uid, app: copy.app)
            if !queues.contains(queue) { queues.append(queue) }
        }
        return .ok(value: transactionID, queues.map { .revoked($0, [record.productID]) })
    }

    /// What a refund of `record` takes back with it: a refund returns the money for a purchase, so
    /// every copy of that purchase loses it. Refunding a purchase revokes its restored copies (on
    /// every host of a fleet); refunding a restored copy revokes the purchase it restored and its
    /// other copies. Renewals of a subscription are purchases of their own and are not included;
    /// but the family copies of a subscription follow its refunded renewal (the family loses what
    /// the purchaser lost).
    private func alsoRevoked(byRefundOf record: TransactionRecord) throws(LedgerError) -> [TransactionRecord] {
        var purchase = record
        if record.state == .restored, let originalID = record.originalID, originalID != record.id {
            guard let original = try store.transaction(id: originalID) else { return [] }
            purchase = original
        }
        var found: [TransactionRecord] = purchase.id == record.id ? [] : [purchase]
        found += try store.restoredCopies(of: purchase.id).filter { $0.id != record.id }
        found = try withFamilyCopies(found, revokedByRefundOf: record)
        return found.filter { $0.revocationDate == nil && ($0.state == .purchased || $0.state == .restored) }
    }

    // MARK: Switches, storefront, clock

    /// Changes the test switches durably; a storefront change is announced to every client.
    public func updateSwitches(_ change: (inout StoreSwitches) -> Void) throws(LedgerError) -> [Effect] {
        synchronize()
        let oldStorefront = storefront
        change(&switches)
        try switches.save(to: store)
        clock.rate = switches.timeRate ?? defaultTimeRate
        guard storefront != oldStorefront else { return [] }
        return [.storefrontChanged(countryCode: storefront, identifier: Storefronts.identifier(for: storefront))]
    }

    /// Moves the store clock forward and fires whatever fell due. Value: the number of effects.
    public func advanceClock(by duration: ClockDuration) throws(LedgerError) -> Outcome {
        synchronize()
        let now = clock.now()
        let end = duration.end(from: now)
        guard end <= StoreClock.latestMilliseconds else {
            return .refused(.invalidArgument,
                            "advancing the clock by \(duration) would pass \(RFC3339.string(milliseconds: StoreClock.latestMilliseconds)), the end of its range")
        }
        clock.offsetMilliseconds += end - now
        try store.setSetting(Self.clockOffsetKey, String(clock.offsetMilliseconds))
        let effects = try fireDueEvents()
        return .ok(value: UInt64(effects.count), effects)
    }

    /// When the next scheduled event falls due on the store clock, nil when nothing is scheduled.
    public func nextEventDate() throws(LedgerError) -> Int64? {
        try millisecondsUntilNextEvent().map { clock.now() + $0 }
    }

    // MARK: Promoted purchases

    /// Offers `productID` to the queue's observers as a purchase promoted in the App Store
    /// (`paymentQueue(_:shouldAddStorePayment:for:)`).
    public func promote(uid: UInt32, app: String, productID: String) -> Outcome {
        guard let catalog = catalogs[app] else { return .refused(.unknownApp, "app \(app) is not registered") }
        guard let product = catalog.product(productID) else {
            return .refused(.invalidArgument, "product \(productID) is not in the catalogue of \(app)")
        }
        return .ok([.promoted(QueueKey(uid: uid, app: app), product.record(locale: locale, currencyCode: currencyCode))])
    }

    // MARK: Read-outs

    /// StoreKit 2's `currentEntitlements` for one buyer and app: the latest unrevoked transaction
    /// of each non-consumable and non-renewing subscription (family copies among them), and the
    /// current transaction of each subscription group the buyer is subscribed to (or in its grace
    /// period), or the family shares with them. Ordered by id.
    public func entitlements(uid: UInt32, app: String) throws(LedgerError) -> [TransactionRecord] {
        guard let catalog = catalogs[app] else { return [] }
        let history = try store.all(uid: uid, app: app)
        var latest: [String: TransactionRecord] = [:]
        for record in history where (record.state == .purchased || record.state == .restored) && record.revocationDate == nil {
            guard let kind = catalog.product(record.productID)?.kind, kind == .nonConsumable || kind == .nonRenewing else { continue }
            // Each purchase with an Advanced Commerce request entitles on its own (its restored
            // copies are of it).
            let commerce = try signedCommerce(of: record) != nil
            latest[commerce ? "\(record.productID)#\(record.originalID ?? record.id)" : record.productID] = record
        }
        var result = Array(latest.values)
        for subscription in try store.subscriptions(uid: uid, app: app) where subscription.status.isEntitled {
            if let record = history.first(where: { $0.id == subscription.lastTransactionID }), record.revocationDate == nil {
                var current = record
                // A no-charge repurchase of the current product carries the running period's end.
                current.expiresDate = current.expiresDate ?? subscription.expiresDate
                result.append(current)
            }
        }
        // A subscription the family shares, while the purchaser's is entitled (beside the buyer's
        // own of the group, if any: Apple lists a status for each, and the app serves the
        // highest level of service among them).
        for (copy, subscription) in try familySubscriptions(uid: uid, app: app, history: history)
        where subscription.status.isEntitled && copy.revocationDate == nil {
            var current = copy
            current.expiresDate = subscription.expiresDate
            result.append(current)
        }
        return result.sorted { $0.id < $1.id }
    }

    /// Every transaction of the matching queues, finished or not, oldest first.
    public func history(uid: UInt32?, app: String?, productID: String? = nil) throws(LedgerError) -> [TransactionRecord] {
        let records = try store.list(uid: uid, app: app, unfinishedOnly: false)
        guard let productID else { return records }
        return records.filter { $0.productID == productID }
    }

    /// A page of the history: the transactions after `afterID`, oldest first, at most `limit`;
    /// read from there, not from the start (a page of a long history costs one page).
    public func history(uid: UInt32, app: String, afterID: UInt64, limit: Int) throws(LedgerError) -> [TransactionRecord] {
        try store.list(uid: uid, app: app, unfinishedOnly: false, afterID: afterID, limit: limit)
    }

    // MARK: Clear

    /// `SKTestSession.clearTransactions`: deletes the transactions, subscriptions and open requests
    /// of the matching queues. Observers hear `removed` for what was still unfinished. Value: the
    /// number of transactions deleted.
    /// Deletes one transaction (`SKTestSession.deleteTransaction(identifier:)`); an unfinished
    /// one leaves its queue as a finish does (`removedTransactions`). Its subscription, if any,
    /// stays: the store renews, expires or refunds it as before.
    /// Deletes a transaction and, as Apple's `SKTestSession.deleteTransaction(identifier:)`
    /// does, its children: a subscription's renewals and a purchase's restores (of every queue).
    /// Unfinished ones leave their queues (`removed`). Its value: how many were deleted.
    public func deleteTransaction(id: UInt64) throws(LedgerError) -> Outcome {
        synchronize()
        guard let original = try store.transaction(id: id) else {
            return .refused(.transactionNotFound, "transaction \(id) does not exist")
        }
        var targets = try store.all(uid: original.uid, app: original.app).filter { $0.originalID == id && $0.id != id }
        for copy in try store.restoredCopies(of: id) where !targets.contains(where: { $0.id == copy.id }) {
            targets.append(copy)
        }
        targets.append(original)
        var removed: [QueueKey: [TransactionRecord]] = [:]
        var order: [QueueKey] = []
        var deleted: UInt64 = 0
        for target in targets {
            let references = try commerceReferenceKeys(of: [target])
            try keepRunningCommerce(of: target)
            guard var record = try store.deleteTransaction(id: target.id) else { continue }
            try forgetSettings(Self.transactionSettingKeys(record.id) + references)
            deleted += 1
            guard !record.finished else { continue }
            let queue = QueueKey(uid: record.uid, app: record.app)
            record.finished = true
            record.sequence = try store.nextSequence(uid: record.uid, app: record.app)
            if removed[queue] == nil { order.append(queue) }
            removed[queue, default: []].append(record)
        }
        scheduleChanged()
        return .ok(value: deleted, order.map { .removed($0, removed[$0] ?? []) })
    }

    public func clear(uid: UInt32?, app: String?) throws(LedgerError) -> Outcome {
        synchronize()
        let ids = try historyIDs(uid: uid, app: app)
        let (deleted, unfinished) = try store.deleteHistory(uid: uid, app: app)
        try forgetSettings(ids.transactions.flatMap(Self.transactionSettingKeys) + ids.subscriptions.flatMap(Self.subscriptionSettingKeys)
                           + ids.references)
        scheduleChanged()
        var removed: [QueueKey: [TransactionRecord]] = [:]
        var order: [QueueKey] = []
        for var record in unfinished {
            let queue = QueueKey(uid: record.uid, app: record.app)
            record.finished = true
            record.sequence = try store.nextSequence(uid: record.uid, app: record.app)
            if removed[queue] == nil { order.append(queue) }
            removed[queue, default: []].append(record)
        }
        return .ok(value: UInt64(deleted), order.map { .removed($0, removed[$0] ?? []) })
    }
}
