import StoreKitLedger

// What the engine keeps in the ledger's settings besides its tables (offers, billing plans,
// Advanced Commerce requests, price increases, win-backs) goes with what it is about: a transaction's with the transaction
// (`deleteTransaction`), a subscription's and its transactions' with the history (`clear`).

extension PaymentQueueEngine {
    /// The settings kept per transaction: the offer, the commitment billing period and the
    /// Advanced Commerce request it was bought or renewed with, and what a waiting purchase (Ask
    /// to Buy, interrupted) was asked with.
    static func transactionSettingKeys(_ id: UInt64) -> [String] {
        [offerKey(id), waitingOfferKey(id), commitmentKey(id), waitingPlanKey(id), commerceKey(id)]
    }

    /// The settings kept per subscription (by its original transaction).
    static func subscriptionSettingKeys(_ originalID: UInt64) -> [String] {
        [runningOfferKey(originalID), nextOfferKey(originalID), runningCommitmentKey(originalID), nextPlanKey(originalID),
         priceIncreaseKey(originalID), winBackKey(originalID), runningCommerceKey(originalID)]
    }

    /// Deletes the settings under `keys` that exist.
    func forgetSettings(_ keys: [String]) throws(LedgerError) {
        for key in keys where try store.setting(key) != nil { try store.setSetting(key, nil) }
    }

    /// What `clear(uid:app:)` is about to delete, for the settings to go with it: the ids of the
    /// matching queues' transactions, the original ids of their subscriptions and the reference
    /// settings of the Advanced Commerce requests their purchases used.
    func historyIDs(uid: UInt32?, app: String?) throws(LedgerError) -> (transactions: [UInt64], subscriptions: [UInt64], references: [String]) {
        var transactions: [UInt64] = []
        var references: [String] = []
        var after: UInt64 = 0
        while true {
            let page = try store.list(uid: uid, app: app, unfinishedOnly: false, afterID: after, limit: 1000)
            transactions += page.map(\.id)
            references += try commerceReferenceKeys(of: page)
            guard page.count == 1000, let last = page.last?.id else { break }
            after = last
        }
        return (transactions, try store.subscriptions(uid: uid, app: app).map(\.originalID), references)
    }
}
