import OpenStoreKit

/// One JSON object per line on stdout, written at once (stdout is a pipe in tests and journals).
enum Output {
    static func event(_ object: [String: Any]) {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    static func error(_ message: String) {
        FileHandle.standardError.write(Data("storekit2-example-app: \(message)\n".utf8))
    }

    /// A transaction as a JSON object, with whether its signature verified.
    static func transaction(_ result: VerificationResult<Transaction>) -> [String: Any] {
        let transaction = result.unsafePayloadValue
        var object: [String: Any] = [
            "transactionIdentifier": String(transaction.id),
            "originalTransactionIdentifier": String(transaction.originalID),
            "productIdentifier": transaction.productID,
            "productType": transaction.productType.rawValue,
            "purchaseDate": date(transaction.purchaseDate),
            "quantity": transaction.purchasedQuantity,
            "reason": transaction.reason.rawValue,
            "environment": transaction.environment.rawValue,
            "storefront": transaction.storefront.countryCode,
            "hasJWS": !result.jwsRepresentation.isEmpty,
        ]
        switch result {
        case .verified: object["verified"] = true
        case .unverified(_, let error):
            object["verified"] = false
            object["verificationError"] = "\(error)"
        }
        if let expiration = transaction.expirationDate { object["expirationDate"] = date(expiration) }
        if let revocation = transaction.revocationDate { object["revocationDate"] = date(revocation) }
        if let reason = transaction.revocationReason { object["revocationReason"] = reason.rawValue }
        if let token = transaction.appAccountToken { object["appAccountToken"] = token.uuidString }
        if let group = transaction.subscriptionGroupID { object["subscriptionGroupIdentifier"] = group }
        return object
    }

    static func date(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}
