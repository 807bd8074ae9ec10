import StoreKitLedger
import StoreKitWire

// Family Sharing: buyers grouped into families (`[Family]` in storekitd.conf) share what one of
// them buys of a family-shareable non-consumable or auto-renewable subscription
// (`"familyShareable": true` in the catalogue).
//
// A member's access is a transaction of their own: a **family copy**, a `restored` transaction
// in the member's queue whose original is the purchase (for a subscription, the subscription's
// original transaction), which another buyer made. That is the whole record of it: a family copy
// is told from a restored copy of one's own purchase by its original's buyer, so both ledgers
// (and a fleet's hosts) hold it as they hold any restored transaction. StoreKit 1 observers see
// it as `restored`, StoreKit 2 as a transaction whose `ownershipType` is `.familyShared`
// (`inAppOwnershipType` `FAMILY_SHARED` in the signed payload); receipts list it.
//
// Copies are made when a member's purchase completes (bought, approved, resolved, renewed: every
// other member of the family gets one, pushed to their observers), when a member restores (the
// family's purchases with their own), and when a buyer joins a family (what the others hold now).
// They are revoked (`didRevokeEntitlementsForProductIdentifiers`) when the purchase is refunded,
// when the member leaves the family, or when the buyer does.

/// The families of the configuration, as uids.
public struct FamilyGroups: Sendable, Equatable, CustomStringConvertible {
    /// Each family's members, ascending; no uid is in two families.
    public private(set) var groups: [[UInt32]]

    /// Most members a family may have (an organizer and five others, as Apple's).
    public static let maximumMembers = 6

    public init(_ groups: [[UInt32]] = []) {
        self.groups = groups.map { Array(Set($0)).sorted() }.filter { $0.count > 1 }.sorted { $0[0] < $1[0] }
    }

    /// The other members of `uid`'s family (empty when `uid` is in none).
    public func others(of uid: UInt32) -> [UInt32] {
        groups.first { $0.contains(uid) }?.filter { $0 != uid } ?? []
    }

    public func together(_ a: UInt32, _ b: UInt32) -> Bool {
        a != b && groups.contains { $0.contains(a) && $0.contains(b) }
    }

    /// Every (a, b) with a < b in the same family.
    var pairs: Set<Pair> {
        var result = Set<Pair>()
        for group in groups {
            for (index, a) in group.enumerated() {
                for b in group[(index + 1)...] { result.insert(Pair(a: a, b: b)) }
            }
        }
        return result
    }

    struct Pair: Hashable {
        var a: UInt32
        var b: UInt32
    }

    /// `1000,1001;1002,1003`: what the ledger keeps of the families its copies were made for.
    public var description: String {
        groups.map { $0.map(String.init).joined(separator: ",") }.joined(separator: ";")
    }

    init?(stored text: String) {
        var groups: [[UInt32]] = []
        for part in text.split(separator: ";") {
            let members = part.split(separator: ",").map { UInt32($0) }
            guard members.allSatisfy({ $0 != nil }) else { return nil }
            groups.append(members.compactMap { $0 })
        }
        self.init(groups)
    }
}

extension PaymentQueueEngine {
    /// The settings key of the families the ledger's copies were made for (per host in a fleet,
    /// whose hosts map names to uids of their own).
    var familiesKey: String {
        store.fleetIdentity.map { "family.groups@\($0.host)" } ?? "family.groups"
    }

    /// Whether a product is shared with the family when bought.
    func isShareable(_ product: CatalogProduct?) -> Bool {
        guard let product, product.familyShareable else { return false }
        return product.kind == .nonConsumable || product.kind == .autoRenewable
    }

    /// What a family copy of `record` names as its original: the purchase itself; for a
    /// subscription, its original transaction (renewals, upgrades and resubscriptions share it).
    func familyRoot(of record: TransactionRecord, product: CatalogProduct) throws(LedgerError) -> UInt64 {
        guard product.kind == .autoRenewable else { return record.id }
        let groupID = product.subscriptionGroupID ?? product.id
        return try store.subscription(uid: record.uid, app: record.app, groupID: groupID)?.originalID ?? record.originalID ?? record.id
    }

    /// Whether `record` is a family copy: a `restored` transaction whose original another buyer made.
    public func isFamilyCopy(_ record: TransactionRecord) throws(LedgerError) -> Bool {
        try familyPurchase(of: record) != nil
    }

    /// The purchase a family copy restores (nil when `record` is not a family copy).
    func familyPurchase(of record: TransactionRecord) throws(LedgerError) -> TransactionRecord? {
        guard record.state == .restored, let originalID = record.originalID, originalID != record.id,
              let original = try store.transaction(id: originalID), original.uid != record.uid else { return nil }
        return original
    }

    /// A family copy of the purchase `root` (of the product `record` is a transaction of) for `member`.
    private func familyCopy(of record: TransactionRecord, root: UInt64, for member: UInt32,
                            expiresDate: Int64?) throws(LedgerError) -> TransactionRecord {
        let copy = TransactionRecord(
            id: try store.allocateTransactionID(), originalID: root, uid: member, app: record.app,
            productID: record.productID, quantity: record.quantity, state: .restored,
            sequence: try store.nextSequence(uid: member, app: record.app), date: clock.now(),
            expiresDate: expiresDate)
        try store.insert(copy)
        return copy
    }

    /// Shares a purchase that just completed (`record`, `purchased`) with the buyer's family:
    /// a family copy for each other member, pushed to their observers.
    /// `startsPeriod`: whether a subscription's purchase starts a period now (a purchase of the
    /// running product again, or a downgrade that waits for the renewal, shares nothing).
    func shareWithFamily(_ record: TransactionRecord, startsPeriod: Bool = true) throws(LedgerError) -> [Effect] {
        let members = families.others(of: record.uid)
        guard !members.isEmpty, record.state == .purchased, record.revocationDate == nil,
              let product = catalogs[record.app]?.product(record.productID), isShareable(product),
              try !hasCommerce(record) else { return [] }
        let root = try familyRoot(of: record, product: product)
        // A period that starts now is shared: a purchase, an upgrade, a renewal. A downgrade
        // bought now starts at the next renewal, shared then; buying the running product again
        // starts nothing.
        if product.kind == .autoRenewable, !startsPeriod { return [] }
        var effects: [Effect] = []
        for member in members {
            // Nothing twice: a member holding an unrevoked copy of a non-consumable gets none
            // (buying it again shares nothing more), and a member's queue at its limit of
            // unfinished transactions gets none until its app finishes some (a restore brings it).
            if product.kind == .nonConsumable, try holdsFamilyCopy(of: record.productID, from: record.uid, member: member, app: record.app) {
                continue
            }
            guard try store.unfinishedCount(of: QueueKey(uid: member, app: record.app)) < limits.unfinishedPerQueue else { continue }
            let copy = try familyCopy(of: record, root: root, for: member, expiresDate: record.expiresDate)
            effects.append(.updated(QueueKey(uid: member, app: record.app), [copy]))
        }
        return effects
    }

    /// Whether `member` holds an unrevoked family copy of `productID` that `purchaser` bought.
    func holdsFamilyCopy(of productID: String, from purchaser: UInt32, member: UInt32, app: String) throws(LedgerError) -> Bool {
        for record in try store.all(uid: member, app: app)
        where record.productID == productID && record.state == .restored && record.revocationDate == nil {
            if try familyPurchase(of: record)?.uid == purchaser { return true }
        }
        return false
    }

    /// What the family of `uid` shares with them now in `app`, for a restore or a join: each
    /// other member's unrevoked purchases of shareable non-consumables, and the current
    /// transaction of each of their shareable subscriptions that is entitled. Keyed by the
    /// family copy's original (oldest first), with the transaction to copy and its end.
    func familyHoldings(of uid: UInt32, in app: String, from members: [UInt32])
        throws(LedgerError) -> [(root: UInt64, record: TransactionRecord, expires: Int64?)]
    {
        guard let catalog = catalogs[app] else { return [] }
        var result: [(root: UInt64, record: TransactionRecord, expires: Int64?)] = []
        for member in members where member != uid {
            var products = Set<String>()
            for record in try store.all(uid: member, app: app)
            where record.state == .purchased && record.revocationDate == nil {
                // One holding per non-consumable: buying it again holds nothing more.
                guard let product = catalog.product(record.productID), isShareable(product),
                      product.kind == .nonConsumable, try !hasCommerce(record), products.insert(product.id).inserted else { continue }
                result.append((record.id, record, nil))
            }
            for subscription in try store.subscriptions(uid: member, app: app) where subscription.status.isEntitled {
                guard isShareable(catalog.product(subscription.productID)),
                      let current = try store.transaction(id: subscription.lastTransactionID),
                      current.revocationDate == nil, try !hasCommerce(current) else { continue }
                result.append((subscription.originalID, current, subscription.expiresDate))
            }
        }
        return result.sorted { $0.root < $1.root }
    }

    /// Restores what `uid`'s family shares (part of `restore`): a family copy of each of
    /// `familyHoldings` that has no unfinished copy in the queue yet.
    func restoreFromFamily(uid: UInt32, app: String, pending: Set<UInt64>) throws(LedgerError) -> [TransactionRecord] {
        var restored: [TransactionRecord] = []
        for holding in try familyHoldings(of: uid, in: app, from: families.others(of: uid))
        where !pending.contains(holding.root) {
            restored.append(try familyCopy(of: holding.record, root: holding.root, for: uid, expiresDate: holding.expires))
        }
        return restored
    }

    /// The current families' changes since the ledger last saw them, applied: a buyer who joined
    /// gets a family copy of what the others hold now (and they of what the buyer holds); the
    /// copies between buyers no longer in one family are revoked. Runs inside a unit of work at
    /// start and after each reload; nil when the families are as the ledger last saw them.
    public func applyFamilies() throws(LedgerError) -> [Effect]? {
        // A ledger migrated from one host's SQLite file holds the plain key: the same families.
        var storedText = try store.setting(familiesKey)
        if storedText == nil, familiesKey != "family.groups", let plain = try store.setting("family.groups") {
            storedText = plain
            try store.setSetting("family.groups", nil)
        }
        let stored = storedText.flatMap { FamilyGroups(stored: $0) } ?? FamilyGroups()
        guard stored != families else { return nil }
        let before = stored.pairs
        let after = families.pairs
        var effects: [Effect] = []
        for app in catalogs.keys.sorted() {
            for pair in before.subtracting(after).sorted(by: { ($0.a, $0.b) < ($1.a, $1.b) }) {
                effects += try revokeFamilyCopies(in: QueueKey(uid: pair.a, app: app), from: pair.b)
                effects += try revokeFamilyCopies(in: QueueKey(uid: pair.b, app: app), from: pair.a)
            }
            for pair in after.subtracting(before).sorted(by: { ($0.a, $0.b) < ($1.a, $1.b) }) {
                for (member, from) in [(pair.a, pair.b), (pair.b, pair.a)] {
                    let copies = try familyHoldings(of: member, in: app, from: [from]).map { holding throws(LedgerError) in
                        try familyCopy(of: holding.record, root: holding.root, for: member, expiresDate: holding.expires)
                    }
                    if !copies.isEmpty { effects.append(.updated(QueueKey(uid: member, app: app), copies)) }
                }
            }
        }
        try store.setSetting(familiesKey, families.groups.isEmpty ? nil : families.description)
        return effects
    }

    /// Revokes the unrevoked family copies in `queue` of what `purchaser` bought.
    private func revokeFamilyCopies(in queue: QueueKey, from purchaser: UInt32) throws(LedgerError) -> [Effect] {
        var products: [String] = []
        let now = clock.now()
        for record in try store.all(uid: queue.uid, app: queue.app) where record.state == .restored && record.revocationDate == nil {
            guard let purchase = try familyPurchase(of: record), purchase.uid == purchaser else { continue }
            let sequence = try store.nextSequence(uid: queue.uid, app: queue.app)
            guard try store.setRevocation(id: record.id, date: now, reason: 0, sequence: sequence) else { continue }
            if !products.contains(record.productID) { products.append(record.productID) }
        }
        return products.isEmpty ? [] : [.revoked(queue, products)]
    }

    /// What a refund of `record` revokes, given the copies a refund revokes (`copies`): for a
    /// subscription, its family copies (which name the subscription's original) go when the
    /// refund ends the subscription (it refunds its current transaction: the family loses it
    /// with the purchaser), and stay when it does not (an earlier period's refund leaves the
    /// running subscription, and the family's access, as they are).
    func withFamilyCopies(_ copies: [TransactionRecord], revokedByRefundOf record: TransactionRecord) throws(LedgerError) -> [TransactionRecord] {
        guard let product = catalogs[record.app]?.product(record.productID), product.kind == .autoRenewable,
              let subscription = try store.subscription(uid: record.uid, app: record.app, groupID: product.subscriptionGroupID ?? product.id)
        else { return copies }
        if subscription.lastTransactionID == record.id {
            let family = try store.restoredCopies(of: subscription.originalID).filter { $0.uid != record.uid }
            return copies + family.filter { copy in !copies.contains { $0.id == copy.id } }
        }
        var kept: [TransactionRecord] = []
        for copy in copies where try familyPurchase(of: copy) == nil { kept.append(copy) }
        return kept
    }

    /// Each shareable subscription `uid` has had through the family in
    /// `app` (while the buyer and the purchaser are one family): the member's latest family copy of
    /// it, revoked or not, with the purchaser's subscription.
    func familySubscriptions(uid: UInt32, app: String, history: [TransactionRecord])
        throws(LedgerError) -> [(copy: TransactionRecord, subscription: Subscription)]
    {
        guard let catalog = catalogs[app] else { return [] }
        var latest: [UInt64: TransactionRecord] = [:]
        for record in history where record.state == .restored {
            guard let originalID = record.originalID, catalog.product(record.productID)?.kind == .autoRenewable else { continue }
            if let kept = latest[originalID], kept.id > record.id { continue }
            latest[originalID] = record
        }
        var result: [(copy: TransactionRecord, subscription: Subscription)] = []
        for (originalID, copy) in latest.sorted(by: { $0.key < $1.key }) {
            guard let subscription = try store.subscription(originalID: originalID), subscription.uid != uid,
                  families.together(subscription.uid, uid) else { continue }
            result.append((copy, subscription))
        }
        return result
    }
}
