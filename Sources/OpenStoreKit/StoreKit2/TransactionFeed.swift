import Foundation
import StoreKitWire
import Synchronization

// StoreKit 2's side of the one connection. Every `for await … in Transaction.updates` is a
// listener; the feed subscribes the connection while listeners exist and gives each of them every
// new or changed transaction, once:
// - a record is delivered only if its sequence number is higher than the one delivered before for
//   the same transaction (the daemon redelivers unfinished transactions after every (re)subscribe);
// - a new listener makes the feed fetch the unfinished transactions, so the first listener of the
//   process receives them at launch, and later ones receive only what changes afterwards;
// - while `Product.purchase()` of a product waits for the store's answer, records of that product
//   are held back; the purchase's own transaction goes to `purchase()` (never to `updates`) and
//   the others are delivered after it;
// - a refund arrives as `entitlementsRevoked` with product identifiers only: the feed reads the
//   history and delivers the refunded transaction, now carrying its revocation date.
// Events are handled one at a time, in arrival order, by one task.

/// The `Transaction.updates` listeners of the process and the purchases in flight.
final class TransactionFeed: Sendable {
    static let shared = TransactionFeed(connection: .shared)

    typealias Update = VerificationResult<Transaction>

    fileprivate enum Event: Sendable {
        case updated([TransactionRecord])
        case revoked([String])
        case listenerAdded
        case purchaseEnded(productID: String, transactionID: UInt64?, reply: @Sendable (TransactionRecord?) -> Void)
    }

    private struct Registry {
        var listeners: [UInt64: AsyncStream<Update>.Continuation] = [:]
        var nextListenerID: UInt64 = 1
        var purchasesInFlight: [String: Int] = [:]
    }

    private let registry = Mutex(Registry())
    private let events: AsyncStream<Event>.Continuation
    fileprivate let connection: StoreConnection

    init(connection: StoreConnection) {
        self.connection = connection
        let (stream, events) = AsyncStream<Event>.makeStream()
        self.events = events
        var handlers = StoreConnection.Handlers()
        handlers.updated = { records in events.yield(.updated(records)) }
        handlers.revoked = { productIDs in events.yield(.revoked(productIDs)) }
        connection.setHandlers(handlers, for: .transactionFeed)
        Task.detached { [self] in
            var pipeline = Pipeline()
            for await event in stream { await pipeline.handle(event, feed: self) }
        }
    }

    // MARK: Listeners

    /// A new listener's stream of updates; it ends when the iterating task is cancelled.
    func listen() -> AsyncStream<Update> {
        let (stream, continuation) = AsyncStream<Update>.makeStream()
        let id = registry.withLock { registry -> UInt64 in
            let id = registry.nextListenerID
            registry.nextListenerID += 1
            registry.listeners[id] = continuation
            return id
        }
        continuation.onTermination = { [self] _ in removeListener(id) }
        connection.observe(true, for: .transactionFeed)
        events.yield(.listenerAdded)
        return stream
    }

    /// How many listeners are registered.
    var listenerCount: Int { registry.withLock { $0.listeners.count } }

    private func removeListener(_ id: UInt64) {
        let none = registry.withLock { registry -> Bool in
            registry.listeners[id] = nil
            return registry.listeners.isEmpty
        }
        if none { connection.observe(false, for: .transactionFeed) }
    }

    fileprivate func broadcast(_ update: Update) {
        for listener in registry.withLock({ Array($0.listeners.values) }) { listener.yield(update) }
    }

    // MARK: Purchases

    /// Holds back records of `productID` until `endPurchase(of:transactionID:)`.
    func beginPurchase(of productID: String) {
        registry.withLock { $0.purchasesInFlight[productID, default: 0] += 1 }
    }

    /// Ends a purchase: its own transaction's latest record (`transactionID` nil: the payment was
    /// refused), taken from the records held back, else fetched from the daemon. The record is not
    /// delivered to listeners later; other held records of the product are.
    func endPurchase(of productID: String, transactionID: UInt64?) async -> TransactionRecord? {
        await withCheckedContinuation { continuation in
            events.yield(.purchaseEnded(productID: productID, transactionID: transactionID) { continuation.resume(returning: $0) })
        }
    }

    fileprivate func isPurchaseInFlight(of productID: String) -> Bool {
        registry.withLock { ($0.purchasesInFlight[productID] ?? 0) > 0 }
    }

    fileprivate func purchaseEnded(of productID: String) {
        registry.withLock { registry in
            let remaining = (registry.purchasesInFlight[productID] ?? 1) - 1
            registry.purchasesInFlight[productID] = remaining > 0 ? remaining : nil
        }
    }
}

/// The feed's state that only its one task touches.
private struct Pipeline {
    /// The sequence number of each transaction's latest record delivered to listeners (or taken by
    /// a purchase).
    var delivered: [UInt64: UInt64] = [:]
    /// Records held back while a purchase of their product waits for its answer, in arrival order.
    var held: [TransactionRecord] = []

    mutating func handle(_ event: TransactionFeed.Event, feed: TransactionFeed) async {
        switch event {
        case .updated(let records):
            await receive(records, feed: feed)
        case .listenerAdded:
            guard let unfinished = try? await feed.connection.allTransactions({ .unfinished(requestID: $0, afterID: $1) }) else { return }
            await receive(unfinished, feed: feed)
        case .revoked(let productIDs):
            guard feed.listenerCount > 0,
                  let history = try? await feed.connection.allTransactions({ .history(requestID: $0, afterID: $1) })
            else { return }
            for productID in productIDs {
                let refunded = history.filter { $0.productID == productID && $0.revocationDate != nil }
                if let latest = refunded.max(by: { $0.sequence < $1.sequence }) { await deliver(latest, feed: feed) }
            }
        case .purchaseEnded(let productID, let transactionID, let reply):
            feed.purchaseEnded(of: productID)
            var own = held.last { $0.id == transactionID }
            held.removeAll { $0.id == transactionID }
            if own == nil, let transactionID { own = await fetch(transactionID, feed: feed) }
            if let own { delivered[own.id] = max(delivered[own.id] ?? 0, own.sequence) }
            reply(own)
            if !feed.isPurchaseInFlight(of: productID) {
                let released = held.filter { $0.productID == productID }
                held.removeAll { $0.productID == productID }
                for record in released { await deliver(record, feed: feed) }
            }
        }
    }

    private mutating func receive(_ records: [TransactionRecord], feed: TransactionFeed) async {
        var records = records
        // The snapshot after `subscribe` comes unsigned (StoreKit 1 needs no JWS): a purchase
        // without its JWS is read again, signed, from the queue (still without one only if the
        // daemon could not sign it: then it is delivered unverified, as it is).
        if records.contains(where: { $0.isTransaction && $0.jwsRepresentation == nil }),
           let signed = try? await feed.connection.allTransactions({ .unfinished(requestID: $0, afterID: $1) }) {
            let byID = Dictionary(signed.map { ($0.id, $0) }, uniquingKeysWith: { $1 })
            records = records.compactMap { record in
                guard record.isTransaction, record.jwsRepresentation == nil else { return record }
                return byID[record.id]   // finished meanwhile: nothing to announce
            }
        }
        // The receipt lists what is about to be delivered (StoreKit 2 keeps it current too).
        if feed.listenerCount > 0, records.contains(where: { $0.isTransaction && !feed.isPurchaseInFlight(of: $0.productID) }) {
            await ReceiptFile.refreshed(connection: feed.connection)
        }
        for record in records {
            if feed.isPurchaseInFlight(of: record.productID) {
                held.append(record)
            } else {
                await deliver(record, feed: feed)
            }
        }
    }

    private mutating func deliver(_ record: TransactionRecord, feed: TransactionFeed) async {
        guard record.isTransaction, feed.listenerCount > 0 else { return }
        if let sequence = delivered[record.id], sequence >= record.sequence { return }
        delivered[record.id] = record.sequence
        feed.broadcast(await TransactionResults.result(for: record))
    }

    /// A purchase's transaction when no push brought it (the connection was not subscribed).
    private func fetch(_ id: UInt64, feed: TransactionFeed) async -> TransactionRecord? {
        if let record = try? await feed.connection.allTransactions({ .unfinished(requestID: $0, afterID: $1) }).first(where: { $0.id == id }) {
            return record
        }
        return try? await feed.connection.allTransactions({ .history(requestID: $0, afterID: $1) }).first { $0.id == id }
    }
}
