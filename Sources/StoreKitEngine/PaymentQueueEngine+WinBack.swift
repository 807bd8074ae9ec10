import StoreKitLedger
import StoreKitWire

// Win-back offers: an offer of an auto-renewable subscription for a buyer whose subscription of
// its group lapsed (`winbackOffers` in the catalogue). The buyer must have paid for it for at least
// the offer's months (from the subscription's first purchase to its end), be within the offer's
// window of months since it ended, and not have had a win-back offer of the group in the offer's
// wait; months are the store clock's (the catalogue's time rate shortens them as it shortens
// periods). A win-back purchase is told as `offerType` 4 with the offer's id; the renewal info of a
// lapsed subscription lists the offers its buyer may have (`eligibleWinBackOfferIds`).

extension PaymentQueueEngine {
    static func winBackKey(_ originalID: UInt64) -> String { "winback.\(originalID)" }

    /// The win-back offer `offerID` of `product`, when `uid` may have it now.
    public func winBackOffer(_ offerID: String, of product: CatalogProduct, uid: UInt32, app: String) throws(LedgerError)
        -> Result<SubscriptionOffer, PaymentRefusal>
    {
        guard product.kind == .autoRenewable, let winBack = product.winBackOffers.first(where: { $0.offer.id == offerID }) else {
            return .failure(PaymentRefusal(outcome: .storeKit(.invalidOfferIdentifier, "\(product.id) has no win-back offer \(offerID)")))
        }
        let groupID = product.subscriptionGroupID ?? product.id
        guard let subscription = try store.subscription(uid: uid, app: app, groupID: groupID) else {
            return .failure(PaymentRefusal(outcome: .storeKit(.ineligibleForOffer,
                "win-back offers are for lapsed subscribers, and uid \(uid) never subscribed in group \(groupID)")))
        }
        if let reason = try winBackRefusal(winBack, subscription: subscription) {
            return .failure(PaymentRefusal(outcome: .storeKit(.ineligibleForOffer, reason)))
        }
        return .success(winBack.offer)
    }

    /// Why `subscription`'s buyer may not have `winBack` now; nil when they may.
    func winBackRefusal(_ winBack: WinBackOffer, subscription: Subscription) throws(LedgerError) -> String? {
        let now = clock.now()
        guard !subscription.status.isLive else { return "the subscription of group \(subscription.groupID) has not lapsed" }
        guard subscription.status != .revoked else { return "the subscription of group \(subscription.groupID) was refunded" }
        let paid = try paidMonths(subscription)
        guard paid >= winBack.paidMonths else {
            return "the buyer paid for \(paid) months, the offer needs \(winBack.paidMonths)"
        }
        let lapsed = months(from: subscription.expiresDate, to: now)
        guard winBack.lapsedMonths.contains(lapsed) else {
            return "the subscription lapsed \(lapsed) months ago, the offer is for \(winBack.lapsedMonths.lowerBound) to "
                + (winBack.lapsedMonths.upperBound == Int.max ? "any number of" : "\(winBack.lapsedMonths.upperBound)") + " months"
        }
        if let text = try store.setting(Self.winBackKey(subscription.originalID)), let last = Int64(text) {
            let since = months(from: last, to: now)
            guard since >= winBack.waitMonths else {
                return "the buyer had a win-back offer \(since) months ago; the next one waits \(winBack.waitMonths) months"
            }
        }
        return nil
    }

    /// The months `subscription`'s buyer paid for: the periods of its purchases and renewals, not
    /// refunded, but for free trials (a gap between two runs of it is not paid time).
    func paidMonths(_ subscription: Subscription) throws(LedgerError) -> Int {
        var paid: Int64 = 0
        for record in try store.all(uid: subscription.uid, app: subscription.app)
        where record.state == .purchased && record.revocationDate == nil
            && (record.id == subscription.originalID || record.originalID == subscription.originalID) {
            guard let expires = record.expiresDate, expires > record.date,
                  try offer(of: record.id)?.discountType != "FREE_TRIAL" else { continue }
            paid += expires - record.date
        }
        return months(from: 0, to: paid)
    }

    /// Whole months of the store clock from `start` to `end` (0 when `end` is not after it).
    func months(from start: Int64, to end: Int64) -> Int {
        var count = 0
        while count < SubscriptionPeriod.maximumValue,
              clock.rate.end(of: SubscriptionPeriod(value: count + 1, unit: .month), from: start) <= end {
            count += 1
        }
        return count
    }

    /// The ids of the win-back offers `subscription`'s buyer may have now (for its renewal info).
    func eligibleWinBackOffers(_ subscription: Subscription) -> [String] {
        guard !subscription.status.isLive, let catalog = catalogs[subscription.app] else { return [] }
        var ids: [String] = []
        for productID in catalog.subscriptionGroups.first(where: { $0.id == subscription.groupID })?.productIDs ?? [subscription.productID] {
            for winBack in catalog.product(productID)?.winBackOffers ?? [] {
                guard let id = winBack.offer.id, (try? winBackRefusal(winBack, subscription: subscription)) == .some(nil) else { continue }
                ids.append(id)
            }
        }
        return ids
    }

    /// Remembers that the buyer of subscription `originalID` took a win-back offer now.
    func recordWinBack(of originalID: UInt64) throws(LedgerError) {
        try store.setSetting(Self.winBackKey(originalID), String(clock.now()))
    }
}
