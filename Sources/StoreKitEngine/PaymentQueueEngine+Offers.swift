import StoreKitLedger
import StoreKitWire

// The offer a subscription's transaction was bought or renewed with (an introductory, a
// promotional or a win-back one): kept per transaction in the ledger's settings (`offer.ID`, in both ledgers and
// a fleet, with no change to their tables), and told in its signed payload as Apple's are
// (`offerType`, `offerIdentifier`, `offerDiscountType`, `offerPeriod`, and the offer's `price`).

/// The offer of one transaction.
public struct TransactionOffer: Sendable, Equatable {
    /// Apple's `offerType`: 1 introductory, 2 promotional, 4 win-back (3, an offer code, is never made here).
    public enum Kind: Int, Sendable {
        case introductory = 1
        case promotional = 2
        case winBack = 4
    }

    public var kind: Kind
    /// The promotional or win-back offer's identifier (nil for an introductory offer).
    public var id: String?
    /// Apple's `offerDiscountType`: `FREE_TRIAL`, `PAY_AS_YOU_GO` or `PAY_UP_FRONT`.
    public var discountType: String
    /// The `discountType` of a free trial.
    public static let freeTrial = "FREE_TRIAL"
    /// The offer's whole length (`P1W`; `P3M` for three monthly periods), as Apple's `offerPeriod`.
    public var period: String?
    /// What the period was bought for, in milli-units of the currency (the payload's `price`): 0
    /// for a free trial, the offer's price of one period (pay as you go) or of the whole offer
    /// (pay up front).
    public var priceMillis: Int64

    init(_ offer: SubscriptionOffer, kind: Kind) {
        self.kind = kind
        id = kind == .introductory ? nil : offer.id
        discountType = switch offer.paymentMode {
        case SubscriptionOffer.freeTrial: Self.freeTrial
        case SubscriptionOffer.payUpFront: "PAY_UP_FRONT"
        default: "PAY_AS_YOU_GO"
        }
        period = offer.period.flatMap { period in
            let (length, overflow) = period.value.multipliedReportingOverflow(by: max(offer.periodCount, 1))
            return overflow ? nil : "P\(length)\(period.unit.designator)"
        }
        priceMillis = offer.paymentMode == SubscriptionOffer.freeTrial ? 0 : offer.priceCents * 10
    }

    /// `KIND\tID\tDISCOUNT\tPERIOD\tPRICE`, as the setting holds it.
    var stored: String { "\(kind.rawValue)\t\(id ?? "")\t\(discountType)\t\(period ?? "")\t\(priceMillis)" }

    init?(stored text: String) {
        let parts = text.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 5, let number = Int(parts[0]), let kind = Kind(rawValue: number),
              let price = Int64(parts[4]) else { return nil }
        self.kind = kind
        id = parts[1].isEmpty ? nil : parts[1]
        discountType = parts[2]
        period = parts[3].isEmpty ? nil : parts[3]
        priceMillis = price
    }

    /// The members of a signed transaction that name it.
    var payloadMembers: [(String, JSONValue)] {
        var members: [(String, JSONValue)] = [("offerType", .int(Int64(kind.rawValue))), ("offerDiscountType", .string(discountType))]
        if let id { members.append(("offerIdentifier", .string(id))) }
        if let period { members.append(("offerPeriod", .string(period))) }
        return members
    }
}

extension PaymentQueueEngine {
    static func offerKey(_ transactionID: UInt64) -> String { "offer.\(transactionID)" }

    /// Keeps the offer transaction `transactionID` was bought or renewed with.
    func recordOffer(_ offer: SubscriptionOffer, type: TransactionOffer.Kind, of transactionID: UInt64) throws(LedgerError) {
        try store.setSetting(Self.offerKey(transactionID), TransactionOffer(offer, kind: type).stored)
    }

    /// The offers of `transactionIDs` (those that have one), read at once.
    public func offers(of transactionIDs: [UInt64]) throws(LedgerError) -> [UInt64: TransactionOffer] {
        let stored = try store.settings(keys: transactionIDs.map(Self.offerKey))
        var offers: [UInt64: TransactionOffer] = [:]
        for id in transactionIDs {
            if let offer = stored[Self.offerKey(id)].flatMap(TransactionOffer.init(stored:)) { offers[id] = offer }
        }
        return offers
    }

    /// The offer transaction `transactionID` was bought or renewed with, if any.
    public func offer(of transactionID: UInt64) throws(LedgerError) -> TransactionOffer? {
        try store.setting(Self.offerKey(transactionID)).flatMap(TransactionOffer.init(stored:))
    }
}

// A purchase that waits (an Ask to Buy request, an interrupted purchase) keeps the offer it was
// asked with, and the app server's word on the introductory offer, until it completes: in the
// ledger's settings (`offer.wait.ID`, ID the waiting transaction's), dropped when it fails.

/// What a waiting purchase was asked with.
struct WaitingOffer: Equatable {
    var kind: TransactionOffer.Kind
    /// The promotional or win-back offer's identifier; nil for none.
    var offerID: String?
    /// A signed eligibility's answer; nil when there was none.
    var introductoryOfferAllowed: Bool?

    /// `KIND\tID\tALLOWED` (ALLOWED `1`, `0` or empty).
    var stored: String {
        "\(kind.rawValue)\t\(offerID ?? "")\t\(introductoryOfferAllowed.map { $0 ? "1" : "0" } ?? "")"
    }

    init(kind: TransactionOffer.Kind, offerID: String?, introductoryOfferAllowed: Bool?) {
        self.kind = kind
        self.offerID = offerID
        self.introductoryOfferAllowed = introductoryOfferAllowed
    }

    init?(stored text: String) {
        let parts = text.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let number = Int(parts[0]), let kind = TransactionOffer.Kind(rawValue: number) else { return nil }
        self.kind = kind
        offerID = parts[1].isEmpty ? nil : parts[1]
        introductoryOfferAllowed = switch parts[2] {
        case "1": true
        case "0": false
        default: nil
        }
    }
}

extension PaymentQueueEngine {
    static func waitingOfferKey(_ transactionID: UInt64) -> String { "offer.wait.\(transactionID)" }

    /// Keeps what the waiting purchase `transactionID` of `product` was asked with, if anything.
    func keepWaitingOffer(_ promotion: SubscriptionOffer?, kind: TransactionOffer.Kind, introductoryOfferAllowed: Bool?,
                          product: CatalogProduct, of transactionID: UInt64) throws(LedgerError) {
        guard product.kind == .autoRenewable, promotion != nil || introductoryOfferAllowed != nil else { return }
        let waiting = WaitingOffer(kind: kind, offerID: promotion?.id, introductoryOfferAllowed: introductoryOfferAllowed)
        try store.setSetting(Self.waitingOfferKey(transactionID), waiting.stored)
    }

    /// What the waiting purchase `transactionID` was asked with, forgotten here: the offer as the
    /// catalogue has it now (nil when the catalogue no longer lists it: the purchase completes at
    /// the product's price), its kind, and the introductory offer's eligibility.
    func takeWaitingOffer(of transactionID: UInt64, product: CatalogProduct) throws(LedgerError)
        -> (promotion: SubscriptionOffer?, kind: TransactionOffer.Kind, introductoryOfferAllowed: Bool?)
    {
        let key = Self.waitingOfferKey(transactionID)
        guard let text = try store.setting(key) else { return (nil, .promotional, nil) }
        try store.setSetting(key, nil)
        guard let waiting = WaitingOffer(stored: text) else { return (nil, .promotional, nil) }
        let offers = waiting.kind == .winBack ? product.winBackOffers.map(\.offer) : product.promotionalOffers
        let promotion = waiting.offerID.flatMap { id in offers.first { $0.id == id } }
        return (promotion, waiting.kind, waiting.introductoryOfferAllowed)
    }

    /// Forgets what a waiting purchase that failed was asked with.
    func dropWaitingOffer(of transactionID: UInt64) throws(LedgerError) {
        let key = Self.waitingOfferKey(transactionID)
        if try store.setting(key) != nil { try store.setSetting(key, nil) }
    }
}
