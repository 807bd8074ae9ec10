import Foundation
import StoreKitWire

extension SKPaymentQueue {
    /// This app's unfinished transactions as the store holds them now, without becoming an observer.
    public func unfinishedTransactions() async throws -> [SKPaymentTransaction] {
        let connection = StoreConnection.shared
        return try await withCheckedThrowingContinuation { continuation in
            connection.request({ .unfinished(requestID: $0) }) { result in
                switch result {
                case .success(.transactions(_, let records)):
                    continuation.resume(returning: records.map { SKPaymentTransaction(record: $0, payment: nil) })
                case .success:
                    continuation.resume(throwing: SKError(.unknown))
                case .failure(let error):
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// Finishes a transaction and returns once the store has made the finish durable.
    public func finish(_ transaction: SKPaymentTransaction) async throws {
        if transaction.transactionState == .purchasing {
            fatalError("Cannot finish a purchasing transaction")
        }
        guard let id = transaction.record?.id ?? transaction.transactionIdentifier.flatMap({ UInt64($0) }), id != 0 else {
            return
        }
        let connection = StoreConnection.shared
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            connection.request({ .finish(requestID: $0, transactionID: id) }) { result in
                switch result {
                case .success: continuation.resume()
                case .failure(let error): continuation.resume(throwing: error)
                }
            }
        }
    }

    /// Fetches products by identifier; unknown identifiers are returned separately.
    public func products(for identifiers: Set<String>) async throws -> (products: [SKProduct], invalidProductIdentifiers: [String]) {
        let connection = StoreConnection.shared
        return try await withCheckedThrowingContinuation { continuation in
            connection.fetchProducts(identifiers.sorted()) { result in
                switch result {
                case .success(let answer):
                    continuation.resume(returning: (answer.products.map(SKProduct.init(record:)), answer.invalid))
                case .failure(let error):
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}
