import Foundation
import StoreKitWire

extension Transaction {
    /// Every new or changed transaction that does not come from this process's own `purchase()`:
    /// purchases made elsewhere (`storekitctl buy`, another process), approved Ask to Buy requests,
    /// renewals, refunds (with `revocationDate` set). At launch, the first listener also receives
    /// the unfinished transactions, once. Iterate it in a task started at launch and kept for the
    /// life of the app; every listener receives every update.
    public static var updates: Transactions { Transactions(source: .updates) }

    /// The transactions the app has not finished yet (purchases and restores).
    public static var unfinished: Transactions {
        Transactions(source: .snapshot {
            await TransactionResults.results(for: (try? await StoreConnection.shared.allTransactions { .unfinished(requestID: $0, afterID: $1) }) ?? [])
        })
    }

    /// Every transaction of the user for this app, finished or not, oldest first; finished
    /// consumables only when refunded, unless the app opted in (`SKIncludeConsumableInAppPurchaseHistory`).
    public static var all: Transactions {
        Transactions(source: .snapshot { await TransactionResults.results(for: await ConsumableHistory.shown((try? await history()) ?? [])) })
    }

    /// The transactions that entitle the user now: the latest unrefunded purchase of each
    /// non-consumable and non-renewing subscription, and the current transaction of each
    /// auto-renewable subscription that is subscribed or in its grace period.
    public static var currentEntitlements: Transactions {
        Transactions(source: .snapshot { await Entitlements.current() })
    }

    /// The transactions that entitle the user to `productID` now.
    public static func currentEntitlements(for productID: String) -> Transactions {
        Transactions(source: .snapshot { await Entitlements.current().filter { $0.unsafePayloadValue.productID == productID } })
    }

    /// The transaction that entitles the user to `productID` now, if any.
    public static func currentEntitlement(for productID: String) async -> VerificationResult<Transaction>? {
        await Entitlements.current().first { $0.unsafePayloadValue.productID == productID }
    }

    /// The user's latest transaction for `productID`, if any (of a consumable, as `all` shows them).
    public static func latest(for productID: String) async -> VerificationResult<Transaction>? {
        guard let history = try? await history() else { return nil }
        let records = await ConsumableHistory.shown(history.filter { $0.productID == productID })
        guard let latest = records.filter({ $0.isTransaction }).max(by: { $0.id < $1.id }) else {
            return nil
        }
        return await TransactionResults.result(for: latest)
    }

    /// The daemon's history of this (user, app): every transaction, finished or not, by id.
    static func history() async throws(SKError) -> [TransactionRecord] {
        try await StoreConnection.shared.allTransactions { .history(requestID: $0, afterID: $1) }
    }
}
