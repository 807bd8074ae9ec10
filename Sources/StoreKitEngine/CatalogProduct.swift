import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import StoreKitWire

/// One product of a `.storekit` catalogue: what Xcode's editor shows for it.
public struct CatalogProduct: Sendable, Equatable {
    /// A localized name and description (`localizations[]` in the file).
    public struct Localization: Sendable, Equatable {
        /// `en_US` style.
        public var locale: String
        public var displayName: String
        public var description: String

        public init(locale: String, displayName: String, description: String) {
            self.locale = locale
            self.displayName = displayName
            self.description = description
        }
    }

    public var id: String
    public var kind: ProductRecord.Kind
    /// The name in App Store Connect; never shown to buyers, used when a product has no localization.
    public var referenceName: String
    /// The price exactly as written (`displayPrice` in the file).
    public var price: Decimal
    /// `price` × 100, rounded half up to a whole number (`ProductRecord.priceCents`).
    public var priceCents: Int64
    /// The price as the file spells it, e.g. `0.99`.
    public var displayPrice: String
    public var familyShareable: Bool
    public var localizations: [Localization]
    /// Auto-renewable subscriptions only: the group's `id`.
    public var subscriptionGroupID: String?
    /// Auto-renewable subscriptions only: `groupNumber`, 1 is the highest level of service.
    public var groupLevel: Int?
    /// Auto-renewable subscriptions only (`recurringSubscriptionPeriod`).
    public var subscriptionPeriod: SubscriptionPeriod?
    public var introductoryOffer: SubscriptionOffer?
    /// The offers an app can apply with `SKPaymentDiscount` (`adHocOffers` in the file).
    public var promotionalOffers: [SubscriptionOffer]
    /// Auto-renewable subscriptions only: the offers for lapsed subscribers (`winbackOffers`).
    public var winBackOffers: [WinBackOffer] = []
    /// Auto-renewable subscriptions only: the enabled billing plans (`billingPlans`), the
    /// up-front one first; empty when the file lists none (the product is billed up front).
    public var billingPlans: [BillingPlan] = []
    /// Auto-renewable subscriptions only: the group's reference name and localizations (its
    /// `displayName` is StoreKit 2's `groupDisplayName`).
    public var groupName: String?
    public var groupLocalizations: [Localization] = []

    public init(
        id: String, kind: ProductRecord.Kind, referenceName: String, price: Decimal, priceCents: Int64,
        displayPrice: String, familyShareable: Bool = false, localizations: [Localization] = [],
        subscriptionGroupID: String? = nil, groupLevel: Int? = nil, subscriptionPeriod: SubscriptionPeriod? = nil,
        introductoryOffer: SubscriptionOffer? = nil, promotionalOffers: [SubscriptionOffer] = []
    ) {
        self.id = id
        self.kind = kind
        self.referenceName = referenceName
        self.price = price
        self.priceCents = priceCents
        self.displayPrice = displayPrice
        self.familyShareable = familyShareable
        self.localizations = localizations
        self.subscriptionGroupID = subscriptionGroupID
        self.groupLevel = groupLevel
        self.subscriptionPeriod = subscriptionPeriod
        self.introductoryOffer = introductoryOffer
        self.promotionalOffers = promotionalOffers
    }

    /// The localization for `locale`: an exact match (`en_US` = `en-US`), else one of the same
    /// language, else the first one; nil when the product has none.
    public func localization(for locale: String) -> Localization? {
        Self.localization(of: localizations, for: locale)
    }

    static func localization(of localizations: [Localization], for locale: String) -> Localization? {
        let wanted = Self.normalizedLocale(locale)
        if let exact = localizations.first(where: { Self.normalizedLocale($0.locale) == wanted }) { return exact }
        let language = Self.language(of: wanted)
        if let sameLanguage = localizations.first(where: { Self.language(of: Self.normalizedLocale($0.locale)) == language }) {
            return sameLanguage
        }
        return localizations.first
    }

    /// The product as clients see it, localized for `locale` (see `localization(for:)`); a missing
    /// or empty display name falls back to `referenceName`.
    public func record(locale: String, currencyCode: String) -> ProductRecord {
        let localization = localization(for: locale)
        let title = localization.map(\.displayName).flatMap { $0.isEmpty ? nil : $0 } ?? referenceName
        return ProductRecord(
            productID: id, kind: kind, localizedTitle: title,
            localizedDescription: localization?.description ?? "", priceCents: priceCents,
            displayPrice: displayPrice, currencyCode: currencyCode, locale: locale,
            subscriptionGroupID: subscriptionGroupID, subscriptionPeriod: subscriptionPeriod?.description,
            familyShareable: familyShareable, subscriptionGroupLevel: groupLevel.map { Int32(clamping: $0) },
            introductoryOffer: kind == .autoRenewable ? introductoryOffer.map(offerRecord) : nil,
            promotionalOffers: kind == .autoRenewable ? promotionalOffers.map(offerRecord) : [],
            subscriptionGroupDisplayName: kind == .autoRenewable ? groupDisplayName(locale: locale) : nil,
            winBackOffers: kind == .autoRenewable ? winBackOffers.map { offerRecord($0.offer) } : [],
            billingPlans: kind == .autoRenewable ? billingPlans.map(planRecord) : [])
    }

    /// The group's display name for `locale` (as `localization(for:)` picks), else its reference name.
    func groupDisplayName(locale: String) -> String? {
        let name = Self.localization(of: groupLocalizations, for: locale)?.displayName
        return name.flatMap { $0.isEmpty ? nil : $0 } ?? groupName
    }

    /// An offer as clients see it; an offer without a period of its own lasts the subscription's period.
    func offerRecord(_ offer: SubscriptionOffer) -> ProductRecord.Offer {
        let mode: ProductRecord.Offer.PaymentMode = switch offer.paymentMode {
        case SubscriptionOffer.freeTrial: .freeTrial
        case SubscriptionOffer.payUpFront: .payUpFront
        default: .payAsYouGo
        }
        return ProductRecord.Offer(
            id: offer.id, paymentMode: mode, period: (offer.period ?? subscriptionPeriod)?.description ?? "",
            periodCount: Int32(clamping: offer.periodCount), priceCents: offer.priceCents, displayPrice: offer.displayPrice)
    }

    private static func normalizedLocale(_ locale: String) -> String {
        locale.replacing("-", with: "_").lowercased()
    }

    private static func language(of normalizedLocale: String) -> Substring {
        normalizedLocale.prefix(while: { $0 != "_" })
    }
}

/// A win-back offer (`winbackOffers` in the file, as App Store Connect sets them up): an offer
/// for a buyer whose subscription of the group lapsed, once they paid for it long enough, within a
/// window after it lapsed, and not again before a wait.
public struct WinBackOffer: Sendable, Equatable {
    public var offer: SubscriptionOffer
    /// Months the buyer paid for the subscription, at least (`paidSubscriptionDurationInMonths`).
    public var paidMonths: Int
    /// Months since the subscription lapsed: at least `lapsedMonths.lowerBound`, at most its upper
    /// bound (`timeSinceLastSubscribedInMonths` `minimum`, `maximum`).
    public var lapsedMonths: ClosedRange<Int>
    /// Months before the buyer may have a win-back offer of the group again (`waitBetweenOffersInMonths`).
    public var waitMonths: Int

    public init(offer: SubscriptionOffer, paidMonths: Int = 0, lapsedMonths: ClosedRange<Int> = 0...Int.max, waitMonths: Int = 0) {
        self.offer = offer
        self.paidMonths = paidMonths
        self.lapsedMonths = lapsedMonths
        self.waitMonths = waitMonths
    }
}

/// An introductory, promotional or win-back offer of an auto-renewable subscription.
public struct SubscriptionOffer: Sendable, Equatable {
    /// The three payment modes, spelled as StoreKit 2 spells them.
    public static let freeTrial = "freeTrial"
    public static let payAsYouGo = "payAsYouGo"
    public static let payUpFront = "payUpFront"

    /// The offer identifier apps pass in `SKPaymentDiscount` (`offerID`); nil for introductory offers.
    public var id: String?
    /// `freeTrial`, `payAsYouGo` or `payUpFront` (files say `free` for a free trial).
    public var paymentMode: String
    /// The length of one offer period (`subscriptionPeriod`).
    public var period: SubscriptionPeriod?
    /// How many periods the offer lasts (`numberOfPeriods`).
    public var periodCount: Int
    /// The price of one offer period (pay as you go) or of the whole offer (pay up front); `0.00` for free trials.
    public var displayPrice: String
    /// `displayPrice` × 100.
    public var priceCents: Int64

    public init(
        id: String? = nil, paymentMode: String, period: SubscriptionPeriod?, periodCount: Int = 1,
        displayPrice: String = "0.00", priceCents: Int64 = 0
    ) {
        self.id = id
        self.paymentMode = paymentMode
        self.period = period
        self.periodCount = periodCount
        self.displayPrice = displayPrice
        self.priceCents = priceCents
    }
}
