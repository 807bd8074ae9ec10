import FoundationEssentials
import StoreKitLedger
import StoreKitWire

// Monthly billing with a commitment (a `MONTHLY` billing plan, StoreKit 2's
// `.billingPlanType(.monthly)`): the buyer commits to the product's period (12 months for a
// year) and pays it a month at a time. Each month is a transaction of its own, at the plan's
// monthly price, granting one month; turning auto-renew off ends the subscription only when the
// commitment ends, after its last month; with auto-renew on, a new commitment starts then.
//
// Kept in the ledger's settings, as offers are (both ledgers and a fleet, no change to their
// tables): the commitment a subscription is in (`commitment.running.ORIGINAL`), the billing
// period of it each transaction is (`commitment.ID`), and the plan a waiting purchase (Ask to
// Buy, interrupted) was asked with (`commitment.wait.ID`).

/// Where a transaction, or a subscription, stands in a commitment.
public struct Commitment: Sendable, Equatable {
    /// The billing period (1 … `total`); 0 for a period that is none of them: an offer's period
    /// of another length than a billing period (a week's free trial, three months paid up front),
    /// which comes before the next billing period and is not counted (at a purchase, before the
    /// commitment starts: the buyer is not committed yet).
    public var period: Int
    /// How many billing periods the commitment has.
    public var total: Int
    /// When the commitment ends: the end of its last billing period (store clock, ms).
    public var expires: Int64
    /// A billing period's price and the whole commitment's, in milli-units of the currency.
    public var priceMillis: Int64
    public var commitmentPriceMillis: Int64

    /// Whether a billing period of the commitment is still to come after this one, the
    /// commitment having started.
    public var continues: Bool { period >= 1 && period < total }

    /// `PERIOD\tTOTAL\tEXPIRES\tPRICE\tCOMMITMENT_PRICE`, as the settings hold it.
    var stored: String { "\(period)\t\(total)\t\(expires)\t\(priceMillis)\t\(commitmentPriceMillis)" }

    init(period: Int, total: Int, expires: Int64, priceMillis: Int64, commitmentPriceMillis: Int64) {
        self.period = period
        self.total = total
        self.expires = expires
        self.priceMillis = priceMillis
        self.commitmentPriceMillis = commitmentPriceMillis
    }

    init?(stored text: String) {
        let parts = text.split(separator: "\t", omittingEmptySubsequences: false)
        guard parts.count == 5, let period = Int(parts[0]), let total = Int(parts[1]), let expires = Int64(parts[2]),
              let price = Int64(parts[3]), let commitmentPrice = Int64(parts[4]), total >= 1, (0...total).contains(period) else { return nil }
        self.init(period: period, total: total, expires: expires, priceMillis: price, commitmentPriceMillis: commitmentPrice)
    }

    /// The plan the commitment's remaining billing periods are billed with: its own price and
    /// months, whatever the catalogue says now (its offers are the catalogue's plan's, if any).
    func plan(offersOf current: BillingPlan?) -> BillingPlan {
        let price = Decimal(priceMillis) / 1000
        let commitmentPrice = Decimal(commitmentPriceMillis) / 1000
        return BillingPlan(
            kind: .monthly, price: price, priceCents: priceMillis / 10, displayPrice: "\(price)",
            billingPeriod: SubscriptionPeriod(value: 1, unit: .month), billingPeriodCount: total, commitmentPrice: commitmentPrice,
            commitmentPriceCents: commitmentPriceMillis / 10, commitmentDisplayPrice: "\(commitmentPrice)",
            introductoryOffer: current?.introductoryOffer, promotionalOffers: current?.promotionalOffers ?? [],
            winBackOffers: current?.winBackOffers ?? [])
    }

    /// Apple's `TransactionCommitmentInfo`.
    var payload: JSONValue {
        .object([
            ("billingPeriodNumber", .int(Int64(period))),
            ("totalBillingPeriods", .int(Int64(total))),
            ("commitmentExpiresDate", .int(expires)),
            ("commitmentPrice", .int(commitmentPriceMillis)),
        ])
    }
}

extension PaymentQueueEngine {
    static func commitmentKey(_ transactionID: UInt64) -> String { "commitment.\(transactionID)" }
    static func runningCommitmentKey(_ originalID: UInt64) -> String { "commitment.running.\(originalID)" }
    static func waitingPlanKey(_ transactionID: UInt64) -> String { "commitment.wait.\(transactionID)" }
    static func nextPlanKey(_ originalID: UInt64) -> String { "commitment.next.\(originalID)" }

    /// The billing period of a commitment transaction `transactionID` is, if any.
    public func commitment(of transactionID: UInt64) throws(LedgerError) -> Commitment? {
        try store.setting(Self.commitmentKey(transactionID)).flatMap(Commitment.init(stored:))
    }

    /// The commitment subscription `originalID` is in (its current billing period), if any.
    public func runningCommitment(of originalID: UInt64) throws(LedgerError) -> Commitment? {
        try store.setting(Self.runningCommitmentKey(originalID)).flatMap(Commitment.init(stored:))
    }

    /// Whether the subscription must renew whatever its auto-renew: it is live and its commitment
    /// has billing periods left (one that expired or was refunded has no commitment any more).
    func commitmentContinues(_ subscription: Subscription) throws(LedgerError) -> Bool {
        guard subscription.status.isLive else { return false }
        return try runningCommitment(of: subscription.originalID)?.continues ?? false
    }

    /// The billing plan a purchase asked for, checked: nil for up front (also when asked for
    /// explicitly, if the product has the plan); refused, as StoreKit refuses it, for a plan the
    /// product does not have.
    func billingPlan(_ type: BillingPlan.Kind?, of product: CatalogProduct) -> Result<BillingPlan?, PaymentRefusal> {
        guard let type else { return .success(nil) }
        guard product.kind == .autoRenewable, let plan = product.billingPlan(type) else {
            return .failure(PaymentRefusal(outcome: .storeKit(.storeProductNotAvailable, "\(product.id) has no \(type.name) billing plan")))
        }
        return .success(plan.kind == .monthly ? plan : nil)
    }

    /// The period from `start` to `periodEnd`, as transaction `transactionID` of subscription
    /// `originalID` billed with `plan`: the next billing period of `running` while it has some
    /// left, else the first of a new commitment; none (the commitment is forgotten) when the
    /// period is billed up front. A period of another length than a billing period (an offer's)
    /// is not one: it comes before the next billing period, which the commitment's end moves
    /// after it, so the commitment bills its billing periods, and its price, whatever the offers.
    func continueCommitment(_ running: Commitment?, plan: BillingPlan?, originalID: UInt64, transactionID: UInt64,
                            start: Int64, periodEnd: Int64) throws(LedgerError) {
        guard let plan, plan.kind == .monthly else {
            if try store.setting(Self.runningCommitmentKey(originalID)) != nil { try store.setSetting(Self.runningCommitmentKey(originalID), nil) }
            return
        }
        let isBillingPeriod = periodEnd == clock.rate.end(of: plan.billingPeriod, from: start)
        var next = Commitment(period: 0, total: plan.billingPeriodCount, expires: periodEnd, priceMillis: plan.priceCents * 10,
                              commitmentPriceMillis: plan.commitmentPriceCents * 10)
        if let running, running.continues { next = running }
        if isBillingPeriod { next.period += 1 }
        // The commitment ends after its remaining billing periods, each renewed as renewals are.
        next.expires = periodEnd
        for _ in next.period..<next.total { next.expires = clock.rate.end(of: plan.billingPeriod, from: next.expires) }
        try store.setSetting(Self.runningCommitmentKey(originalID), next.stored)
        var this = next
        if !isBillingPeriod { this.period = 0 }
        try store.setSetting(Self.commitmentKey(transactionID), this.stored)
    }

    /// Keeps the plan a waiting purchase `transactionID` was asked with (monthly only).
    func keepWaitingPlan(_ plan: BillingPlan?, of transactionID: UInt64) throws(LedgerError) {
        guard let plan, plan.kind == .monthly else { return }
        try store.setSetting(Self.waitingPlanKey(transactionID), plan.kind.name)
    }

    /// The plan the waiting purchase `transactionID` of `product` was asked with, forgotten here:
    /// nil (up front) when it asked for none; refused (`storeProductNotAvailable`) when the
    /// catalogue no longer has it, rather than billed another way than the buyer chose.
    func takeWaitingPlan(of transactionID: UInt64, product: CatalogProduct) throws(LedgerError) -> Result<BillingPlan?, PaymentRefusal> {
        let key = Self.waitingPlanKey(transactionID)
        guard let name = try store.setting(key) else { return .success(nil) }
        try store.setSetting(key, nil)
        guard let plan = BillingPlan.Kind(name: name).flatMap({ product.billingPlan($0) }) else {
            return .failure(PaymentRefusal(outcome: .storeKit(.storeProductNotAvailable,
                "\(product.id) no longer has the \(name) billing plan the purchase was asked with")))
        }
        return .success(plan)
    }

    /// Keeps, with a downgrade that waits for the renewal, the plan it was bought with (monthly
    /// only; any other forgets an earlier one).
    func setNextPlan(_ plan: BillingPlan?, of originalID: UInt64) throws(LedgerError) {
        let value = plan?.kind == .monthly ? BillingPlan.Kind.monthly.name : nil
        if value == nil, try store.setting(Self.nextPlanKey(originalID)) == nil { return }
        try store.setSetting(Self.nextPlanKey(originalID), value)
    }

    /// The plan the pending downgrade of a subscription was bought with, as the catalogue has it
    /// now: nil up front; `.some(nil)` when it was monthly and the product no longer has the plan.
    func nextPlan(of subscription: Subscription, product: CatalogProduct?) throws(LedgerError) -> BillingPlan?? {
        guard subscription.nextProductID != nil, try store.setting(Self.nextPlanKey(subscription.originalID)) != nil else { return nil }
        return .some(product?.billingPlan(.monthly))
    }

    /// The plan the renewal at the end of the current period or commitment bills: the running
    /// commitment's while it has billing periods left; the pending downgrade's plan; a new
    /// commitment of the product while it has the plan; else (nil) up front. `.some(nil)`: the
    /// downgrade was bought monthly and its product no longer has the plan (the subscription
    /// expires rather than be billed up front).
    func renewalPlan(of subscription: Subscription, running: Commitment?, product: CatalogProduct?) throws(LedgerError) -> BillingPlan?? {
        if let running, running.continues { return running.plan(offersOf: product?.billingPlan(.monthly)) }
        if subscription.nextProductID != nil, subscription.nextProductID != subscription.productID {
            return try nextPlan(of: subscription, product: product)
        }
        guard running != nil, let plan = product?.billingPlan(.monthly) else { return nil }
        return .some(plan)
    }

    /// The members of a signed transaction that tell its billing plan: `billingPlanType`, and the
    /// commitment's `commitmentInfo`.
    func planMembers(_ commitment: Commitment?) -> [(String, JSONValue)] {
        guard let commitment else { return [("billingPlanType", .string(BillingPlan.Kind.upFront.name))] }
        return [("billingPlanType", .string(BillingPlan.Kind.monthly.name)), ("commitmentInfo", commitment.payload)]
    }

    /// The members of a signed renewal info that tell the billing plans ahead:
    /// `renewalBillingPlanType` (the next billing period's), and for a subscription in a
    /// commitment Apple's `RenewalCommitmentInfo` (what happens when the commitment ends).
    func renewalPlanMembers(_ subscription: Subscription) -> [(String, JSONValue)] {
        let running = subscription.status.isLive ? (try? runningCommitment(of: subscription.originalID)) ?? nil : nil
        let catalog = catalogs[subscription.app]
        let renewsTo = subscription.nextProductID ?? subscription.productID
        // What the commitment's end (or the period's, without one) renews into: a new commitment
        // of the product while it has the plan, a downgrade with the plan it was bought with.
        let endPlan = try? renewalPlan(of: subscription, running: running.map(ended), product: catalog?.product(renewsTo))
        let nextCommitment = endPlan.flatMap { $0 }
        let nextPlan: BillingPlan.Kind = running.map { $0.continues } == true || nextCommitment != nil ? .monthly : .upFront
        var members: [(String, JSONValue)] = [("renewalBillingPlanType", .string(nextPlan.name))]
        guard let running, subscription.status.isLive else { return members }
        let renewalPrice = nextCommitment?.commitmentPriceCents ?? catalog?.product(renewsTo)?.priceCents ?? 0
        members.append(("commitmentInfo", .object([
            ("commitmentAutoRenewProductId", .string(renewsTo)),
            ("commitmentAutoRenewStatus", .int(subscription.autoRenew ? 1 : 0)),
            ("commitmentRenewalBillingPlanType", .string((nextCommitment != nil ? BillingPlan.Kind.monthly : .upFront).name)),
            ("commitmentRenewalDate", .int(running.expires)),
            ("commitmentRenewalPrice", .int(renewalPrice * 10)),
        ])))
        return members
    }

    /// `commitment` at its last billing period: what its end renews into.
    private func ended(_ commitment: Commitment) -> Commitment {
        var last = commitment
        last.period = last.total
        return last
    }
}
