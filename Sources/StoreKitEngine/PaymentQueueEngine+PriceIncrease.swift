import StoreKitLedger
import StoreKitWire

// Price increases that need the subscriber's consent (the App Store asks before a subscription
// renews at a higher price): `storekitctl price-increase` raises one, the app is told
// (`paymentQueueShouldShowPriceConsent(_:)`), `storekitctl price-consent` gives the buyer's
// answer. At renewal an agreed increase renews; an unanswered or declined one expires the
// subscription (`expirationIntent` 3). The state is kept per subscription in the store's settings.

/// Where a price increase of a subscription stands.
public enum PriceIncrease: String, Sendable {
    /// Raised; the subscriber has not answered (`priceIncreaseStatus` 0).
    case pending
    /// The subscriber agreed (`priceIncreaseStatus` 1): the subscription renews.
    case agreed
    /// The subscriber declined: auto-renew is off, the subscription expires at the period's end.
    case declined
}

extension PaymentQueueEngine {
    static func priceIncreaseKey(_ originalID: UInt64) -> String { "priceIncrease.\(originalID)" }

    /// The price increase of the subscription whose original transaction is `originalID`, if any.
    public func priceIncrease(of originalID: UInt64) throws(LedgerError) -> PriceIncrease? {
        try store.setting(Self.priceIncreaseKey(originalID)).flatMap(PriceIncrease.init(rawValue:))
    }

    func setPriceIncrease(_ state: PriceIncrease?, of originalID: UInt64) throws(LedgerError) {
        try store.setSetting(Self.priceIncreaseKey(originalID), state?.rawValue)
    }

    /// Raises the price of a live, renewing subscription in a way that needs consent; the app's
    /// observers are told (`priceConsent`). Raised again while pending, it is told again.
    public func requestPriceConsent(_ selector: SubscriptionSelector) throws(LedgerError) -> Outcome {
        synchronize()
        guard case .found(let subscription) = try locate(selector) else { return try refusal(selector) }
        guard subscription.status.isLive, subscription.autoRenew else {
            return .refused(.invalidArgument, "the subscription to \(subscription.productID) does not renew "
                            + "(\(subscription.status.name)\(subscription.autoRenew ? "" : ", auto-renew off")): no price to raise")
        }
        try setPriceIncrease(.pending, of: subscription.originalID)
        return .ok(value: subscription.originalID,
                   [.priceConsent(QueueKey(uid: subscription.uid, app: subscription.app), subscription.productID)])
    }

    /// The subscriber's answer to a pending price increase: agreeing lets it renew; declining turns
    /// auto-renew off, so it expires at the end of the period.
    public func answerPriceConsent(_ agreed: Bool, _ selector: SubscriptionSelector) throws(LedgerError) -> Outcome {
        synchronize()
        guard case .found(var subscription) = try locate(selector) else { return try refusal(selector) }
        guard try priceIncrease(of: subscription.originalID) == .pending else {
            return .refused(.invalidArgument, "the subscription to \(subscription.productID) has no price increase waiting for an answer")
        }
        try setPriceIncrease(agreed ? .agreed : .declined, of: subscription.originalID)
        if !agreed {
            subscription.autoRenew = false
            try saveSubscription(subscription)
        }
        return .ok(value: subscription.originalID)
    }

    /// At a renewal: whether the subscription may renew as far as a price increase goes. An
    /// unanswered one ends it (auto-renew off, as a declined one did already); an agreed one is
    /// done once the period at the new price starts.
    func priceIncreaseAllowsRenewal(_ subscription: inout StoreSubscription) throws(LedgerError) -> Bool {
        switch try priceIncrease(of: subscription.originalID) {
        case nil:
            return true
        case .agreed:
            try setPriceIncrease(nil, of: subscription.originalID)
            return true
        case .pending, .declined:
            try setPriceIncrease(.declined, of: subscription.originalID)
            subscription.autoRenew = false
            return false
        }
    }

    /// The products of the queue's live subscriptions with a price increase waiting for the
    /// subscriber: told again when an observer connects.
    public func pendingPriceConsents(_ queue: QueueKey) throws(LedgerError) -> [String] {
        var products: [String] = []
        for subscription in try store.subscriptions(uid: queue.uid, app: queue.app) where subscription.status.isLive {
            if try priceIncrease(of: subscription.originalID) == .pending { products.append(subscription.productID) }
        }
        return products
    }
}
