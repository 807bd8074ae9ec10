/// A product of the catalogue as clients see it (`SKProduct`, StoreKit 2's `Product`).
public struct ProductRecord: Sendable, Equatable {
    public enum Kind: UInt8, Sendable, CaseIterable {
        case consumable = 0
        case nonConsumable = 1
        case autoRenewable = 2
        case nonRenewing = 3

        /// The name used in JSON output (StoreKit 2's `Product.ProductType` spelling).
        public var name: String {
            switch self {
            case .consumable: "consumable"
            case .nonConsumable: "nonConsumable"
            case .autoRenewable: "autoRenewable"
            case .nonRenewing: "nonRenewing"
            }
        }
    }

    /// An introductory or promotional offer of an auto-renewable subscription
    /// (`SKProductDiscount`, StoreKit 2's `Product.SubscriptionOffer`).
    public struct Offer: Sendable, Equatable {
        /// `SKProductDiscount.PaymentMode`'s raw values.
        public enum PaymentMode: UInt8, Sendable, CaseIterable {
            case payAsYouGo = 0
            case payUpFront = 1
            case freeTrial = 2
        }

        /// The offer identifier (`adHocOffers[].offerID`); nil for an introductory offer.
        public var id: String?
        public var paymentMode: PaymentMode
        /// ISO 8601 duration of one offer period, e.g. `P1W`.
        public var period: String
        /// How many periods the offer lasts.
        public var periodCount: Int32
        /// Price of one period (pay as you go) or of the whole offer (pay up front) × 100; 0 for a free trial.
        public var priceCents: Int64
        /// The price as the catalogue writes it, e.g. `2.99`.
        public var displayPrice: String

        public init(
            id: String? = nil, paymentMode: PaymentMode, period: String, periodCount: Int32 = 1,
            priceCents: Int64 = 0, displayPrice: String = "0.00"
        ) {
            self.id = id
            self.paymentMode = paymentMode
            self.period = period
            self.periodCount = periodCount
            self.priceCents = priceCents
            self.displayPrice = displayPrice
        }

        /// Smallest encoding: absent `opt` 1 + `u8` 1 + empty string 4 + `i32` 4 + `i64` 8 + empty string 4.
        static let minimumEncodedSize = 22

        func encode(into writer: inout WireWriter) {
            writer.optionalString(id)
            writer.u8(paymentMode.rawValue)
            writer.string(period)
            writer.i32(periodCount)
            writer.i64(priceCents)
            writer.string(displayPrice)
        }

        static func decode(from reader: inout WireReader) throws(WireError) -> Offer {
            let id = try reader.optionalString()
            let rawMode = try reader.u8()
            guard let mode = PaymentMode(rawValue: rawMode) else { throw WireError(.invalidValue("offer payment mode \(rawMode)")) }
            return Offer(
                id: id, paymentMode: mode, period: try reader.string(), periodCount: try reader.i32(),
                priceCents: try reader.i64(), displayPrice: try reader.string())
        }
    }

    /// A billing plan of an auto-renewable subscription (StoreKit 2's
    /// `Product.SubscriptionInfo.PricingTerms`; version 5).
    public struct BillingPlan: Sendable, Equatable {
        /// How the plan bills; the raw values are the wire's.
        public enum PlanType: UInt8, Sendable, CaseIterable {
            /// One payment a period, the product's price (`BILLED_UPFRONT`).
            case upFront = 0
            /// A payment a month, committing to the product's whole period (`MONTHLY`).
            case monthly = 1

            /// The name in `.storekit` files and signed data: `BILLED_UPFRONT` or `MONTHLY`.
            public var name: String {
                switch self {
                case .upFront: "BILLED_UPFRONT"
                case .monthly: "MONTHLY"
                }
            }

            public init?(name: String) {
                guard let found = Self.allCases.first(where: { $0.name == name }) else { return nil }
                self = found
            }
        }

        public var type: PlanType
        /// ISO 8601 duration of one billing period (`P1M` for a monthly plan).
        public var billingPeriod: String
        /// What one billing period costs × 100, and as the catalogue writes it.
        public var priceCents: Int64
        public var displayPrice: String
        /// ISO 8601 duration of the commitment (the product's period).
        public var commitmentPeriod: String
        /// What the whole commitment costs × 100, and as the catalogue writes it.
        public var commitmentPriceCents: Int64
        public var commitmentDisplayPrice: String
        /// The plan's offers (an up-front plan's are the product's).
        public var introductoryOffer: Offer?
        public var promotionalOffers: [Offer]
        public var winBackOffers: [Offer]

        public init(
            type: PlanType, billingPeriod: String, priceCents: Int64, displayPrice: String, commitmentPeriod: String,
            commitmentPriceCents: Int64, commitmentDisplayPrice: String, introductoryOffer: Offer? = nil,
            promotionalOffers: [Offer] = [], winBackOffers: [Offer] = []
        ) {
            self.type = type
            self.billingPeriod = billingPeriod
            self.priceCents = priceCents
            self.displayPrice = displayPrice
            self.commitmentPeriod = commitmentPeriod
            self.commitmentPriceCents = commitmentPriceCents
            self.commitmentDisplayPrice = commitmentDisplayPrice
            self.introductoryOffer = introductoryOffer
            self.promotionalOffers = promotionalOffers
            self.winBackOffers = winBackOffers
        }

        /// Smallest encoding: `u8` 1 + four empty strings 16 + two `i64` 16 + absent `opt` 1 + two empty lists 8.
        static let minimumEncodedSize = 42

        func encode(into writer: inout WireWriter) {
            writer.u8(type.rawValue)
            writer.string(billingPeriod)
            writer.i64(priceCents)
            writer.string(displayPrice)
            writer.string(commitmentPeriod)
            writer.i64(commitmentPriceCents)
            writer.string(commitmentDisplayPrice)
            ProductRecord.encode(introductoryOffer, promotionalOffers, winBackOffers, into: &writer)
        }

        static func decode(from reader: inout WireReader) throws(WireError) -> BillingPlan {
            let rawType = try reader.u8()
            guard let type = PlanType(rawValue: rawType) else { throw WireError(.invalidValue("billing plan type \(rawType)")) }
            var plan = BillingPlan(
                type: type, billingPeriod: try reader.string(), priceCents: try reader.i64(), displayPrice: try reader.string(),
                commitmentPeriod: try reader.string(), commitmentPriceCents: try reader.i64(),
                commitmentDisplayPrice: try reader.string())
            (plan.introductoryOffer, plan.promotionalOffers, plan.winBackOffers) = try ProductRecord.decodeOffers(from: &reader)
            return plan
        }
    }

    public var productID: String
    public var kind: Kind
    public var localizedTitle: String
    public var localizedDescription: String
    /// Price in the smallest unit of the currency scaled by 1/100 (e.g. "0.99" → 99).
    public var priceCents: Int64
    public var displayPrice: String
    public var currencyCode: String
    public var locale: String
    public var subscriptionGroupID: String?
    /// ISO 8601 duration such as `P1M`.
    public var subscriptionPeriod: String?
    public var familyShareable: Bool
    /// Auto-renewable subscriptions only: the level in the group (`groupNumber`), 1 the highest service.
    public var subscriptionGroupLevel: Int32?
    /// Auto-renewable subscriptions only: the offer for buyers who never subscribed in the group.
    public var introductoryOffer: Offer?
    /// Auto-renewable subscriptions only: the offers an app may apply (`adHocOffers`).
    public var promotionalOffers: [Offer]
    /// Auto-renewable subscriptions only: the group's display name in the record's locale
    /// (version 4).
    public var subscriptionGroupDisplayName: String?
    /// Auto-renewable subscriptions only: the offers for lapsed subscribers (version 4).
    public var winBackOffers: [Offer]
    /// Auto-renewable subscriptions only: the billing plans, up front first (version 5); empty
    /// when the catalogue lists none (the product is billed up front, at its price and period).
    public var billingPlans: [BillingPlan]

    public init(
        productID: String, kind: Kind, localizedTitle: String, localizedDescription: String,
        priceCents: Int64, displayPrice: String, currencyCode: String, locale: String,
        subscriptionGroupID: String? = nil, subscriptionPeriod: String? = nil, familyShareable: Bool = false,
        subscriptionGroupLevel: Int32? = nil, introductoryOffer: Offer? = nil, promotionalOffers: [Offer] = [],
        subscriptionGroupDisplayName: String? = nil, winBackOffers: [Offer] = [], billingPlans: [BillingPlan] = []
    ) {
        self.productID = productID
        self.kind = kind
        self.localizedTitle = localizedTitle
        self.localizedDescription = localizedDescription
        self.priceCents = priceCents
        self.displayPrice = displayPrice
        self.currencyCode = currencyCode
        self.locale = locale
        self.subscriptionGroupID = subscriptionGroupID
        self.subscriptionPeriod = subscriptionPeriod
        self.familyShareable = familyShareable
        self.subscriptionGroupLevel = subscriptionGroupLevel
        self.introductoryOffer = introductoryOffer
        self.promotionalOffers = promotionalOffers
        self.subscriptionGroupDisplayName = subscriptionGroupDisplayName
        self.winBackOffers = winBackOffers
        self.billingPlans = billingPlans
    }
}

extension ProductRecord {
    /// Smallest encoding in versions 2 and 3: the 36 bytes of the first eleven fields, two absent
    /// `opt` 1 + 1, an empty list 4 (version 4 adds an absent `opt` 1 and an empty list 4): a
    /// lower bound for all.
    public static let minimumEncodedSize = 42

    /// Version 1 of the protocol ends the record at `family_shareable`: no group level, no offers;
    /// versions 2 and 3 at the promotional offers: no group display name; version 4 at the
    /// win-back offers: no billing plans.
    public func encode(into writer: inout WireWriter, version: UInt16 = ProtocolVersion.current) {
        writer.string(productID)
        writer.u8(kind.rawValue)
        writer.string(localizedTitle)
        writer.string(localizedDescription)
        writer.i64(priceCents)
        writer.string(displayPrice)
        writer.string(currencyCode)
        writer.string(locale)
        writer.optionalString(subscriptionGroupID)
        writer.optionalString(subscriptionPeriod)
        writer.bool(familyShareable)
        guard version >= 2 else { return }
        writer.optionalI32(subscriptionGroupLevel)
        if let introductoryOffer {
            writer.u8(1)
            introductoryOffer.encode(into: &writer)
        } else {
            writer.u8(0)
        }
        writer.u32(UInt32(promotionalOffers.count))
        for offer in promotionalOffers { offer.encode(into: &writer) }
        guard version >= ProtocolVersion.offerJWS else { return }
        writer.optionalString(subscriptionGroupDisplayName)
        writer.u32(UInt32(winBackOffers.count))
        for offer in winBackOffers { offer.encode(into: &writer) }
        guard version >= ProtocolVersion.billingPlans else { return }
        writer.u32(UInt32(billingPlans.count))
        for plan in billingPlans { plan.encode(into: &writer) }
    }

    /// A billing plan's offers: an optional introductory offer, then the promotional and the
    /// win-back offers, each list counted.
    static func encode(_ introductory: Offer?, _ promotional: [Offer], _ winBack: [Offer], into writer: inout WireWriter) {
        if let introductory {
            writer.u8(1)
            introductory.encode(into: &writer)
        } else {
            writer.u8(0)
        }
        for offers in [promotional, winBack] {
            writer.u32(UInt32(offers.count))
            for offer in offers { offer.encode(into: &writer) }
        }
    }

    static func decodeOffers(from reader: inout WireReader) throws(WireError) -> (Offer?, [Offer], [Offer]) {
        var introductory: Offer?
        switch try reader.u8() {
        case 0: break
        case 1: introductory = try Offer.decode(from: &reader)
        case let other: throw WireError(.invalidValue("optional marker \(other)"))
        }
        var lists: [[Offer]] = []
        for _ in 0..<2 {
            let count = try reader.count(minimumElementSize: Offer.minimumEncodedSize)
            var offers: [Offer] = []
            offers.reserveCapacity(count)
            for _ in 0..<count { offers.append(try Offer.decode(from: &reader)) }
            lists.append(offers)
        }
        return (introductory, lists[0], lists[1])
    }

    public static func decode(from reader: inout WireReader, version: UInt16 = ProtocolVersion.current) throws(WireError) -> ProductRecord {
        let productID = try reader.string()
        let rawKind = try reader.u8()
        guard let kind = Kind(rawValue: rawKind) else { throw WireError(.invalidValue("product type \(rawKind)")) }
        var record = ProductRecord(
            productID: productID, kind: kind, localizedTitle: try reader.string(),
            localizedDescription: try reader.string(), priceCents: try reader.i64(),
            displayPrice: try reader.string(), currencyCode: try reader.string(), locale: try reader.string(),
            subscriptionGroupID: try reader.optionalString(), subscriptionPeriod: try reader.optionalString(),
            familyShareable: try reader.bool())
        guard version >= 2 else { return record }
        record.subscriptionGroupLevel = try reader.optionalI32()
        switch try reader.u8() {
        case 0: break
        case 1: record.introductoryOffer = try Offer.decode(from: &reader)
        case let other: throw WireError(.invalidValue("optional marker \(other)"))
        }
        let count = try reader.count(minimumElementSize: Offer.minimumEncodedSize)
        record.promotionalOffers.reserveCapacity(count)
        for _ in 0..<count { record.promotionalOffers.append(try Offer.decode(from: &reader)) }
        guard version >= ProtocolVersion.offerJWS else { return record }
        record.subscriptionGroupDisplayName = try reader.optionalString()
        let winBackCount = try reader.count(minimumElementSize: Offer.minimumEncodedSize)
        record.winBackOffers.reserveCapacity(winBackCount)
        for _ in 0..<winBackCount { record.winBackOffers.append(try Offer.decode(from: &reader)) }
        guard version >= ProtocolVersion.billingPlans else { return record }
        let planCount = try reader.count(minimumElementSize: BillingPlan.minimumEncodedSize)
        record.billingPlans.reserveCapacity(planCount)
        for _ in 0..<planCount { record.billingPlans.append(try BillingPlan.decode(from: &reader)) }
        return record
    }
}
