import StoreKitWire

/// Turns the daemon's transaction records into StoreKit 2's verified (or unverified) transactions.
enum TransactionResults {
    /// The transaction of `record`, checked: `.verified` only when its JWS verifies.
    static func result(for record: TransactionRecord, product: ProductRecord? = nil) async -> VerificationResult<Transaction> {
        let check = checkSignedData(record.jwsRepresentation)
        let payload = SignedPayload(check.payload)
        var product = product
        let type = payload?.string("type").map(Product.ProductType.init(rawValue:))
        let needsCatalogue = type == nil || (type == .autoRenewable && payload?.string("subscriptionGroupIdentifier") == nil)
        if product == nil, needsCatalogue {
            product = await ProductCache.shared.records(for: [record.productID])[record.productID]
        }
        return VerificationResult(Transaction(payload: payload, record: record, product: product), failure: check.failure)
    }

    /// The results of the records StoreKit 2 shows as transactions: purchases and restores.
    static func results(for records: [TransactionRecord]) async -> [VerificationResult<Transaction>] {
        let shown = records.filter(\.isTransaction)
        let products = await ProductCache.shared.records(for: Set(shown.map(\.productID)))
        var results: [VerificationResult<Transaction>] = []
        for record in shown { results.append(await result(for: record, product: products[record.productID])) }
        return results
    }
}

extension TransactionRecord {
    /// Whether StoreKit 2 shows this record as a `Transaction`: it does for completed purchases
    /// and restores, not for purchases in progress, deferred or failed ones.
    var isTransaction: Bool { state == .purchased || state == .restored }
}
