import Foundation
import StoreKitWire

extension StoreConnection {
    /// Sends a request and suspends until its final reply; a refusal throws the `SKError` that
    /// StoreKit 1 reports for it (`StoreConnection.error(code:detail:message:)`).
    func reply(to make: (UInt32) -> ClientMessage) async throws(SKError) -> ServerMessage {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<ServerMessage, SKError>, Never>) in
            request(make) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Every record of a paged `unfinished` or `history` request (docs/protocol.md §5): `page`
    /// makes the request for the records after an id, asked again after the last id received
    /// until a page comes back empty.
    func allTransactions(_ page: (UInt32, UInt64) -> ClientMessage) async throws(SKError) -> [TransactionRecord] {
        var records: [TransactionRecord] = []
        while true {
            let after = records.last?.id ?? 0
            guard case .transactions(_, let next) = try await reply(to: { page($0, after) }) else { throw SKError(.unknown) }
            if next.isEmpty { return records }
            records += next
        }
    }

    /// The catalogue's records of `identifiers` (unknown identifiers are left out).
    func products(_ identifiers: [String]) async throws(SKError) -> [ProductRecord] {
        guard case .products(_, let products, _) = try await reply(to: { .products(requestID: $0, identifiers: identifiers) }) else {
            throw SKError(.unknown)
        }
        return products
    }
}
