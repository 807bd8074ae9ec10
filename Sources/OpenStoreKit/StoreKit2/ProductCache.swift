import StoreKitWire
import Synchronization

/// The catalogue records seen so far, by product identifier: a transaction whose payload does not
/// say its product's type or group is completed from here, asking the daemon on a miss.
final class ProductCache: Sendable {
    static let shared = ProductCache()

    private let records = Mutex<[String: ProductRecord]>([:])

    func remember(_ products: [ProductRecord]) {
        records.withLock { records in
            for product in products { records[product.productID] = product }
        }
    }

    /// The records of `identifiers`, asking the daemon for those not seen yet; identifiers the
    /// catalogue does not know (or all missing ones, when the store cannot be reached) are left out.
    func records(for identifiers: Set<String>) async -> [String: ProductRecord] {
        let missing = records.withLock { records in identifiers.filter { records[$0] == nil } }
        if !missing.isEmpty, let fetched = try? await StoreConnection.shared.products(missing.sorted()) {
            remember(fetched)
        }
        return records.withLock { records in records.filter { identifiers.contains($0.key) } }
    }
}
