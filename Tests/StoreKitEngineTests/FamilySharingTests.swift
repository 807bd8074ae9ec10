import StoreKitEngine
import StoreKitLedger
import StoreKitTestSupport
import StoreKitWire
import Testing

/// Family Sharing in the engine, on each ledger: what a family member gets when another buys,
/// restores, joins or leaves, and what a refund takes back.
@Suite struct FamilySharingTests {
    static let app = "com.example.game"
    static let parent: UInt32 = 1000
    static let child: UInt32 = 1001
    static let teen: UInt32 = 1002
    static let stranger: UInt32 = 2000

    /// An engine over a fresh ledger selling the sample catalogue, with one family.
    final class Family {
        let directory = TemporaryDirectory("skfamily")
        let store: any Ledger
        let engine: PaymentQueueEngine

        init(_ backend: LedgerBackend, members: [UInt32] = [parent, child, teen]) throws {
            store = try backend.place(in: directory).open()
            engine = PaymentQueueEngine(store: store, catalogs: [app: try Catalog.load(path: SampleCatalog.path)])
            engine.families = FamilyGroups([members])
            #expect(try unit { try $0.applyFamilies() } != nil, "a new family is applied once")
        }

        deinit {
            try? LedgerBackend.close(store)
            directory.remove()
        }

        func unit<T>(_ body: (PaymentQueueEngine) throws -> T) throws -> T {
            try store.inUnit { try body(engine) }
        }

        /// Buys `productID` as `uid`: the outcome (its value is the purchase).
        func buy(_ productID: String, uid: UInt32 = parent) throws -> Outcome {
            let payment = ClientMessage.AddPayment(requestID: 1, key: "", productID: productID, quantity: 1)
            let outcome = try unit { try $0.addPayment(uid: uid, app: app, payment: payment) }
            #expect(outcome.code == .ok, "\(outcome.message)")
            return outcome
        }

        func history(_ uid: UInt32) throws -> [TransactionRecord] { try store.all(uid: uid, app: app) }

        func entitled(_ uid: UInt32) throws -> [String] {
            try engine.entitlements(uid: uid, app: app).map(\.productID)
        }

        func ownership(_ record: TransactionRecord) throws -> String? {
            guard case .object(let members)? = try engine.transactionPayload(record, environment: "Xcode", signedDate: 0) else { return nil }
            guard case .string(let value)? = members.first(where: { $0.0 == "inAppOwnershipType" })?.1 else { return nil }
            return value
        }
    }

    static func updates(_ effects: [Effect], for uid: UInt32) -> [TransactionRecord] {
        effects.flatMap { effect -> [TransactionRecord] in
            if case .updated(let queue, let records) = effect, queue.uid == uid { return records }
            return []
        }
    }

    static func revoked(_ effects: [Effect]) -> [UInt32: [String]] {
        var result: [UInt32: [String]] = [:]
        for case .revoked(let queue, let products) in effects { result[queue.uid, default: []] += products }
        return result
    }

    @Test(arguments: LedgerBackend.allCases)
    func aPurchaseIsSharedWithEveryOtherMember(backend: LedgerBackend) throws {
        let family = try Family(backend)
        let outcome = try family.buy(SampleCatalog.levelPack)
        let purchase = try #require(try family.store.transaction(id: outcome.value))
        for member in [Self.child, Self.teen] {
            let copies = Self.updates(outcome.effects, for: member)
            #expect(copies.count == 1, "uid \(member) is told of its copy")
            let copy = try #require(copies.first)
            #expect(copy.state == .restored && copy.originalID == purchase.id && copy.productID == SampleCatalog.levelPack)
            #expect(!copy.finished, "the member's app finishes its copy")
            #expect(copy.applicationUsername == nil)
            #expect(try family.engine.isFamilyCopy(copy))
            #expect(try family.ownership(copy) == "FAMILY_SHARED")
            #expect(try family.entitled(member) == [SampleCatalog.levelPack])
            #expect(try family.engine.unfinished(uid: member, app: Self.app).map(\.id) == [copy.id])
        }
        #expect(try family.ownership(purchase) == "PURCHASED")
        #expect(try !family.engine.isFamilyCopy(purchase))
        #expect(try family.history(Self.stranger).isEmpty, "no one outside the family gets anything")
        #expect(Self.updates(outcome.effects, for: Self.stranger).isEmpty)
    }

    @Test(arguments: LedgerBackend.allCases)
    func consumablesAndOutsidersAreNotShared(backend: LedgerBackend) throws {
        let family = try Family(backend)
        let coins = try family.buy(SampleCatalog.coins)
        #expect(Self.updates(coins.effects, for: Self.child).isEmpty, "a consumable is not family-shareable")
        let outsider = try family.buy(SampleCatalog.levelPack, uid: Self.stranger)
        #expect(outsider.effects.allSatisfy { if case .updated(let queue, _) = $0 { queue.uid == Self.stranger } else { true } })
        #expect(try family.history(Self.child).isEmpty)
    }

    @Test(arguments: LedgerBackend.allCases)
    func aRefundOfThePurchaseRevokesEveryCopy(backend: LedgerBackend) throws {
        let family = try Family(backend)
        let outcome = try family.buy(SampleCatalog.levelPack)
        let copy = try #require(Self.updates(outcome.effects, for: Self.child).first)

        let refusal = try family.unit { try $0.refund(transactionID: copy.id) }
        #expect(refusal.code == .invalidArgument && refusal.message.contains("Family Sharing"), "\(refusal.message)")
        #expect(try family.entitled(Self.child) == [SampleCatalog.levelPack], "a refused refund takes nothing")

        let refund = try family.unit { try $0.refund(transactionID: outcome.value) }
        #expect(refund.code == .ok)
        let revoked = Self.revoked(refund.effects)
        #expect(revoked[Self.parent] == [SampleCatalog.levelPack])
        #expect(revoked[Self.child] == [SampleCatalog.levelPack] && revoked[Self.teen] == [SampleCatalog.levelPack])
        #expect(try family.entitled(Self.child).isEmpty && family.entitled(Self.teen).isEmpty)
        #expect(try family.store.transaction(id: copy.id)?.revocationDate != nil, "the copy carries the revocation")
    }

    @Test(arguments: LedgerBackend.allCases)
    func aSubscriptionIsSharedWhileItRuns(backend: LedgerBackend) throws {
        let family = try Family(backend, members: [Self.parent, Self.child])
        let outcome = try family.buy(SampleCatalog.monthly)
        let purchase = try #require(try family.store.transaction(id: outcome.value))
        let copy = try #require(Self.updates(outcome.effects, for: Self.child).first)
        #expect(copy.originalID == purchase.id && copy.expiresDate == purchase.expiresDate)
        let entitlement = try #require(try family.engine.entitlements(uid: Self.child, app: Self.app).first)
        #expect(entitlement.id == copy.id && entitlement.expiresDate == purchase.expiresDate)
        let statuses = try family.engine.subscriptionStatuses(uid: Self.child, app: Self.app, groupID: nil)
        #expect(statuses.count == 1 && statuses.first?.state == .subscribed && statuses.first?.latest.id == copy.id)

        // Each renewal is shared too; the member's entitlement follows the purchaser's period.
        let renewal = try family.unit { try $0.advanceClock(by: ClockDuration("P1M")!) }
        let renewed = try #require(Self.updates(renewal.effects, for: Self.child).first, "the renewal is shared")
        #expect(renewed.originalID == purchase.id && renewed.state == .restored)
        let subscription = try #require(try family.store.subscriptions(uid: Self.parent, app: Self.app).first)
        #expect(try family.engine.entitlements(uid: Self.child, app: Self.app).first?.expiresDate == subscription.expiresDate)

        // A refund of the first period (not the current one) leaves the subscription and the family's access.
        let earlier = try family.unit { try $0.refund(transactionID: purchase.id) }
        #expect(earlier.code == .ok && Self.revoked(earlier.effects)[Self.child] == nil, "\(earlier.effects)")
        #expect(try family.entitled(Self.child) == [SampleCatalog.monthly])

        // A refund of the renewal revokes the subscription and, with it, the family's copies.
        let refund = try family.unit { try $0.refund(transactionID: subscription.lastTransactionID) }
        #expect(Self.revoked(refund.effects)[Self.child] == [SampleCatalog.monthly])
        #expect(try family.entitled(Self.child).isEmpty)
        #expect(try family.engine.subscriptionStatuses(uid: Self.child, app: Self.app, groupID: nil).first?.state == .revoked)
    }

    @Test(arguments: LedgerBackend.allCases)
    func anExpiredSubscriptionIsNoLongerAnEntitlement(backend: LedgerBackend) throws {
        let family = try Family(backend, members: [Self.parent, Self.child])
        _ = try family.buy(SampleCatalog.monthly)
        let subscription = try #require(try family.store.subscriptions(uid: Self.parent, app: Self.app).first)
        #expect(try family.unit { try $0.setAutoRenew(false, .transaction(subscription.originalID)) }.code == .ok)
        _ = try family.unit { try $0.advanceClock(by: ClockDuration("P1M")!) }
        #expect(try family.entitled(Self.parent).isEmpty)
        #expect(try family.entitled(Self.child).isEmpty, "the family's access ends with the purchaser's")
    }

    @Test(arguments: LedgerBackend.allCases)
    func leavingRevokesBothWaysAndJoiningShares(backend: LedgerBackend) throws {
        let family = try Family(backend)
        _ = try family.buy(SampleCatalog.levelPack)                   // the parent's, shared with both
        _ = try family.buy(SampleCatalog.monthly, uid: Self.child)    // the child's, shared with both

        // The child leaves: loses the parent's level pack; the others lose the child's subscription.
        family.engine.families = FamilyGroups([[Self.parent, Self.teen]])
        let left = try #require(try family.unit { try $0.applyFamilies() })
        let revoked = Self.revoked(left)
        #expect(revoked[Self.child] == [SampleCatalog.levelPack])
        #expect(revoked[Self.parent] == [SampleCatalog.monthly] && revoked[Self.teen] == [SampleCatalog.monthly])
        #expect(try family.entitled(Self.child) == [SampleCatalog.monthly], "the child keeps what it bought")
        #expect(try family.entitled(Self.teen) == [SampleCatalog.levelPack], "the teen keeps the parent's share")
        #expect(try family.unit { try $0.applyFamilies() } == nil, "applied once")

        // The child comes back: gets a new copy of the parent's level pack, and shares its subscription again.
        family.engine.families = FamilyGroups([[Self.parent, Self.child, Self.teen]])
        let joined = try #require(try family.unit { try $0.applyFamilies() })
        #expect(Self.updates(joined, for: Self.child).map(\.productID) == [SampleCatalog.levelPack])
        #expect(Self.updates(joined, for: Self.parent).map(\.productID) == [SampleCatalog.monthly])
        #expect(Self.updates(joined, for: Self.teen).map(\.productID) == [SampleCatalog.monthly])
        #expect(Set(try family.entitled(Self.child)) == [SampleCatalog.levelPack, SampleCatalog.monthly])
        #expect(Set(try family.entitled(Self.parent)) == [SampleCatalog.levelPack, SampleCatalog.monthly])
    }

    @Test(arguments: LedgerBackend.allCases)
    func aRestoreBringsTheFamilysPurchases(backend: LedgerBackend) throws {
        let family = try Family(backend, members: [Self.parent, Self.child])
        let outcome = try family.buy(SampleCatalog.levelPack)
        let copy = try #require(Self.updates(outcome.effects, for: Self.child).first)

        // While the copy is unfinished, a restore adds nothing for it.
        let pending = try family.unit { try $0.restore(uid: Self.child, app: Self.app, applicationUsername: nil) }
        #expect(pending.value == 0)
        #expect(try family.unit { try $0.finish(uid: Self.child, app: Self.app, transactionID: copy.id) }.code == .ok)
        let restore = try family.unit { try $0.restore(uid: Self.child, app: Self.app, applicationUsername: nil) }
        let restored = Self.updates(restore.effects, for: Self.child)
        #expect(restored.count == 1 && restored.first?.originalID == outcome.value && restored.first?.state == .restored)
        #expect(try family.ownership(try #require(restored.first)) == "FAMILY_SHARED")
        // A restore for one account of the app's restores that account's purchases only.
        let named = try family.unit { try $0.restore(uid: Self.child, app: Self.app, applicationUsername: "someone") }
        #expect(named.value == 0)
    }

    @Test(arguments: LedgerBackend.allCases)
    func aMembersQueueIsNotFilledByAnother(backend: LedgerBackend) throws {
        let family = try Family(backend, members: [Self.parent, Self.child])
        family.engine.limits.unfinishedPerQueue = 1
        // The parent finishes each purchase: only the child's queue fills.
        func buy(_ product: String) throws -> Outcome {
            let outcome = try family.buy(product)
            #expect(try family.unit { try $0.finish(uid: Self.parent, app: Self.app, transactionID: outcome.value) }.code == .ok)
            return outcome
        }
        let first = try buy(SampleCatalog.levelPack)
        let copy = try #require(Self.updates(first.effects, for: Self.child).first)
        // The child's queue is at its limit: the parent's subscription is not shared into it now.
        let monthly = try buy(SampleCatalog.monthly)
        #expect(Self.updates(monthly.effects, for: Self.child).isEmpty)
        #expect(try family.unit { try $0.finish(uid: Self.child, app: Self.app, transactionID: copy.id) }.code == .ok)
        // Buying the non-consumable again shares nothing more: the child holds a copy.
        let again = try buy(SampleCatalog.levelPack)
        #expect(Self.updates(again.effects, for: Self.child).isEmpty)
        // Buying the running subscription again starts no period: nothing to share.
        let rebuy = try buy(SampleCatalog.monthly)
        #expect(Self.updates(rebuy.effects, for: Self.child).isEmpty)
        // A restore brings what was not shared while the queue was full.
        let restore = try family.unit { try $0.restore(uid: Self.child, app: Self.app, applicationUsername: nil) }
        #expect(Self.updates(restore.effects, for: Self.child).map(\.productID).contains(SampleCatalog.monthly))
    }

    @Test func familiesAreCheckedWhenMade() {
        let groups = FamilyGroups([[3, 1, 2, 1], [9]])
        #expect(groups.groups == [[1, 2, 3]], "members sorted and once; a family of one is none")
        #expect(groups.others(of: 2) == [1, 3] && groups.others(of: 9).isEmpty)
        #expect(groups.together(1, 3) && !groups.together(1, 9) && !groups.together(1, 1))
        #expect(groups.description == "1,2,3")
    }
}
