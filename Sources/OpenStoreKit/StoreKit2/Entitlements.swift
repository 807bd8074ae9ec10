import Foundation
import StoreKitWire
import Synchronization

/// What `Transaction.currentEntitlements` computes: the same rule as the daemon's
/// `storekitctl entitlements` (docs/protocol.md §11a), from the history, the catalogue and the
/// subscription statuses.
enum Entitlements {
    static func current() async -> [VerificationResult<Transaction>] {
        guard let history = try? await Transaction.history() else { return [] }
        let bought = history.filter { $0.isTransaction && $0.revocationDate == nil }
        let products = await ProductCache.shared.records(for: Set(bought.map(\.productID)))

        // The latest of each non-consumable and non-renewing subscription; each purchase with an
        // Advanced Commerce request on its own (its restored copies are of it).
        var latest: [String: (id: UInt64, result: VerificationResult<Transaction>)] = [:]
        for record in bought {
            guard let kind = products[record.productID]?.kind, kind == .nonConsumable || kind == .nonRenewing else { continue }
            let result = await TransactionResults.result(for: record, product: products[record.productID])
            let transaction = result.unsafePayloadValue
            let key = transaction.advancedCommerceInfo == nil ? record.productID : "\(record.productID)#\(transaction.originalID)"
            if let current = latest[key], current.id > record.id { continue }
            latest[key] = (record.id, result)
        }
        var entitled = Array(latest.values)

        if bought.contains(where: { products[$0.productID]?.kind == .autoRenewable }) {
            do {
                let reply = try await StoreConnection.shared.reply { .subscriptionStatus(requestID: $0, groupID: "") }
                if case .subscriptionStatus(_, let statuses) = reply {
                    for status in statuses where status.state == .subscribed || status.state == .inGracePeriod {
                        guard status.transaction.revocationDate == nil else { continue }
                        let record = status.transaction
                        entitled.append((record.id, await TransactionResults.result(for: record, product: products[record.productID])))
                    }
                }
            } catch {
                reportStatusFailure(error)
            }
        }
        return entitled.sorted { $0.id < $1.id }.map(\.result)
    }

    private static let reported = Mutex(false)

    /// Without subscription statuses, subscriptions are left out of the entitlements: said once on stderr.
    private static func reportStatusFailure(_ error: SKError) {
        guard !reported.withLock({ reported in defer { reported = true }; return reported }) else { return }
        FileHandle.standardError.write(Data(
            "OpenStoreKit: subscriptions are left out of currentEntitlements: the store did not give their status (\(error.localizedDescription))\n".utf8))
    }
}
