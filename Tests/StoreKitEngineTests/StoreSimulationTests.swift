import Foundation
import StoreKitEngine
import StoreKitLedger
import StoreKitSQLite
import StoreKitTestSupport
import StoreKitWire
import Testing

private let game = "com.example.game"
private let buyer: UInt32 = 1000

private typealias Sample = SampleCatalog

/// An engine over a fresh store selling the sample catalogue, for the simulated store's flows.
private final class StoreFixture {
    static let catalogPath = SampleCatalog.path

    let directory = TemporaryDirectory("sksim")
    let place: LedgerBackend.Place
    var store: any Ledger
    var engine: PaymentQueueEngine
    let catalog: Catalog

    init(_ backend: LedgerBackend) throws {
        catalog = try Catalog.load(path: Self.catalogPath)
        place = try backend.place(in: directory)
        store = try place.open()
        engine = PaymentQueueEngine(store: store, catalogs: [game: catalog])
    }

    deinit {
        try? LedgerBackend.close(store)
        directory.remove()
    }

    /// Opens the database again with a new engine, as a daemon restart does.
    func restart() throws {
        try LedgerBackend.close(store)
        store = try place.open()
        engine = PaymentQueueEngine(store: store, catalogs: [game: catalog])
    }

    func unit<T>(_ body: (PaymentQueueEngine) throws -> T) throws -> T {
        try store.inUnit { try body(engine) }
    }

    @discardableResult
    func buy(_ productID: String, uid: UInt32 = buyer, askToBuy: Bool = false) throws -> TransactionRecord {
        let payment = ClientMessage.AddPayment(requestID: 1, key: "", productID: productID, quantity: 1,
                                               simulatesAskToBuy: askToBuy)
        let outcome = try unit { try $0.addPayment(uid: uid, app: game, payment: payment) }
        #expect(outcome.code == .ok, "\(outcome.message)")
        return try #require(try store.transaction(id: outcome.value))
    }

    func advance(_ text: String) throws -> Outcome {
        try unit { try $0.advanceClock(by: ClockDuration(text)!) }
    }

    func subscription(uid: UInt32 = buyer) throws -> Subscription? {
        try store.subscriptions(uid: uid, app: game).first
    }
}

/// Updated records among effects, in order.
private func updated(_ effects: [Effect]) -> [TransactionRecord] {
    effects.flatMap { effect -> [TransactionRecord] in
        if case .updated(_, let records) = effect { return records }
        return []
    }
}

@Suite struct StoreSimulationTests {
    @Test(arguments: LedgerBackend.allCases)
    func subscriptionPurchaseSchedulesItsRenewal(backend: LedgerBackend) throws {
        let fixture = try StoreFixture(backend)
        let purchase = try fixture.buy(Sample.yearly)
        let expires = try #require(purchase.expiresDate)
        #expect(expires > purchase.date)
        let wait = try #require(try fixture.engine.millisecondsUntilNextEvent())
        #expect(abs(wait - (expires - fixture.engine.clock.now())) < 1000)

        let outcome = try fixture.advance("P1Y")
        let renewal = try #require(updated(outcome.effects).first)
        #expect(renewal.state == .purchased)
        #expect(renewal.originalID == purchase.id)
        #expect(renewal.date == expires, "dated when it fell due")
        #expect(renewal.id != purchase.id)
        #expect(try fixture.subscription()?.renewals == 1)
    }

    @Test(arguments: LedgerBackend.allCases)
    func catchUpIsBoundedPerUnitOfWork(backend: LedgerBackend) throws {
        let fixture = try StoreFixture(backend)
        _ = try fixture.unit { try $0.updateSwitches { $0.timeRate = .oneRenewalEveryTwoSeconds } }
        try fixture.buy(Sample.yearly)
        // An hour at one renewal every two seconds: 1800 renewals, more than one batch holds.
        try fixture.unit { engine in
            engine.clock.offsetMilliseconds += 3_600_000
            try fixture.store.setSetting("clock.offset", String(engine.clock.offsetMilliseconds))
        }
        let started = StoreClock.realTimeMilliseconds()
        let first = try fixture.unit { try $0.fireDueEvents() }
        #expect(first.count == PaymentQueueEngine.eventBatchLimit)
        #expect(try #require(try fixture.engine.millisecondsUntilNextEvent()) <= 0, "more is due")
        let second = try fixture.unit { try $0.fireDueEvents() }
        #expect(second.count >= 799 && second.count <= 801, "\(second.count)")
        // Caught up: nothing is due but what fell due (one every two seconds) while the two
        // batches ran, which takes PostgreSQL (a round trip per statement) more than two seconds.
        if try #require(try fixture.engine.millisecondsUntilNextEvent()) <= 0 {
            let elapsed = StoreClock.realTimeMilliseconds() - started
            let third = try fixture.unit { try $0.fireDueEvents() }
            #expect(third.count <= Int(elapsed / 2000) + 1, "caught up but for \(third.count) renewals in \(elapsed) ms")
            #expect(try #require(try fixture.engine.millisecondsUntilNextEvent()) > 0, "caught up")
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func rollbackForgetsCachedSwitchesClockAndSchedule(backend: LedgerBackend) throws {
        let fixture = try StoreFixture(backend)
        try fixture.store.begin()
        _ = try fixture.engine.updateSwitches { $0.askToBuy = true; $0.storefront = "GBR" }
        _ = try fixture.engine.advanceClock(by: ClockDuration("1d")!)
        let payment = ClientMessage.AddPayment(requestID: 1, key: "", productID: Sample.yearly, quantity: 1)
        _ = try fixture.engine.addPayment(uid: buyer, app: game, payment: payment)
        #expect(try fixture.engine.millisecondsUntilNextEvent() != nil)
        fixture.store.rollback()

        #expect(try fixture.engine.millisecondsUntilNextEvent() == nil, "the scheduled request was undone")
        #expect(fixture.engine.switches.askToBuy == nil)
        #expect(fixture.engine.storefront == "USA")
        #expect(fixture.engine.clock.offsetMilliseconds == 0)
    }

    @Test(arguments: LedgerBackend.allCases)
    func askToBuyIsDeferredConsolidatedApprovedOrLapses(backend: LedgerBackend) throws {
        let fixture = try StoreFixture(backend)
        let request = try fixture.buy(Sample.monthly, askToBuy: true)
        #expect(request.state == .deferred)
        #expect(request.expiresDate == nil, "no subscription before approval")
        let again = try fixture.buy(Sample.monthly, askToBuy: true)
        #expect(again.id == request.id, "consolidated")
        #expect(again.sequence > request.sequence, "re-delivered with a new sequence")

        let approved = try fixture.unit { try $0.approve(transactionID: request.id) }
        let purchased = try #require(updated(approved.effects).first)
        #expect(purchased.state == .purchased && purchased.id == request.id)
        #expect(purchased.expiresDate != nil, "the subscription starts at approval")
        #expect(try fixture.subscription()?.status == .active)

        // Per-account switch; a lapse after a day fails the request.
        _ = try fixture.unit { try $0.updateSwitches { $0.askToBuyByUID[7] = true } }
        let other = try fixture.buy(Sample.levelPack, uid: 7)
        #expect(other.state == .deferred)
        #expect(try fixture.buy(Sample.levelPack, uid: 8).state == .purchased)
        let lapsed = try fixture.advance("25h")
        let failed = try #require(updated(lapsed.effects).first { $0.id == other.id })
        #expect(failed.state == .failed && failed.errorCode == 2)
        #expect(try fixture.unit { try $0.decline(transactionID: other.id) }.code == .invalidArgument)
    }

    @Test(arguments: LedgerBackend.allCases)
    func interruptedPurchaseResolvesIntoANewLinkedTransaction(backend: LedgerBackend) throws {
        let fixture = try StoreFixture(backend)
        _ = try fixture.unit { try $0.updateSwitches { $0.interrupted = true } }
        let failed = try fixture.buy(Sample.monthly)
        #expect(failed.state == .failed)
        #expect(try fixture.subscription() == nil)
        _ = try fixture.unit { try $0.updateSwitches { $0.interrupted = nil } }

        let resolved = try fixture.unit { try $0.resolve(transactionID: failed.id) }
        let purchase = try #require(updated(resolved.effects).first)
        #expect(purchase.state == .purchased)
        #expect(purchase.originalID == failed.id)
        #expect(purchase.expiresDate != nil)
        #expect(try fixture.subscription()?.lastTransactionID == purchase.id)
        #expect(try fixture.unit { try $0.resolve(transactionID: failed.id) }.code == .invalidArgument)
    }

    @Test(arguments: LedgerBackend.allCases)
    func failNextCountsDown(backend: LedgerBackend) throws {
        let fixture = try StoreFixture(backend)
        _ = try fixture.unit { try $0.updateSwitches { $0.failure = (3, 2) } }
        #expect(try fixture.buy(Sample.coins).errorCode == 3)
        #expect(fixture.engine.switches.failure?.remaining == 1)
        #expect(try fixture.buy(Sample.coins).errorCode == 3)
        #expect(fixture.engine.switches.failure == nil)
        #expect(try fixture.buy(Sample.coins).state == .purchased)
        try fixture.restart()
        #expect(fixture.engine.switches.failure == nil, "persisted")
    }

    @Test(arguments: LedgerBackend.allCases)
    func refundRevokesTheCurrentSubscriptionAndAnnouncesIt(backend: LedgerBackend) throws {
        let fixture = try StoreFixture(backend)
        let purchase = try fixture.buy(Sample.yearly)
        let refund = try fixture.unit { try $0.refund(transactionID: purchase.id, reason: 1) }
        #expect(refund.effects == [.revoked(QueueKey(uid: buyer, app: game), [Sample.yearly])])
        let revoked = try #require(try fixture.store.transaction(id: purchase.id))
        #expect(revoked.revocationReason == 1 && revoked.revocationDate != nil)
        #expect(try fixture.subscription()?.status == .revoked)
        #expect(try fixture.engine.millisecondsUntilNextEvent() == nil, "nothing left to renew")
        #expect(try fixture.unit { try $0.refund(transactionID: purchase.id) }.code == .invalidArgument)
        #expect(try fixture.unit { try $0.refund(transactionID: 42) }.code == .transactionNotFound)
    }

    @Test(arguments: LedgerBackend.allCases)
    func billingIssueGraceRetryAndRecovery(backend: LedgerBackend) throws {
        let fixture = try StoreFixture(backend)
        _ = try fixture.unit { try $0.updateSwitches { $0.billingIssue = true; $0.billingGracePeriod = true } }
        let purchase = try fixture.buy(Sample.yearly)
        #expect(try fixture.advance("1y").effects.isEmpty, "a failed renewal makes no transaction")
        #expect(try fixture.subscription()?.status == .gracePeriod)
        #expect(try fixture.engine.entitlements(uid: buyer, app: game).map(\.id) == [purchase.id])
        _ = try fixture.advance("16d")
        #expect(try fixture.subscription()?.status == .billingRetry)
        #expect(try fixture.engine.entitlements(uid: buyer, app: game).isEmpty)
        let recovered = try fixture.unit { try $0.resolve(transactionID: purchase.id) }
        #expect(updated(recovered.effects).first?.originalID == purchase.id)
        #expect(try fixture.subscription()?.status == .active)
    }

    @Test(arguments: LedgerBackend.allCases)
    func entitlementsFollowStoreKit2(backend: LedgerBackend) throws {
        let fixture = try StoreFixture(backend)
        try fixture.buy(Sample.coins)
        let levelPack = try fixture.buy(Sample.levelPack)
        let season = try fixture.buy(Sample.seasonPass)
        let monthly = try fixture.buy(Sample.monthly)
        #expect(try fixture.engine.entitlements(uid: buyer, app: game).map(\.id) == [levelPack.id, season.id, monthly.id])
        _ = try fixture.unit { try $0.expire(.transaction(monthly.id)) }
        #expect(try fixture.engine.entitlements(uid: buyer, app: game).map(\.id) == [levelPack.id, season.id])
    }

    @Test(arguments: LedgerBackend.allCases)
    func clearRemovesUnfinishedTransactionsForObservers(backend: LedgerBackend) throws {
        let fixture = try StoreFixture(backend)
        let coins = try fixture.buy(Sample.coins)
        try fixture.buy(Sample.yearly, uid: 2)
        let outcome = try fixture.unit { try $0.clear(uid: buyer, app: game) }
        #expect(outcome.value == 1)
        guard case .removed(let queue, let records) = try #require(outcome.effects.first) else {
            Issue.record("expected removed: \(outcome.effects)")
            return
        }
        #expect(queue == QueueKey(uid: buyer, app: game))
        #expect(records.map(\.id) == [coins.id] && records.allSatisfy(\.finished))
        #expect(records.first.map { $0.sequence > coins.sequence } == true)
        #expect(try fixture.store.all(uid: 2, app: game).count == 1, "other buyers keep theirs")
    }

    @Test(arguments: LedgerBackend.allCases)
    func aDeferredPurchaseNotContinuedAfterAStorefrontChangeFails(backend: LedgerBackend) throws {
        let fixture = try StoreFixture(backend)
        let request = try fixture.buy(Sample.levelPack, askToBuy: true)
        #expect(try fixture.unit { try $0.cancelDeferred(uid: 2, app: game, transactionID: request.id) }.code == .transactionNotFound)
        let cancelled = try fixture.unit { try $0.cancelDeferred(uid: buyer, app: game, transactionID: request.id) }
        let failed = try #require(updated(cancelled.effects).first)
        #expect(failed.state == .failed && failed.errorCode == 5)
        #expect(try fixture.unit { try $0.approve(transactionID: request.id) }.code == .invalidArgument)
        #expect(try fixture.unit { try $0.cancelDeferred(uid: buyer, app: game, transactionID: request.id) }.code == .notFinishable)
    }

    @Test(arguments: LedgerBackend.allCases)
    func idsAreNeverReusedAfterAClear(backend: LedgerBackend) throws {
        let fixture = try StoreFixture(backend)
        let first = try fixture.buy(Sample.coins)
        _ = try fixture.unit { try $0.clear(uid: nil, app: nil) }
        try fixture.restart()
        let second = try fixture.buy(Sample.coins)
        #expect(second.id > first.id)
    }

    @Test(arguments: LedgerBackend.allCases)
    func eventsDueWhileDownFireAtTheNextStart(backend: LedgerBackend) throws {
        let fixture = try StoreFixture(backend)
        let purchase = try fixture.buy(Sample.yearly)
        let expires = try #require(purchase.expiresDate)
        // "Down": nothing runs while the clock moves on; then a new engine opens the same store.
        try fixture.unit { engine in
            try fixture.store.setSetting("clock.offset", String(expires - StoreClock.realTimeMilliseconds() + 1000))
        }
        try fixture.restart()
        #expect(try #require(try fixture.engine.millisecondsUntilNextEvent()) <= 0)
        let fired = try fixture.unit { try $0.fireDueEvents() }
        #expect(updated(fired).map(\.originalID) == [purchase.id])
        #expect(updated(fired).first?.date == expires)
    }
}
