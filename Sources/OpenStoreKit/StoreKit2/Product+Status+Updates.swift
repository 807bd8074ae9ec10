import StoreKitWire

extension Product.SubscriptionInfo.Status {
    /// The statuses of the user's subscriptions as they change.
    public typealias Statuses = PushSequence<Product.SubscriptionInfo.Status>

    /// Emits a subscription's status whenever the store pushes a change of its transactions (a
    /// purchase, a renewal, an upgrade, a refund, a family member's share), from the moment
    /// iteration starts. A change of state that changes no transaction (an expiry, the start of a
    /// billing retry or grace period) is not pushed: `status` reads it.
    public static var updates: Statuses { Statuses(listen: { StatusFeed.shared.listen() }) }
}

extension Product.SubscriptionInfo {
    /// The status of the subscription that transaction `transactionID` of the user belongs to;
    /// nil when there is no such transaction or it is not of an auto-renewable subscription.
    public static func status(transactionID: UInt64) async throws -> Status? {
        let history: [TransactionRecord]
        do {
            history = try await Transaction.history()
        } catch {
            throw StoreKitError(error)
        }
        guard let record = history.first(where: { $0.id == transactionID }) else { return nil }
        return try await StatusFeed.status(of: record)
    }
}

extension Transaction {
    /// The status of this transaction's subscription; nil unless it is of an auto-renewable
    /// subscription (or the store cannot be reached).
    public var subscriptionStatus: Product.SubscriptionInfo.Status? {
        get async {
            guard productType == .autoRenewable, let groupID = subscriptionGroupID,
                  let statuses = try? await Product.SubscriptionInfo.status(for: groupID) else { return nil }
            return StatusFeed.pick(statuses, originalID: originalID)
        }
    }
}

/// The `Product.SubscriptionInfo.Status.updates` listeners of the process.
enum StatusFeed {
    static let shared = PushFeed<Product.SubscriptionInfo.Status>(connection: .shared, key: .statusFeed) { yield in
        var handlers = StoreConnection.Handlers()
        handlers.updated = { records in
            let changed = records.filter(\.isTransaction)
            guard !changed.isEmpty else { return }
            yield { await statuses(of: changed) }
        }
        handlers.revoked = { productIDs in
            yield {
                let products = await ProductCache.shared.records(for: Set(productIDs))
                var result: [Product.SubscriptionInfo.Status] = []
                for groupID in Set(products.values.compactMap { $0.kind == .autoRenewable ? $0.subscriptionGroupID : nil }).sorted() {
                    result += (try? await Product.SubscriptionInfo.status(for: groupID)) ?? []
                }
                return result
            }
        }
        return handlers
    }

    /// The status of each subscription among `records` (once per subscription).
    static func statuses(of records: [TransactionRecord]) async -> [Product.SubscriptionInfo.Status] {
        var seen = Set<UInt64>()
        var result: [Product.SubscriptionInfo.Status] = []
        for record in records where seen.insert(record.originalID ?? record.id).inserted {
            if let status = try? await status(of: record) { result.append(status) }
        }
        return result
    }

    /// The status of the subscription `record` belongs to.
    static func status(of record: TransactionRecord) async throws -> Product.SubscriptionInfo.Status? {
        guard let product = await ProductCache.shared.records(for: [record.productID])[record.productID],
              product.kind == .autoRenewable, let groupID = product.subscriptionGroupID else { return nil }
        return pick(try await Product.SubscriptionInfo.status(for: groupID), originalID: record.originalID ?? record.id)
    }

    /// The status whose subscription has `originalID` as its original transaction; else the first.
    static func pick(_ statuses: [Product.SubscriptionInfo.Status], originalID: UInt64) -> Product.SubscriptionInfo.Status? {
        statuses.first { $0.transaction.unsafePayloadValue.originalID == originalID } ?? statuses.first
    }
}
