import Foundation
import StoreKitEngine
import StoreKitLedger
import StoreKitSQLite
import StoreKitTestSupport
import StoreKitWire
import Testing

private let game = "com.example.game"
private let player: UInt32 = 1000
private let queue = QueueKey(uid: player, app: game)

private typealias Product = SampleCatalog

/// An engine over a fresh store in a temporary directory, selling the sample catalogue as
/// `com.example.game` (and as `com.example.other`, to check that queues are kept apart).
private final class EngineFixture {
    static let catalogPath = SampleCatalog.path

    let directory = TemporaryDirectory("skengine")
    let store: any Ledger
    let engine: PaymentQueueEngine
    let catalog: Catalog

    init(_ backend: LedgerBackend) throws {
        store = try backend.place(in: directory).open()
        catalog = try Catalog.load(path: Self.catalogPath)
        engine = PaymentQueueEngine(store: store, catalogs: [game: catalog, "com.example.other": catalog])
    }

    deinit {
        try? LedgerBackend.close(store)
        directory.remove()
    }

    /// Runs `body` in one unit of work, as the daemon does, and commits it.
    func unit<T>(_ body: (PaymentQueueEngine) throws -> T) throws -> T {
        try store.inUnit { try body(engine) }
    }

    func add(_ productID: String, uid: UInt32 = player, app: String = game, key: String = "", quantity: Int32 = 1,
             applicationUsername: String? = nil, hasRequestData: Bool = false) throws -> Outcome {
        let payment = ClientMessage.AddPayment(
            requestID: 1, key: key, productID: productID, quantity: quantity,
            applicationUsername: applicationUsername, hasRequestData: hasRequestData)
        return try unit { try $0.addPayment(uid: uid, app: app, payment: payment) }
    }

    /// Buys `productID` and returns the new transaction's id, recording an issue if it was refused.
    func buy(_ productID: String, uid: UInt32 = player, app: String = game, applicationUsername: String? = nil,
             sourceLocation: SourceLocation = #_sourceLocation) throws -> UInt64 {
        let outcome = try add(productID, uid: uid, app: app, applicationUsername: applicationUsername)
        #expect(outcome.code == .ok, "buying \(productID): \(outcome.message)", sourceLocation: sourceLocation)
        return outcome.value
    }

    func finish(_ id: UInt64, uid: UInt32 = player, app: String = game) throws -> Outcome {
        try unit { try $0.finish(uid: uid, app: app, transactionID: id) }
    }

    func restore(uid: UInt32 = player, app: String = game, applicationUsername: String? = nil) throws -> Outcome {
        try unit { try $0.restore(uid: uid, app: app, applicationUsername: applicationUsername) }
    }

    var rows: [TransactionRecord] {
        get throws { try store.list(uid: nil, app: nil, unfinishedOnly: false) }
    }
}

/// The transactions an outcome's `updated` effects carry, in order.
private func updatedRecords(_ outcome: Outcome) -> [TransactionRecord] {
    outcome.effects.flatMap { effect -> [TransactionRecord] in
        if case .updated(_, let records) = effect { return records }
        return []
    }
}

@Suite("PaymentQueueEngine")
struct PaymentQueueEngineTests {
    // MARK: addPayment

    @Test("addPayment stores a purchased transaction and reports purchasing then purchased", arguments: LedgerBackend.allCases)
    func addPayment(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        let before = StoreClock.realTimeMilliseconds()
        let outcome = try fixture.add(Product.levelPack, key: "k1", quantity: 2, applicationUsername: "alice")
        let after = StoreClock.realTimeMilliseconds()
        #expect(outcome.code == .ok)
        #expect(outcome.detail == 0)

        let stored = try #require(try fixture.store.transaction(id: outcome.value))
        #expect(stored.state == .purchased)
        #expect(!stored.finished)
        #expect(stored.uid == player)
        #expect(stored.app == game)
        #expect(stored.productID == Product.levelPack)
        #expect(stored.quantity == 2)
        #expect(stored.applicationUsername == "alice")
        #expect(stored.originalID == nil)
        #expect(stored.errorCode == nil)
        #expect((before...after).contains(stored.date))
        #expect(stored.id >= TransactionIDs.first)

        var purchasing = stored
        purchasing.state = .purchasing
        purchasing.sequence = stored.sequence - 1
        #expect(outcome.effects == [.updated(queue, [purchasing]), .updated(queue, [stored])])
        #expect(purchasing.sequence >= 1)
        #expect(try fixture.rows == [stored])
        #expect(try fixture.engine.unfinished(uid: player, app: game) == [stored])
    }

    @Test("sequences keep increasing across payments of one queue", arguments: LedgerBackend.allCases)
    func sequencesIncrease(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        var sequences: [UInt64] = []
        for product in [Product.coins, Product.coins, Product.monthly] {
            sequences += updatedRecords(try fixture.add(product)).map(\.sequence)
        }
        #expect(sequences.count == 6)
        #expect(sequences == sequences.sorted())
        #expect(Set(sequences).count == sequences.count)
        // Another uid's queue counts on its own.
        let other = updatedRecords(try fixture.add(Product.coins, uid: 1001)).map(\.sequence)
        #expect(other == [1, 2])
    }

    @Test("receiptChanges: what the receipt's list gains and loses since a sequence number; followed, it is receiptPurchases", arguments: LedgerBackend.allCases)
    func receiptChangesFollowTheQueue(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        let pack = try fixture.buy(Product.levelPack)
        let coins = try fixture.buy(Product.coins)
        let start = try fixture.unit { try $0.store.lastSequence(uid: player, app: game) }
        var listed = Set(try fixture.unit { try $0.receiptPurchases(uid: player, app: game) }.map(\.id))
        #expect(listed == [pack, coins])

        #expect(try fixture.finish(coins).code == .ok)
        let more = try fixture.buy(Product.coins)
        _ = try fixture.buy(Product.coins, uid: 1001)   // another queue: not this one's change
        let changes = try fixture.unit { try $0.receiptChanges(uid: player, app: game, afterSequence: start) }
        #expect(changes.listed.map(\.id) == [more])
        #expect(changes.unlisted == [coins], "a finished consumable leaves the list")
        listed.subtract(changes.unlisted)
        listed.formUnion(changes.listed.map(\.id))
        #expect(listed == Set(try fixture.unit { try $0.receiptPurchases(uid: player, app: game) }.map(\.id)))
        let now = try fixture.unit { try $0.store.lastSequence(uid: player, app: game) }
        #expect(try fixture.unit { try $0.receiptChanges(uid: player, app: game, afterSequence: now) }.listed.isEmpty)
    }

    struct Refusal: Sendable, CustomTestStringConvertible {
        var testDescription: String
        var app = game
        var productID = Product.coins
        var quantity: Int32 = 1
        var hasRequestData = false
        var code: ResultCode
        var detail: Int32 = 0
    }

    @Test("invalid payments are refused at once and store nothing", arguments: LedgerBackend.allCases, [
        Refusal(testDescription: "unknown product", productID: "com.example.game.gems", code: .storeKit, detail: 5),
        Refusal(testDescription: "product of no app", productID: "", code: .storeKit, detail: 5),
        Refusal(testDescription: "quantity 0", quantity: 0, code: .storeKit, detail: 3),
        Refusal(testDescription: "quantity 11", quantity: 11, code: .storeKit, detail: 3),
        Refusal(testDescription: "quantity -1", quantity: -1, code: .storeKit, detail: 3),
        Refusal(testDescription: "quantity Int32.max", quantity: .max, code: .storeKit, detail: 3),
        Refusal(testDescription: "request data", hasRequestData: true, code: .storeKit, detail: 10),
        Refusal(testDescription: "unknown app", app: "com.example.unregistered", code: .unknownApp),
        Refusal(testDescription: "empty app", app: "", code: .unknownApp),
    ])
    func refusals(backend: LedgerBackend, refusal: Refusal) throws {
        let fixture = try EngineFixture(backend)
        let outcome = try fixture.add(refusal.productID, app: refusal.app, key: "key", quantity: refusal.quantity,
                                      hasRequestData: refusal.hasRequestData)
        #expect(outcome.code == refusal.code)
        #expect(outcome.detail == refusal.detail)
        #expect(outcome.value == 0)
        #expect(outcome.effects.isEmpty)
        #expect(!outcome.message.isEmpty)
        #expect(try fixture.rows.isEmpty)
        // The refused key was not used up.
        #expect(try fixture.add(Product.coins, key: "key").code == .ok)
        #expect(try fixture.rows.count == 1)
    }

    @Test("quantities 1 and 10 are accepted", arguments: LedgerBackend.allCases, [1, 10] as [Int32])
    func quantityBounds(backend: LedgerBackend, quantity: Int32) throws {
        let fixture = try EngineFixture(backend)
        let outcome = try fixture.add(Product.coins, quantity: quantity)
        #expect(outcome.code == .ok)
        #expect(try fixture.store.transaction(id: outcome.value)?.quantity == quantity)
    }

    @Test("the same key returns the first transaction's id and makes no second row", arguments: LedgerBackend.allCases)
    func idempotencyKey(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        let first = try fixture.add(Product.coins, key: "tap-1")
        let again = try fixture.add(Product.coins, key: "tap-1")
        #expect(again.code == .ok)
        #expect(again.value == first.value)
        #expect(again.effects.isEmpty)
        #expect(try fixture.rows.count == 1)

        // Within one unit of work too.
        let pair = try fixture.unit { engine in
            let payment = ClientMessage.AddPayment(requestID: 2, key: "tap-2", productID: Product.levelPack, quantity: 1)
            return (try engine.addPayment(uid: player, app: game, payment: payment),
                    try engine.addPayment(uid: player, app: game, payment: payment))
        }
        #expect(pair.0.value == pair.1.value)
        #expect(pair.1.effects.isEmpty)
        #expect(try fixture.rows.count == 2)

        // A key belongs to one queue; an empty key is no key.
        #expect(try fixture.add(Product.coins, uid: 1001, key: "tap-1").value != first.value)
        #expect(try fixture.add(Product.coins, app: "com.example.other", key: "tap-1").value != first.value)
        #expect(try fixture.add(Product.coins, key: "").value != fixture.add(Product.coins, key: "").value)
        #expect(try fixture.rows.count == 6)
    }

    // MARK: finish

    @Test("finish marks the transaction finished and reports it removed", arguments: LedgerBackend.allCases)
    func finish(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        let id = try fixture.buy(Product.coins)
        let purchased = try #require(try fixture.store.transaction(id: id))

        let outcome = try fixture.finish(id)
        #expect(outcome.code == .ok)
        #expect(outcome.value == id)
        let stored = try #require(try fixture.store.transaction(id: id))
        #expect(stored.finished)
        #expect(stored.state == .purchased)
        #expect(stored.sequence > purchased.sequence)
        #expect(outcome.effects == [.removed(queue, [stored])])
        #expect(try fixture.engine.unfinished(uid: player, app: game).isEmpty)
    }

    @Test("finishing twice succeeds without a second effect or change", arguments: LedgerBackend.allCases)
    func finishTwice(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        let id = try fixture.buy(Product.levelPack)
        _ = try fixture.finish(id)
        let afterFirst = try fixture.rows
        let second = try fixture.finish(id)
        #expect(second.code == .ok)
        #expect(second.value == id)
        #expect(second.effects.isEmpty)
        #expect(try fixture.rows == afterFirst)
    }

    @Test("another queue's transaction, or an unknown id, is not found and not finished", arguments: LedgerBackend.allCases)
    func finishOtherQueue(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        let id = try fixture.buy(Product.coins)
        let before = try fixture.rows
        for (uid, app) in [(1001, game), (player, "com.example.other"), (0, game)] as [(UInt32, String)] {
            let outcome = try fixture.finish(id, uid: uid, app: app)
            #expect(outcome.code == .transactionNotFound, "uid \(uid) app \(app)")
            #expect(outcome.effects.isEmpty)
        }
        #expect(try fixture.finish(id + 1000).code == .transactionNotFound)
        #expect(try fixture.finish(0).code == .transactionNotFound)
        #expect(try fixture.rows == before)
    }

    @Test("a purchasing or deferred transaction cannot be finished", arguments: LedgerBackend.allCases, [TransactionState.purchasing, .deferred])
    func finishNotFinishable(backend: LedgerBackend, state: TransactionState) throws {
        let fixture = try EngineFixture(backend)
        let record = try fixture.unit { engine in
            let record = TransactionRecord(
                id: try engine.store.allocateTransactionID(), uid: player, app: game, productID: Product.coins,
                quantity: 1, state: state, sequence: try engine.store.nextSequence(uid: player, app: game), date: 0)
            try engine.store.insert(record)
            return record
        }
        let outcome = try fixture.finish(record.id)
        #expect(outcome.code == .notFinishable)
        #expect(outcome.effects.isEmpty)
        #expect(try fixture.rows == [record])
    }

    @Test("a failed transaction can be finished", arguments: LedgerBackend.allCases)
    func finishFailed(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        let record = try fixture.unit { engine in
            let record = TransactionRecord(
                id: try engine.store.allocateTransactionID(), uid: player, app: game, productID: Product.coins,
                quantity: 1, state: .failed, sequence: try engine.store.nextSequence(uid: player, app: game), date: 0,
                errorCode: 2, errorMessage: "cancelled")
            try engine.store.insert(record)
            return record
        }
        let outcome = try fixture.finish(record.id)
        #expect(outcome.code == .ok)
        #expect(try fixture.store.transaction(id: record.id)?.finished == true)
    }

    // MARK: restore

    /// Buys one of each product, finishes all but the yearly subscription, and returns the ids by product.
    private func purchaseHistory(_ fixture: EngineFixture) throws -> [String: UInt64] {
        var ids: [String: UInt64] = [:]
        for product in [Product.coins, Product.levelPack, Product.monthly, Product.seasonPass, Product.yearly] {
            ids[product] = try fixture.buy(product)
        }
        for product in [Product.coins, Product.levelPack, Product.monthly, Product.seasonPass] {
            #expect(try fixture.finish(ids[product]!).code == .ok)
        }
        return ids
    }

    @Test("restore makes new restored transactions for finished non-consumable and auto-renewable purchases only", arguments: LedgerBackend.allCases)
    func restore(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        let ids = try purchaseHistory(fixture)
        let before = try fixture.rows

        let outcome = try fixture.restore()
        #expect(outcome.code == .ok)
        #expect(outcome.value == 2)
        #expect(outcome.effects.count == 1)
        let restored = updatedRecords(outcome)
        #expect(restored.map(\.productID) == [Product.levelPack, Product.monthly])
        #expect(restored.map(\.originalID) == [ids[Product.levelPack], ids[Product.monthly]])
        for record in restored {
            #expect(record.state == .restored)
            #expect(!record.finished)
            #expect(record.uid == player && record.app == game)
            #expect(!before.map(\.id).contains(record.id))
            #expect(try fixture.store.transaction(id: record.id) == record)
        }
        #expect(outcome.effects == [.updated(queue, restored)])
        #expect(restored[0].sequence < restored[1].sequence)
        #expect(restored[0].sequence > before.map(\.sequence).max()!)
        #expect(try fixture.rows == before + restored)
    }

    @Test("a history page is read from its afterID on, at most its limit, on both ledgers", arguments: LedgerBackend.allCases)
    func historyPageFromAfterID(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        let ids = try (0..<7).map { _ in try fixture.buy(Product.coins) }
        _ = try fixture.buy(Product.coins, uid: player + 1)   // another queue's, never listed
        func page(after: UInt64, limit: Int) throws -> [UInt64] {
            try fixture.unit { try $0.history(uid: player, app: game, afterID: after, limit: limit) }.map(\.id)
        }
        #expect(try page(after: 0, limit: 3) == Array(ids[0..<3]))
        #expect(try page(after: ids[2], limit: 3) == Array(ids[3..<6]))
        #expect(try page(after: ids[5], limit: 3) == [ids[6]])
        #expect(try page(after: ids[6], limit: 3).isEmpty)
        #expect(try page(after: UInt64.max, limit: 3).isEmpty)
    }

    @Test("a refund takes back every copy of the purchase: refunding the original revokes its restored copies, refunding a copy revokes the original; entitlements lose it",
          arguments: LedgerBackend.allCases)
    func refundRevokesRestoredCopies(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        let pack = try fixture.buy(Product.levelPack)
        #expect(try fixture.finish(pack).code == .ok)
        let firstCopy = try #require(updatedRecords(try fixture.restore()).first { $0.productID == Product.levelPack })
        #expect(try fixture.finish(firstCopy.id).code == .ok)
        let secondCopy = try #require(updatedRecords(try fixture.restore()).first { $0.productID == Product.levelPack })
        #expect(try fixture.unit { try $0.entitlements(uid: player, app: game) }.map(\.productID).contains(Product.levelPack))

        let refund = try fixture.unit { try $0.refund(transactionID: pack, reason: 1) }
        #expect(refund.code == .ok)
        #expect(refund.effects == [.revoked(queue, [Product.levelPack])], "one announcement for the queue")
        for id in [pack, firstCopy.id, secondCopy.id] {
            let row = try #require(try fixture.store.transaction(id: id))
            #expect(row.revocationDate != nil && row.revocationReason == 1, "transaction \(id) still entitles")
        }
        #expect(try !fixture.unit { try $0.entitlements(uid: player, app: game) }.map(\.productID).contains(Product.levelPack))

        // Refunding a restored copy: the purchase it restored and its other copies go too.
        let other = try fixture.buy(Product.levelPack, uid: player + 1)
        #expect(try fixture.finish(other, uid: player + 1).code == .ok)
        let copy = try #require(updatedRecords(try fixture.restore(uid: player + 1)).first { $0.productID == Product.levelPack })
        #expect(try fixture.unit { try $0.refund(transactionID: copy.id) }.code == .ok)
        #expect(try fixture.store.transaction(id: other)?.revocationDate != nil)
        #expect(try !fixture.unit { try $0.entitlements(uid: player + 1, app: game) }.map(\.productID).contains(Product.levelPack))
        // Nobody else's purchase was touched, and a second refund is refused as before.
        #expect(try fixture.store.transaction(id: pack)?.revocationReason == 1)
        #expect(try fixture.unit { try $0.refund(transactionID: copy.id) }.code == .invalidArgument)
    }

    @Test("deleting a purchase deletes its restored copies too; the unfinished copy leaves its queue", arguments: LedgerBackend.allCases)
    func deleteWithRestoredCopies(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        let pack = try fixture.buy(Product.levelPack)
        #expect(try fixture.finish(pack).code == .ok)
        let kept = try fixture.buy(Product.levelPack, uid: player + 1)
        let copy = try #require(updatedRecords(try fixture.restore()).first { $0.productID == Product.levelPack })
        #expect(copy.originalID == pack && !copy.finished)
        let outcome = try fixture.unit { try $0.deleteTransaction(id: pack) }
        #expect(outcome.code == .ok && outcome.value == 2, "the purchase and its copy: \(outcome.value)")
        #expect(try fixture.store.transaction(id: pack) == nil && fixture.store.transaction(id: copy.id) == nil)
        #expect(try fixture.store.transaction(id: kept) != nil, "another buyer's purchase of the product stays")
        let removed = outcome.effects.flatMap { effect -> [UInt64] in
            if case .removed(_, let records) = effect { return records.map(\.id) }
            return []
        }
        #expect(removed == [copy.id], "only the unfinished copy is told as removed: \(removed)")
        #expect(try fixture.unit { try $0.deleteTransaction(id: pack) }.code == .transactionNotFound)
    }

    @Test("restoring again while the restored transactions are unfinished adds nothing", arguments: LedgerBackend.allCases)
    func restoreAgainWhilePending(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        let ids = try purchaseHistory(fixture)
        let first = updatedRecords(try fixture.restore())
        #expect(first.count == 2)
        let rows = try fixture.rows

        let again = try fixture.restore()
        #expect(again.code == .ok)
        #expect(again.value == 0)
        #expect(again.effects.isEmpty)
        #expect(try fixture.rows == rows)

        // Once finished, a later restore restores again, still linked to the first purchase.
        for record in first { #expect(try fixture.finish(record.id).code == .ok) }
        let third = updatedRecords(try fixture.restore())
        #expect(third.map(\.originalID) == [ids[Product.levelPack], ids[Product.monthly]])
        #expect(Set(third.map(\.id)).isDisjoint(with: first.map(\.id)))
    }

    @Test("restore finds nothing for unfinished purchases, consumables, non-renewing passes or other queues", arguments: LedgerBackend.allCases)
    func restoreNothing(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        _ = try fixture.buy(Product.levelPack)        // unfinished
        _ = try fixture.finish(try fixture.buy(Product.coins))
        _ = try fixture.finish(try fixture.buy(Product.seasonPass))
        _ = try fixture.finish(try fixture.buy(Product.levelPack, uid: 1001))
        _ = try fixture.finish(try fixture.buy(Product.monthly, app: "com.example.other"))
        let rows = try fixture.rows

        let outcome = try fixture.restore()
        #expect(outcome.code == .ok)
        #expect(outcome.value == 0)
        #expect(outcome.effects.isEmpty)
        #expect(try fixture.rows == rows)
    }

    @Test("restore with an application username restores only that user's purchases", arguments: LedgerBackend.allCases)
    func restoreByUsername(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        let alice = try fixture.buy(Product.levelPack, applicationUsername: "alice")
        let bob = try fixture.buy(Product.monthly, applicationUsername: "bob")
        _ = try fixture.finish(alice)
        _ = try fixture.finish(bob)
        let restored = updatedRecords(try fixture.restore(applicationUsername: "alice"))
        #expect(restored.map(\.originalID) == [alice])
        #expect(restored.first?.applicationUsername == "alice")
    }

    @Test("restore for an unregistered app is refused", arguments: LedgerBackend.allCases)
    func restoreUnknownApp(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        let outcome = try fixture.restore(app: "com.example.unregistered")
        #expect(outcome.code == .unknownApp)
        #expect(outcome.effects.isEmpty)
    }

    // MARK: products

    @Test("products returns records in request order and the identifiers the store does not know", arguments: LedgerBackend.allCases)
    func products(backend: LedgerBackend) throws {
        let fixture = try EngineFixture(backend)
        let asked = [Product.monthly, "com.example.game.gems", Product.coins, "", Product.seasonPass, Product.levelPack]
        let answer = fixture.engine.products(app: game, identifiers: asked)
        #expect(answer.products.map(\.productID) == [Product.monthly, Product.coins, Product.seasonPass, Product.levelPack])
        #expect(answer.products.map(\.kind) == [.autoRenewable, .consumable, .nonRenewing, .nonConsumable])
        #expect(answer.invalid == ["com.example.game.gems", ""])
        for record in answer.products {
            let product = try #require(fixture.catalog.product(record.productID))
            #expect(record == product.record(locale: fixture.engine.locale, currencyCode: fixture.engine.currencyCode))
        }
        #expect(answer.products.first?.subscriptionPeriod == "P1M")
        #expect(answer.products.first?.subscriptionGroupID != nil)

        let none = fixture.engine.products(app: game, identifiers: [])
        #expect(none.products.isEmpty && none.invalid.isEmpty)
        let unknownApp = fixture.engine.products(app: "com.example.unregistered", identifiers: [Product.coins])
        #expect(unknownApp.products.isEmpty)
        #expect(unknownApp.invalid == [Product.coins])
    }
}
