import Foundation
import StoreKitWire

extension Product.SubscriptionInfo {
    /// One way to pay for a subscription (`SubscriptionInfo.pricingTerms`): a billing plan, what
    /// each billing period costs, what the subscriber commits to, and the plan's offers.
    public struct PricingTerms: Hashable, Sendable {
        /// How the subscription is billed.
        public let billingPlanType: BillingPlanType
        /// The price charged each billing period, in the storefront's currency.
        public let billingPrice: Decimal
        /// `billingPrice` formatted for display, as the product's `displayPrice` is.
        public let billingDisplayPrice: String
        /// The length of one billing period (a month for `.monthly`).
        public let billingPeriod: BillingPeriod
        /// The commitment the subscriber agrees to: the whole price, over the subscription's period.
        public let commitmentInfo: CommitmentInfo
        /// The plan's introductory, promotional and win-back offers.
        public let subscriptionOffers: [Product.SubscriptionOffer]

        /// The plan's offers of one type.
        public subscript(offers type: Product.SubscriptionOffer.OfferType) -> [Product.SubscriptionOffer] {
            subscriptionOffers.filter { $0.type == type }
        }

        /// The terms of a plan of the daemon's record, priced in `currency` for `locale`; nil for
        /// a plan type this library does not know or a period it cannot read.
        init?(plan: ProductRecord.BillingPlan, currency: String, locale: String) {
            guard let period = Product.SubscriptionPeriod(iso8601: plan.billingPeriod),
                  let commitmentPeriod = Product.SubscriptionPeriod(iso8601: plan.commitmentPeriod) else { return nil }
            billingPlanType = switch plan.type {
            case .upFront: .upFront
            case .monthly: .monthly
            }
            billingPeriod = period
            billingPrice = Product.decimal(plan.displayPrice, cents: plan.priceCents)
            billingDisplayPrice = Self.formatted(billingPrice, currency: currency, locale: locale)
            let committed = Product.decimal(plan.commitmentDisplayPrice, cents: plan.commitmentPriceCents)
            commitmentInfo = CommitmentInfo(price: committed, displayPrice: Self.formatted(committed, currency: currency, locale: locale),
                                            period: commitmentPeriod)
            let offers: [(ProductRecord.Offer, Product.SubscriptionOffer.OfferType)] =
                (plan.introductoryOffer.map { [($0, .introductory)] } ?? []) + plan.promotionalOffers.map { ($0, .promotional) }
                + plan.winBackOffers.map { ($0, .winBack) }
            subscriptionOffers = offers.map {
                Product.SubscriptionOffer(record: $0.0, type: $0.1, currency: currency, locale: locale, fallbackPeriod: period)
            }
        }

        /// The one plan of a subscription whose catalogue lists none: up front, at its price and
        /// period, with its offers.
        init(upFront record: ProductRecord, period: Product.SubscriptionPeriod, offers: [Product.SubscriptionOffer]) {
            billingPlanType = .upFront
            billingPeriod = period
            billingPrice = Product.decimal(record.displayPrice, cents: record.priceCents)
            billingDisplayPrice = Self.formatted(billingPrice, currency: Self.currency(of: record), locale: record.locale)
            commitmentInfo = CommitmentInfo(price: billingPrice, displayPrice: billingDisplayPrice, period: period)
            subscriptionOffers = offers
        }

        /// The pricing terms of a subscription's record: its plans, or the up-front one (of the
        /// subscription's `period` and `offers`) when it lists none.
        static func terms(of record: ProductRecord, period: Product.SubscriptionPeriod, offers: [Product.SubscriptionOffer]) -> [PricingTerms] {
            guard !record.billingPlans.isEmpty else { return [PricingTerms(upFront: record, period: period, offers: offers)] }
            return record.billingPlans.compactMap { PricingTerms(plan: $0, currency: currency(of: record), locale: record.locale) }
        }

        static func currency(of record: ProductRecord) -> String { record.currencyCode.isEmpty ? "USD" : record.currencyCode }

        /// A price as the product's `displayPrice` is formatted: the storefront's currency in its locale.
        static func formatted(_ price: Decimal, currency: String, locale: String) -> String {
            price.formatted(.currency(code: currency).locale(Locale(identifier: locale)))
        }
    }
}
