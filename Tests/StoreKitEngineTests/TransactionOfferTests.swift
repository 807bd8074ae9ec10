import StoreKitEngine
import StoreKitLedger
import StoreKitTestSupport
import StoreKitWire
import Testing

/// The offer a subscription's transaction was bought or renewed with, kept per transaction and
/// told in its signed payload as Apple's (`offerType`, `offerIdentifier`, `offerDiscountType`,
/// `offerPeriod`), on each ledger.
@Suite struct TransactionOfferTests {
    static let app = "com.example.game"
    static let buyer: UInt32 = 1000
    static let comeback = "com.example.game.premium.monthly.comeback"

    final class Store {
        let directory = TemporaryDirectory("skoffer")
        let store: any Ledger
        let engine: PaymentQueueEngine

        init(_ backend: LedgerBackend) throws {
            store = try backend.place(in: directory).open()
            engine = PaymentQueueEngine(store: store, catalogs: [app: try Catalog.load(path: SampleCatalog.path)])
        }

        deinit {
            try? LedgerBackend.close(store)
            directory.remove()
        }

        func buy(_ productID: String, offer: String? = nil, askingParent: Bool = false, introductoryOfferAllowed: Bool? = nil)
            throws -> TransactionRecord
        {
            let discount = offer.map { ClientMessage.Discount(offerID: $0, keyID: "KEY", nonce: "n", signature: "s", timestamp: 0) }
            let payment = ClientMessage.AddPayment(requestID: 1, key: "", productID: productID, quantity: 1,
                                                   simulatesAskToBuy: askingParent, discount: discount)
            let outcome = try store.inUnit {
                try engine.addPayment(uid: buyer, app: app, payment: payment, introductoryOfferAllowed: introductoryOfferAllowed)
            }
            #expect(outcome.code == .ok, "\(outcome.message)")
            return try #require(try store.transaction(id: outcome.value))
        }

        /// The payload's members that name an offer.
        func offerMembers(_ record: TransactionRecord) throws -> [String: String] {
            guard case .object(let members)? = try engine.transactionPayload(record, environment: "Xcode", signedDate: 0) else { return [:] }
            var result: [String: String] = [:]
            for (key, value) in members where key.hasPrefix("offer") || key == "price" {
                switch value {
                case .string(let text): result[key] = text
                case .int(let number): result[key] = String(number)
                default: result[key] = "?"
                }
            }
            return result
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func anIntroductoryOfferIsToldInItsPeriodOnly(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let trial = try store.buy(SampleCatalog.monthly)
        #expect(try store.offerMembers(trial) == ["offerType": "1", "offerDiscountType": "FREE_TRIAL", "offerPeriod": "P1W", "price": "0"])
        #expect(try store.engine.offer(of: trial.id)?.kind == .introductory)
        // The week's free trial over, the renewal is at the product's price: no offer.
        let renewal = try store.store.inUnit { try store.engine.advanceClock(by: ClockDuration("P1W")!) }
        let renewed = try #require(renewal.effects.compactMap { effect -> TransactionRecord? in
            if case .updated(_, let records) = effect { return records.first } else { return nil }
        }.first)
        #expect(renewed.id != trial.id)
        #expect(try store.offerMembers(renewed) == ["price": "4990"], "the product's price, no offer")
        // Consumables and non-consumables have none.
        #expect(try store.offerMembers(try store.buy(SampleCatalog.levelPack)).keys.sorted() == ["price"])
    }

    @Test(arguments: LedgerBackend.allCases)
    func aPromotionalOfferIsToldWithItsIdentifier(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let first = try store.buy(SampleCatalog.monthly)
        let subscription = try #require(try store.store.subscriptions(uid: Self.buyer, app: Self.app).first)
        #expect(try store.store.inUnit { try store.engine.expire(.transaction(subscription.originalID)) }.code == .ok)
        let comeback = try store.buy(SampleCatalog.monthly, offer: Self.comeback)
        #expect(comeback.id != first.id)
        let members = try store.offerMembers(comeback)
        #expect(members["offerType"] == "2" && members["offerIdentifier"] == Self.comeback, "\(members)")
        #expect(members["offerDiscountType"] == "PAY_AS_YOU_GO" && members["offerPeriod"] == "P3M" && members["price"] == "2990",
                "three months at 2.99 a month: \(members)")
        #expect(try store.engine.offer(of: comeback.id)?.id == Self.comeback)
        // Pay as you go for three months: the next two renewals are at the offer's price, the third at the product's.
        var prices: [String] = []
        for _ in 0..<3 {
            let renewal = try store.store.inUnit { try store.engine.advanceClock(by: ClockDuration("P1M")!) }
            for case .updated(_, let records) in renewal.effects {
                for record in records { prices.append(try store.offerMembers(record)["price"] ?? "-") }
            }
        }
        #expect(prices == ["2990", "2990", "4990"], "\(prices)")
    }

    @Test(arguments: LedgerBackend.allCases)
    func aPromotionalOfferBoughtWhileSubscribedStartsWithTheNextPeriod(backend: LedgerBackend) throws {
        let store = try Store(backend)
        _ = try store.buy(SampleCatalog.monthly)                          // a week's free trial
        let during = try store.buy(SampleCatalog.monthly, offer: Self.comeback)
        #expect(try store.offerMembers(during)["offerType"] == nil, "the running period is not the offer's")
        var renewals: [[String: String]] = []
        for step in ["P1W", "P1M", "P1M", "P1M"] {
            let outcome = try store.store.inUnit { try store.engine.advanceClock(by: ClockDuration(step)!) }
            for case .updated(_, let records) in outcome.effects {
                for record in records { renewals.append(try store.offerMembers(record)) }
            }
        }
        #expect(renewals.map { $0["price"] } == ["2990", "2990", "2990", "4990"], "\(renewals)")
        #expect(renewals.first?["offerType"] == "2" && renewals.first?["offerIdentifier"] == Self.comeback)
    }

    @Test(arguments: LedgerBackend.allCases)
    func anOfferIsNotInheritedByALaterRunAndARebuyKeepsTheRunningOne(backend: LedgerBackend) throws {
        let store = try Store(backend)
        _ = try store.buy(SampleCatalog.monthly)
        _ = try store.buy(SampleCatalog.monthly, offer: Self.comeback)     // for the next period
        let subscription = try #require(try store.store.subscriptions(uid: Self.buyer, app: Self.app).first)
        #expect(try store.store.inUnit { try store.engine.expire(.transaction(subscription.originalID)) }.code == .ok)
        _ = try store.buy(SampleCatalog.monthly)                          // a new run, at the product's price
        let renewal = try store.store.inUnit { try store.engine.advanceClock(by: ClockDuration("P1M")!) }
        let prices = renewal.effects.flatMap { effect -> [String] in
            guard case .updated(_, let records) = effect else { return [] }
            return records.map { (try? store.offerMembers($0)["price"]) ?? nil ?? "-" }
        }
        #expect(prices == ["4990"], "the offer bought in the earlier run is not this run's: \(prices)")

        // During a pay-as-you-go promotional offer, buying the product again does not end it.
        #expect(try store.store.inUnit { try store.engine.expire(.transaction(subscription.originalID)) }.code == .ok)
        _ = try store.buy(SampleCatalog.monthly, offer: Self.comeback)
        _ = try store.buy(SampleCatalog.monthly)
        var offerPrices: [String] = []
        for _ in 0..<3 {
            let outcome = try store.store.inUnit { try store.engine.advanceClock(by: ClockDuration("P1M")!) }
            for case .updated(_, let records) in outcome.effects {
                for record in records { offerPrices.append(try store.offerMembers(record)["price"] ?? "-") }
            }
        }
        #expect(offerPrices == ["2990", "2990", "4990"], "\(offerPrices)")
    }

    @Test(arguments: LedgerBackend.allCases)
    func anAskToBuyRequestKeepsItsOfferUntilTheParentApproves(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let first = try store.buy(SampleCatalog.monthly)
        #expect(try store.store.inUnit { try store.engine.expire(.transaction(first.originalID ?? first.id)) }.code == .ok)
        let asked = try store.buy(SampleCatalog.monthly, offer: Self.comeback, askingParent: true)
        #expect(asked.state == .deferred)
        #expect(try store.offerMembers(asked)["offerType"] == nil, "nothing is bought yet")
        #expect(try store.store.inUnit { try store.engine.approve(transactionID: asked.id) }.code == .ok)
        let approved = try #require(try store.store.transaction(id: asked.id))
        #expect(approved.state == .purchased)
        let members = try store.offerMembers(approved)
        #expect(members["offerType"] == "2" && members["offerIdentifier"] == Self.comeback && members["price"] == "2990", "\(members)")
        #expect(try store.store.setting("offer.wait.\(asked.id)") == nil, "forgotten once used")

        // Declined, the offer is forgotten with the request.
        let again = try store.buy(SampleCatalog.monthly, offer: Self.comeback, askingParent: true)
        #expect(try store.store.setting("offer.wait.\(again.id)") != nil)
        #expect(try store.store.inUnit { try store.engine.decline(transactionID: again.id) }.code == .ok)
        #expect(try store.store.setting("offer.wait.\(again.id)") == nil)
    }

    @Test(arguments: LedgerBackend.allCases)
    func anInterruptedPurchaseKeepsTheServersWordOnTheIntroductoryOffer(backend: LedgerBackend) throws {
        let store = try Store(backend)
        _ = try store.store.inUnit { try store.engine.updateSwitches { $0.interrupted = true } }
        let interrupted = try store.buy(SampleCatalog.monthly, introductoryOfferAllowed: false)
        #expect(interrupted.state == .failed)
        _ = try store.store.inUnit { try store.engine.updateSwitches { $0.interrupted = nil } }
        let resolved = try store.store.inUnit { try store.engine.resolve(transactionID: interrupted.id) }
        #expect(resolved.code == .ok, "\(resolved.message)")
        let purchase = try #require(try store.store.transaction(id: resolved.value))
        #expect(try store.offerMembers(purchase)["offerType"] == nil,
                "the app's server said no introductory offer: a full month, as if it had not been interrupted")
        let month = try #require(purchase.expiresDate) - purchase.date
        #expect(month >= 28 * 86_400_000, "\(month) ms")

        // Without a word from the server, the buyer who never subscribed gets the free week on resolving.
        let other = try Store(backend)
        _ = try other.store.inUnit { try other.engine.updateSwitches { $0.interrupted = true } }
        let waiting = try other.buy(SampleCatalog.monthly)
        _ = try other.store.inUnit { try other.engine.updateSwitches { $0.interrupted = nil } }
        let done = try other.store.inUnit { try other.engine.resolve(transactionID: waiting.id) }
        let week = try #require(try other.store.transaction(id: done.value))
        #expect(try other.offerMembers(week)["offerDiscountType"] == "FREE_TRIAL")
    }
}
