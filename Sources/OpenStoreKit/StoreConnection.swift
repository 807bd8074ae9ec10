import StoreKitWire

/// The app's one connection to storekitd (skeleton; the real connection replaces this).
final class StoreConnection: @unchecked Sendable {
    static let shared = StoreConnection()

    func fetchProducts(
        _ identifiers: [String],
        completion: @escaping @Sendable (Result<(products: [ProductRecord], invalid: [String]), SKError>) -> Void
    ) {
        completion(.failure(SKError(.unknown)))
    }
}
