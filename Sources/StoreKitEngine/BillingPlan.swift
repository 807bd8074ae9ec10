import FoundationEssentials
import StoreKitWire

/// A billing plan of an auto-renewable subscription (`billingPlans[]` in a `.storekit` file,
/// StoreKit 2's `Product.SubscriptionInfo.PricingTerms`): billed up front, one payment a period
/// (every subscription has it), or monthly with a commitment to the product's whole period (a
/// yearly subscription billed in 12 months, each at the plan's price).
public struct BillingPlan: Sendable, Equatable {
    public typealias Kind = ProductRecord.BillingPlan.PlanType

    public var kind: Kind
    /// What one billing period costs (`displayPrice` of the plan): the product's price up front,
    /// one month's for a monthly plan.
    public var price: Decimal
    /// `price` × 100.
    public var priceCents: Int64
    /// The price as the file writes it.
    public var displayPrice: String
    /// The length of one billing period: the product's period up front, a month for a monthly plan.
    public var billingPeriod: SubscriptionPeriod
    /// How many billing periods the commitment has: 1 up front, the months of the product's
    /// period for a monthly plan (12 for a year).
    public var billingPeriodCount: Int
    /// What the whole commitment costs (`commitmentDisplayPrice`), and × 100.
    public var commitmentPrice: Decimal
    public var commitmentPriceCents: Int64
    public var commitmentDisplayPrice: String
    /// The plan's offers: an up-front plan's are the product's; a monthly plan's are the offers
    /// the file marks `"billingPlanType": "MONTHLY"`, in billing periods of a month.
    public var introductoryOffer: SubscriptionOffer?
    public var promotionalOffers: [SubscriptionOffer]
    public var winBackOffers: [WinBackOffer]

    public init(
        kind: Kind, price: Decimal, priceCents: Int64, displayPrice: String, billingPeriod: SubscriptionPeriod,
        billingPeriodCount: Int, commitmentPrice: Decimal, commitmentPriceCents: Int64, commitmentDisplayPrice: String,
        introductoryOffer: SubscriptionOffer? = nil, promotionalOffers: [SubscriptionOffer] = [], winBackOffers: [WinBackOffer] = []
    ) {
        self.kind = kind
        self.price = price
        self.priceCents = priceCents
        self.displayPrice = displayPrice
        self.billingPeriod = billingPeriod
        self.billingPeriodCount = billingPeriodCount
        self.commitmentPrice = commitmentPrice
        self.commitmentPriceCents = commitmentPriceCents
        self.commitmentDisplayPrice = commitmentDisplayPrice
        self.introductoryOffer = introductoryOffer
        self.promotionalOffers = promotionalOffers
        self.winBackOffers = winBackOffers
    }

    /// The months a monthly plan commits to for a subscription of `period`: nil unless the period
    /// is whole months or years.
    static func months(in period: SubscriptionPeriod) -> Int? {
        switch period.unit {
        case .month: period.value
        case .year: period.value * 12
        default: nil
        }
    }
}

extension CatalogProduct {
    /// The billing plan of `kind`, if the product has it (a subscription whose file lists no
    /// plans has the up-front one).
    public func billingPlan(_ kind: BillingPlan.Kind) -> BillingPlan? {
        guard kind == .upFront, billingPlans.isEmpty, self.kind == .autoRenewable else { return billingPlans.first { $0.kind == kind } }
        return upFrontPlan
    }

    /// The plan that bills the product's price each period, with the product's offers.
    var upFrontPlan: BillingPlan {
        BillingPlan(
            kind: .upFront, price: price, priceCents: priceCents, displayPrice: displayPrice,
            billingPeriod: subscriptionPeriod ?? PaymentQueueEngine.defaultPeriod, billingPeriodCount: 1, commitmentPrice: price,
            commitmentPriceCents: priceCents, commitmentDisplayPrice: displayPrice, introductoryOffer: introductoryOffer,
            promotionalOffers: promotionalOffers, winBackOffers: winBackOffers)
    }

    /// The product as a buyer billed with `plan` has it: priced and renewed per billing period,
    /// with the plan's offers (the product itself for the up-front plan).
    func billed(with plan: BillingPlan?) -> CatalogProduct {
        guard let plan, plan.kind == .monthly else { return self }
        var product = self
        product.price = plan.price
        product.priceCents = plan.priceCents
        product.displayPrice = plan.displayPrice
        product.subscriptionPeriod = plan.billingPeriod
        product.introductoryOffer = plan.introductoryOffer
        product.promotionalOffers = plan.promotionalOffers
        product.winBackOffers = plan.winBackOffers
        return product
    }

    /// A plan as clients see it.
    func planRecord(_ plan: BillingPlan) -> ProductRecord.BillingPlan {
        let billed = billed(with: plan)
        return ProductRecord.BillingPlan(
            type: plan.kind, billingPeriod: plan.billingPeriod.description, priceCents: plan.priceCents,
            displayPrice: plan.displayPrice, commitmentPeriod: (subscriptionPeriod ?? plan.billingPeriod).description,
            commitmentPriceCents: plan.commitmentPriceCents, commitmentDisplayPrice: plan.commitmentDisplayPrice,
            introductoryOffer: plan.introductoryOffer.map(billed.offerRecord),
            promotionalOffers: plan.promotionalOffers.map(billed.offerRecord),
            winBackOffers: plan.winBackOffers.map { billed.offerRecord($0.offer) })
    }
}
