import Foundation
import StoreKitWire

/// Apple's `SKIncludeConsumableInAppPurchaseHistory` (iOS 18): whether `Transaction.all`,
/// `Transaction.latest(for:)` and `Product.latestTransaction` include consumables the app has
/// finished. By default they do not (unless refunded); an app opts in with the key set to true in
/// its bundle's Info.plist, as on Apple platforms, or, since a Linux executable rarely has one,
/// with the environment variable of the same name (`1`, `true` or `YES`).
enum ConsumableHistory {
    static let key = "SKIncludeConsumableInAppPurchaseHistory"

    static var isIncluded: Bool {
        if let value = ProcessInfo.processInfo.environment[key] {
            return ["1", "true", "yes"].contains(value.lowercased())
        }
        return Bundle.main.object(forInfoDictionaryKey: key) as? Bool ?? false
    }

    /// The records of `records` the history shows: all of them when the app opted in, else all
    /// but finished, unrefunded consumables (the catalogue says which products are consumable).
    static func shown(_ records: [TransactionRecord]) async -> [TransactionRecord] {
        guard !isIncluded else { return records }
        let candidates = records.filter { $0.finished && $0.revocationDate == nil }
        guard !candidates.isEmpty else { return records }
        let products = await ProductCache.shared.records(for: Set(candidates.map(\.productID)))
        return records.filter { record in
            !(record.finished && record.revocationDate == nil && products[record.productID]?.kind == .consumable)
        }
    }
}
