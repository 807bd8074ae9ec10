import Foundation
import StoreKitWire

extension SKPaymentQueue {
    /// This app's unfinished transactions as the store holds them now, without becoming an observer.
    public func unfinishedTransactions() async throws -> [SKPaymentTransaction] {
        let records = try await StoreConnection.shared.allTransactions { .unfinished(requestID: $0, afterID: $1) }
        return records.map { SKPaymentTransaction(record: $0, payment: nil) }
    }

    /// Finishes a transaction and returns once the store has made the finish durable.
    public func finish(_ transaction: SKPaymentTransaction) async throws {
        if transaction.transactionState == .purchasing {
            fatalError("Cannot finish a purchasing transaction")
        }
        guard let id = transaction.record?.id ?? transaction.transactionIdentifier.flatMap({ UInt64($0) }), id != 0 else {
            return
        }
        _ = try await StoreConnection.shared.reply { .finish(requestID: $0, transactionID: id) }
    }

    /// Fetches products by identifier; unknown identifiers are returned separately.
    public func products(for identifiers: Set<String>) async throws -> (products: [SKProduct], invalidProductIdentifiers: [String]) {
        let reply = try await StoreConnection.shared.reply { .products(requestID: $0, identifiers: identifiers.sorted()) }
        guard case .products(_, let products, let invalid) = reply else { throw SKError(.unknown) }
        return (products.map(SKProduct.init(record:)), invalid)
    }
}
