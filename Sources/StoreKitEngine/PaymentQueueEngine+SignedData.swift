import StoreKitLedger
import StoreKitWire

// What proof of purchase says, as Apple's documented payloads: `JWSTransaction`,
// `JWSRenewalInfo`, `AppTransaction`, and the purchases an app receipt lists. Plain values here;
// the daemon signs them (StoreKitSigning). `environment` is the app's `Environment=`, and
// `signedDate` is the real time of signing (not the store's clock), so that certificates are
// checked at a true date.

extension PaymentQueueEngine {
    /// Apple's `type` of a product.
    static func typeName(_ kind: ProductRecord.Kind?) -> String {
        switch kind {
        case .consumable: "Consumable"
        case .nonConsumable: "Non-Consumable"
        case .autoRenewable: "Auto-Renewable Subscription"
        case .nonRenewing, nil: "Non-Renewing Subscription"
        }
    }

    /// Whether a transaction in this state is signed: the ones StoreKit 2 has a `Transaction` for.
    public static func isSignable(_ record: TransactionRecord) -> Bool {
        record.state == .purchased || record.state == .restored
    }

    /// The purchase date of the transaction's original (its own date when it is the original).
    public func originalPurchaseDate(of record: TransactionRecord) throws(LedgerError) -> Int64 {
        guard let originalID = record.originalID, originalID != record.id,
              let original = try store.transaction(id: originalID) else { return record.date }
        return original.date
    }

    /// A renewal is a transaction the store made by renewing a subscription (recorded when made).
    public func isRenewal(_ record: TransactionRecord, kind: ProductRecord.Kind?) throws(LedgerError) -> Bool {
        guard kind == .autoRenewable, record.state == .purchased else { return false }
        return try store.isRenewal(transactionID: record.id)
    }

    /// Apple's `JWSTransaction` for a `purchased` or `restored` transaction; nil for other states.
    public func transactionPayload(_ record: TransactionRecord, environment: String, signedDate: Int64) throws(LedgerError) -> JSONValue? {
        guard Self.isSignable(record) else { return nil }
        let product = catalogs[record.app]?.product(record.productID)
        // The original, read once: its date, and (for a restored copy) whose purchase it was.
        let original = try record.originalID.flatMap { id throws(LedgerError) in id == record.id ? nil : try store.transaction(id: id) }
        let familyShared = record.state == .restored && original.map { $0.uid != record.uid } == true
        // An Advanced Commerce purchase's price is its request's, in its currency (the store levies no tax).
        let commerce = try signedCommerce(of: record)
        var members: [(String, JSONValue)] = [
            ("transactionId", .string(String(record.id))),
            ("originalTransactionId", .string(String(record.originalID ?? record.id))),
            ("bundleId", .string(record.app)),
            ("productId", .string(record.productID)),
            ("purchaseDate", .int(record.date)),
            ("originalPurchaseDate", .int(original?.date ?? record.date)),
            ("quantity", .int(Int64(record.quantity))),
            ("type", .string(Self.typeName(product?.kind))),
            ("inAppOwnershipType", .string(familyShared ? "FAMILY_SHARED" : "PURCHASED")),
            ("signedDate", .int(signedDate)),
            ("environment", .string(environment)),
            ("transactionReason", .string(try isRenewal(record, kind: product?.kind) ? "RENEWAL" : "PURCHASE")),
            ("storefront", .string(storefront)),
            ("storefrontId", .string(Storefronts.identifier(for: storefront))),
            ("currency", .string(commerce?.request.currency ?? currencyCode)),
        ]
        // The offer the period was bought or renewed with, and its price (a restored or family
        // copy, made later, names none).
        let offer = product?.kind == .autoRenewable && record.state == .purchased ? try offer(of: record.id) : nil
        // The billing period of a commitment it is (monthly billing), at the plan's price.
        let commitment = product?.kind == .autoRenewable && record.state == .purchased ? try commitment(of: record.id) : nil
        if let product {
            members.append(("price", .int(commerce.map { $0.request.taxExclusivePriceMillis(period: $0.period) }
                                          ?? offer?.priceMillis ?? commitment?.priceMillis ?? product.priceCents * 10)))
        }
        if let commerce {
            let info = commerce.request.transactionInfo(period: commerce.period, revocationDate: record.revocationDate)
            members.append(("advancedCommerceInfo", info))
        }
        if product?.kind == .autoRenewable {
            members.append(("subscriptionGroupIdentifier", .string(product?.subscriptionGroupID ?? record.productID)))
            members.append(("webOrderLineItemId", .string(String(record.id))))
            if let offer { members += offer.payloadMembers }
            if record.state == .purchased { members += planMembers(commitment) }
        }
        if let expires = record.expiresDate { members.append(("expiresDate", .int(expires))) }
        if let revoked = record.revocationDate {
            members.append(("revocationDate", .int(revoked)))
            members.append(("revocationReason", .int(Int64(record.revocationReason ?? 0))))
        }
        if let token = Self.appAccountToken(record.applicationUsername) { members.append(("appAccountToken", .string(token))) }
        return .object(members)
    }

    /// StoreKit 2's `appAccountToken` is StoreKit 1's `applicationUsername` when that is a UUID.
    public static func appAccountToken(_ username: String?) -> String? {
        guard let username else { return nil }
        let bytes = Array(username.utf8)
        guard bytes.count == 36 else { return nil }
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == UInt8(ascii: "-") else { return nil }
            } else {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
                        || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte) else { return nil }
            }
        }
        return username.lowercased()
    }

    /// One subscription's status as StoreKit 2 reports it.
    public struct SubscriptionStatus: Sendable {
        public var subscription: Subscription
        public var state: SubscriptionStatusRecord.State
        public var latest: TransactionRecord
    }

    /// The buyer's subscriptions (in `groupID` only, when given), each with its latest transaction.
    public func subscriptionStatuses(uid: UInt32, app: String, groupID: String?) throws(LedgerError) -> [SubscriptionStatus] {
        var result: [SubscriptionStatus] = []
        for subscription in try store.subscriptions(uid: uid, app: app) where groupID == nil || subscription.groupID == groupID {
            guard let latest = try store.transaction(id: subscription.lastTransactionID) else { continue }
            result.append(SubscriptionStatus(subscription: subscription, state: Self.statusState(subscription.status), latest: latest))
        }
        // The family's subscriptions the buyer shares, each with the buyer's latest copy of it.
        for (copy, subscription) in try familySubscriptions(uid: uid, app: app, history: try store.all(uid: uid, app: app))
        where groupID == nil || subscription.groupID == groupID {
            result.append(SubscriptionStatus(subscription: subscription, state: Self.statusState(subscription.status), latest: copy))
        }
        return result
    }

    static func statusState(_ status: Subscription.Status) -> SubscriptionStatusRecord.State {
        switch status {
        case .active: .subscribed
        case .expired: .expired
        case .billingRetry: .inBillingRetryPeriod
        case .gracePeriod: .inGracePeriod
        case .revoked: .revoked
        }
    }

    /// Apple's `JWSRenewalInfo` for a subscription.
    /// `priceIncrease`: where a price increase of it stands (`priceIncreaseStatus`, and
    /// `expirationIntent` 3 when it ended for want of consent). `advancedCommerce`: what an
    /// Advanced Commerce subscription renews with (`renewalCommerceInfo(of:)`).
    public func renewalInfoPayload(_ subscription: Subscription, environment: String, signedDate: Int64,
                                   priceIncrease: PriceIncrease? = nil, advancedCommerce: JSONValue? = nil) -> JSONValue {
        let committed = (try? commitmentContinues(subscription)) ?? false
        let renews = subscription.autoRenew || committed
        var members: [(String, JSONValue)] = [
            ("originalTransactionId", .string(String(subscription.originalID))),
            ("productId", .string(subscription.productID)),
            // The product of the next billing period: a commitment's own while it continues (a
            // downgrade waits for its end: `commitmentInfo.commitmentAutoRenewProductId`).
            ("autoRenewProductId", .string(committed ? subscription.productID : subscription.nextProductID ?? subscription.productID)),
            // In a commitment the next billing period comes whatever auto-renew says (that
            // decides what happens at the commitment's end: `commitmentInfo`).
            ("autoRenewStatus", .int(renews ? 1 : 0)),
            ("isInBillingRetryPeriod", .bool(subscription.status == .billingRetry || subscription.status == .gracePeriod)),
            ("recentSubscriptionStartDate", .int(subscription.periodStart)),
            ("signedDate", .int(signedDate)),
            ("environment", .string(environment)),
        ]
        if renews, subscription.status.isLive { members.append(("renewalDate", .int(subscription.expiresDate))) }
        members += renewalPlanMembers(subscription)
        if let grace = subscription.gracePeriodEnd, subscription.status == .gracePeriod {
            members.append(("gracePeriodExpiresDate", .int(grace)))
        }
        // The win-back offers a lapsed subscriber may have now.
        let winBack = eligibleWinBackOffers(subscription)
        if !winBack.isEmpty { members.append(("eligibleWinBackOfferIds", .array(winBack.map { .string($0) }))) }
        // expirationIntent: 1 the customer cancelled (auto-renew off), 2 a billing error, 3 no
        // consent to a price increase.
        if subscription.status == .expired {
            members.append(("expirationIntent", .int(priceIncrease == .declined ? 3 : subscription.autoRenew ? 2 : 1)))
        }
        switch priceIncrease {
        case .pending where subscription.status.isLive: members.append(("priceIncreaseStatus", .int(0)))
        case .agreed where subscription.status.isLive: members.append(("priceIncreaseStatus", .int(1)))
        default: break
        }
        if let advancedCommerce { members.append(("advancedCommerceInfo", advancedCommerce)) }
        return .object(members)
    }

    /// What an app receipt lists: every `purchased` or `restored` transaction of the queue except
    /// finished consumables (Apple drops those once finished), oldest first.
    public func receiptPurchases(uid: UInt32, app: String) throws(LedgerError) -> [TransactionRecord] {
        try store.all(uid: uid, app: app).filter { isInReceipt($0) }
    }

    /// How the list of `receiptPurchases` changed since the queue's sequence number was
    /// `afterSequence`: the transactions to list (new, or listed with what changed) and the ids
    /// to list no more (a consumable finished).
    public func receiptChanges(uid: UInt32, app: String, afterSequence: UInt64) throws(LedgerError)
        -> (listed: [TransactionRecord], unlisted: [UInt64]) {
        var listed: [TransactionRecord] = []
        var unlisted: [UInt64] = []
        for record in try store.changed(uid: uid, app: app, afterSequence: afterSequence) {
            if isInReceipt(record) { listed.append(record) } else { unlisted.append(record.id) }
        }
        return (listed, unlisted)
    }

    func isInReceipt(_ record: TransactionRecord) -> Bool {
        guard Self.isSignable(record) else { return false }
        return !(record.finished && catalogs[record.app]?.product(record.productID)?.kind == .consumable)
    }
}
