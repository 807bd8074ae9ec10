import Foundation

/// A product of the catalogue configured as a generic SKU for Apple's Advanced Commerce API: the
/// app sells the developer's own products under it, each purchase carrying the request the
/// developer's server signed (`purchase(compactJWS:options:)`). The transaction tells what was
/// bought in `Transaction.advancedCommerceInfo`.
public struct AdvancedCommerceProduct: Identifiable, Hashable, Sendable {
    /// The generic SKU's product identifier.
    public typealias ID = String
    /// The kind of product the generic SKU is.
    public typealias ProductType = Product.ProductType
    /// What a purchase may be asked with (`.appAccountToken(_:)`, …), as for `Product`.
    public typealias PurchaseOption = Product.PurchaseOption
    /// How a purchase ended, as for `Product`.
    public typealias PurchaseResult = Product.PurchaseResult

    /// The generic product ID.
    public let id: ID
    /// The type of the product.
    public let type: ProductType
    /// The catalogue's product.
    let product: Product

    /// The generic SKU `id` of the catalogue; throws `Product.PurchaseError.productUnavailable`
    /// when the store has no such product.
    public init(id: ID) async throws {
        guard let product = try await Product.products(for: [id]).first else { throw Product.PurchaseError.productUnavailable }
        self.id = id
        type = product.type
        self.product = product
    }

    /// Buys what the developer's server signed: `compactJWS` is its Advanced Commerce request
    /// (`CREATE_ONE_TIME_CHARGE` or `CREATE_SUBSCRIPTION`), signed as Apple's
    /// `AdvancedCommerceAPIInAppSignatureCreator` signs it with a key the app registered
    /// (`[OfferKey]`). A request the store refuses throws `StoreKitError.systemError` with the
    /// reason; other failures are `Product.PurchaseError` or `StoreKitError`, as for `Product`.
    public func purchase(compactJWS: String, options: Set<PurchaseOption> = []) async throws -> PurchaseResult {
        try await product.purchase(options: options, advancedCommerceJWS: compactJWS)
    }

    /// The user's latest transaction for this product, if any.
    public var latestTransaction: VerificationResult<Transaction>? {
        get async { await product.latestTransaction }
    }

    /// Every transaction of the user for this product, oldest first.
    public var allTransactions: Transaction.Transactions {
        let id = self.id
        return Transaction.Transactions(source: .snapshot {
            let history = (try? await Transaction.history()) ?? []
            return await TransactionResults.results(for: await ConsumableHistory.shown(history.filter { $0.productID == id }))
        })
    }

    /// The transactions that entitle the user to this product now.
    public var currentEntitlements: Transaction.Transactions { Transaction.currentEntitlements(for: id) }
}
