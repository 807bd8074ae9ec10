import Foundation
import StoreKitEngine
import StoreKitLedger
import StoreKitTestSupport
import StoreKitWire
import Testing

/// Win-back offers (`winbackOffers`, with App Store Connect's eligibility: months paid, a window
/// of months since the subscription lapsed, a wait between offers), on each ledger: who may have
/// one, what its transaction says, and what the renewal info lists.
@Suite struct WinBackOfferTests {
    static let app = "com.example.news"
    static let buyer: UInt32 = 1000
    static let monthly = "news.monthly"
    static let comeBack = "news.monthly.free_month_back"
    static let longTimers = "news.monthly.long_timers"

    static let catalogJSON = """
    { "subscriptionGroups" : [ { "id" : "G1", "name" : "News", "subscriptions" : [
        { "productID" : "news.monthly", "type" : "RecurringSubscription", "displayPrice" : "4.99",
          "recurringSubscriptionPeriod" : "P1M", "groupNumber" : 1,
          "winbackOffers" : [
            { "offerID" : "news.monthly.free_month_back", "paymentMode" : "free", "subscriptionPeriod" : "P1M",
              "numberOfPeriods" : 1, "paidSubscriptionDurationInMonths" : 1,
              "timeSinceLastSubscribedInMonths" : { "minimum" : 1, "maximum" : 12 }, "waitBetweenOffersInMonths" : 12 },
            { "offerID" : "news.monthly.long_timers", "paymentMode" : "payUpFront", "subscriptionPeriod" : "P3M",
              "numberOfPeriods" : 1, "displayPrice" : "5.99", "paidSubscriptionDurationInMonths" : 24 } ] } ] } ] }
    """

    final class Store {
        let directory = TemporaryDirectory("skwinback")
        let store: any Ledger
        let engine: PaymentQueueEngine

        init(_ backend: LedgerBackend) throws {
            store = try backend.place(in: directory).open()
            engine = PaymentQueueEngine(store: store, catalogs: [app: try Catalog(json: Data(catalogJSON.utf8), path: "news.storekit")])
        }

        deinit {
            try? LedgerBackend.close(store)
            directory.remove()
        }

        func buy(winBack offer: String? = nil, uid: UInt32 = buyer) throws -> Outcome {
            let payment = ClientMessage.AddPayment(requestID: 1, key: "", productID: monthly, quantity: 1, winBackOfferID: offer)
            return try store.inUnit { try engine.addPayment(uid: uid, app: app, payment: payment) }
        }

        func advance(_ text: String) throws {
            _ = try store.inUnit { try engine.advanceClock(by: ClockDuration(text)!) }
        }

        func subscription() throws -> Subscription { try #require(try store.subscriptions(uid: buyer, app: app).first) }

        func renewalInfo() throws -> [String: JSONValue] {
            guard case .object(let members) = engine.renewalInfoPayload(try subscription(), environment: "Xcode", signedDate: 0) else { return [:] }
            return Dictionary(members, uniquingKeysWith: { first, _ in first })
        }
    }

    @Test("the catalogue's win-back offers reach clients with the product, in version 4")
    func offersInTheRecord() throws {
        let catalog = try Catalog(json: Data(Self.catalogJSON.utf8), path: "news.storekit")
        let product = try #require(catalog.product(Self.monthly))
        #expect(product.winBackOffers.map(\.offer.id) == [Self.comeBack, Self.longTimers])
        #expect(product.winBackOffers[0].lapsedMonths == 1...12 && product.winBackOffers[0].waitMonths == 12)
        #expect(product.winBackOffers[1].lapsedMonths == 0...Int.max && product.winBackOffers[1].paidMonths == 24)
        let record = product.record(locale: "en_US", currencyCode: "USD")
        #expect(record.winBackOffers.map(\.id) == [Self.comeBack, Self.longTimers])
        #expect(record.winBackOffers.map(\.paymentMode) == [.freeTrial, .payUpFront])
        let bad = Self.catalogJSON.replacingOccurrences(of: "\"minimum\" : 1, \"maximum\" : 12", with: "\"minimum\" : 13, \"maximum\" : 12")
        #expect(throws: CatalogError.self) { try Catalog(json: Data(bad.utf8), path: "bad.storekit") }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aLapsedSubscriberWinsBackOnce(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let never = try store.buy(winBack: Self.comeBack, uid: 2000)
        #expect(never.code == .storeKit && never.detail == StoreKitErrorCode.ineligibleForOffer.rawValue, "\(never.message)")

        #expect(try store.buy().code == .ok)
        let subscribed = try store.buy(winBack: Self.comeBack)
        #expect(subscribed.detail == StoreKitErrorCode.ineligibleForOffer.rawValue && subscribed.message.contains("not lapsed"), "\(subscribed.message)")
        // Two months paid, then it lapses at the end of the period.
        try store.advance("P2M")
        #expect(try store.store.inUnit { try store.engine.setAutoRenew(false, .transaction(try store.subscription().originalID)) }.code == .ok)
        try store.advance("P1M")
        #expect(try store.subscription().status == .expired)
        let tooSoon = try store.buy(winBack: Self.comeBack)
        #expect(tooSoon.detail == StoreKitErrorCode.ineligibleForOffer.rawValue && tooSoon.message.contains("lapsed 0 months ago"), "\(tooSoon.message)")
        #expect(try store.renewalInfo()["eligibleWinBackOfferIds"] == nil)

        try store.advance("P1M")
        #expect(try store.renewalInfo()["eligibleWinBackOfferIds"] == .array([.string(Self.comeBack)]), "not the long-timers' offer (24 months paid)")
        let unknown = try store.buy(winBack: "news.monthly.nothing")
        #expect(unknown.detail == StoreKitErrorCode.invalidOfferIdentifier.rawValue)
        let longTimers = try store.buy(winBack: Self.longTimers)
        #expect(longTimers.detail == StoreKitErrorCode.ineligibleForOffer.rawValue && longTimers.message.contains("needs 24"), "\(longTimers.message)")

        let twoOffers = ClientMessage.AddPayment(requestID: 1, key: "", productID: Self.monthly, quantity: 1,
                                                 discount: .init(offerID: "x", keyID: "k", nonce: "n", signature: "s", timestamp: 1),
                                                 winBackOfferID: Self.comeBack)
        let refused = try store.store.inUnit { try store.engine.addPayment(uid: Self.buyer, app: Self.app, payment: twoOffers) }
        #expect(refused.detail == StoreKitErrorCode.missingOfferParams.rawValue, "one offer a payment: \(refused.message)")

        let won = try store.buy(winBack: Self.comeBack)
        #expect(won.code == .ok, "\(won.message)")
        let record = try #require(try store.store.transaction(id: won.value))
        guard case .object(let members)? = try store.engine.transactionPayload(record, environment: "Xcode", signedDate: 0) else {
            Issue.record("no payload")
            return
        }
        let payload = Dictionary(members, uniquingKeysWith: { first, _ in first })
        #expect(payload["offerType"] == .int(4) && payload["offerIdentifier"] == .string(Self.comeBack))
        #expect(payload["offerDiscountType"] == .string("FREE_TRIAL") && payload["price"] == .int(0))

        // Lapsed again a month later: the next win-back offer waits twelve months.
        #expect(try store.store.inUnit { try store.engine.setAutoRenew(false, .transaction(try store.subscription().originalID)) }.code == .ok)
        try store.advance("P2M")
        let again = try store.buy(winBack: Self.comeBack)
        #expect(again.detail == StoreKitErrorCode.ineligibleForOffer.rawValue && again.message.contains("waits 12 months"), "\(again.message)")
    }
}
