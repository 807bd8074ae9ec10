import StoreKitLedger
import StoreKitWire

/// Promoted purchases offered while none of the app's observers was connected wait in the store
/// and are offered to the next observer that registers, as StoreKit queues them for the app.
extension PaymentQueueEngine {
    static func promotionsKey(_ queue: QueueKey) -> String { "promotions.\(queue.uid).\(queue.app)" }

    /// Keeps a promotion of `productID` for `queue` until an observer registers.
    public func queuePromotion(_ queue: QueueKey, productID: String) throws(LedgerError) {
        let key = Self.promotionsKey(queue)
        var productIDs = try store.setting(key).map { $0.split(separator: "\n").map(String.init) } ?? []
        guard !productIDs.contains(productID) else { return }
        productIDs.append(productID)
        try store.setSetting(key, productIDs.joined(separator: "\n"))
    }

    /// The promotions waiting for `queue`, removed from the store (in the caller's unit of work).
    public func takePromotions(_ queue: QueueKey) throws(LedgerError) -> [ProductRecord] {
        let key = Self.promotionsKey(queue)
        guard let text = try store.setting(key) else { return [] }
        try store.setSetting(key, nil)
        return text.split(separator: "\n").compactMap { id in
            catalogs[queue.app]?.product(String(id))?.record(locale: locale, currencyCode: currencyCode)
        }
    }
}
