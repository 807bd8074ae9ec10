import StoreKitWire
import Synchronization

/// StoreKit 2 purchases still waiting (Ask to Buy) whose app chose `.onStorefrontChange`: when
/// the storefront changes, each is asked whether it goes on; a "no" withdraws it
/// (`cancelPayment`, as StoreKit 1's queue does for a delegate's "no"). The connection is
/// subscribed while any waits; one leaves the list once an update says it is no longer deferred.
final class PendingPurchases: Sendable {
    static let shared = PendingPurchases(connection: .shared)

    private let waiting = Mutex<[UInt64: StorefrontDecider]>([:])
    private let connection: StoreConnection

    init(connection: StoreConnection) {
        self.connection = connection
        var handlers = StoreConnection.Handlers()
        handlers.updated = { [weak self] records in
            for record in records where record.state != .deferred { self?.stopWatching(record.id) }
        }
        handlers.storefrontChanged = { [weak self] country, identifier in
            // Off the connection's reader thread: the app's closure may take its time.
            guard let self else { return }
            Task.detached { self.storefrontChanged(to: Storefront(countryCode: country, id: identifier)) }
        }
        connection.setHandlers(handlers, for: .pendingPurchases)
    }

    // The connection's subscription changes under the same lock as the list (see PushFeed).
    func watch(_ transactionID: UInt64, decider: StorefrontDecider) {
        waiting.withLock { waiting in
            waiting[transactionID] = decider
            connection.observe(true, for: .pendingPurchases)
        }
    }

    private func stopWatching(_ transactionID: UInt64) {
        waiting.withLock { waiting in
            guard waiting.removeValue(forKey: transactionID) != nil, waiting.isEmpty else { return }
            connection.observe(false, for: .pendingPurchases)
        }
    }

    private func storefrontChanged(to storefront: Storefront) {
        for (id, decider) in waiting.withLock({ Array($0) }) where !decider.decide(storefront) {
            stopWatching(id)
            connection.request({ .cancelPayment(requestID: $0, transactionID: id) }, completion: nil)
        }
    }
}
