import Foundation
import StoreKitSigning

/// The app receipt, validated on the device (not Apple API: on Apple platforms apps parse the
/// PKCS#7 receipt themselves with OpenSSL, or send it to their server; this does that work).
///
/// Validation checks, in order: the file is PKCS#7 signed data whose signer chains to storekitd's
/// root certificate (`STOREKIT_ROOT_CERTIFICATE`, else `root-certificate.pem` beside the socket,
/// else `/var/lib/storekitd/root-certificate.pem`); the signature covers the payload; the bundle
/// identifier is this app's; the SHA-1 hash matches this device (`DeviceIdentifier`) and the
/// receipt's opaque value. Validate before you unlock content and finish the transaction.
public struct SKAppReceipt: Sendable, Equatable {
    /// One in-app purchase the receipt lists (finished consumables are not listed).
    public struct InAppPurchase: Sendable, Equatable {
        public let productIdentifier: String
        public let transactionIdentifier: String
        public let originalTransactionIdentifier: String
        public let quantity: Int
        public let purchaseDate: Date
        public let originalPurchaseDate: Date
        /// For auto-renewable subscriptions.
        public let subscriptionExpirationDate: Date?
        /// Set when the purchase was refunded or revoked: do not grant it.
        public let cancellationDate: Date?
    }

    /// Why a receipt was not accepted.
    public struct ValidationError: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    public let bundleIdentifier: String
    public let appVersion: String
    public let originalApplicationVersion: String
    public let creationDate: Date
    /// `Xcode` or `ProductionSandbox`.
    public let receiptType: String
    public let inAppPurchases: [InAppPurchase]

    /// Reads and validates the receipt at `url` (default: this app's) for `bundleIdentifier`
    /// (default: the app identifier the library connects as). Called from a transaction
    /// observer's callback for the app's own receipt, it validates the receipt the library
    /// fetched for that batch of transactions, which lists them even when another process of
    /// the app has written the file since.
    public static func validated(
        contentsOf url: URL = SKPaymentQueue.appStoreReceiptURL, bundleIdentifier: String? = nil
    ) throws(ValidationError) -> SKAppReceipt {
        let batch = url == SKPaymentQueue.appStoreReceiptURL ? ReceiptFile.currentBatchReceipt.map { Data($0) } : nil
        guard let data = batch ?? FileManager.default.contents(atPath: url.path) else {
            throw ValidationError(description: "no receipt at \(url.path) (SKReceiptRefreshRequest fetches one)")
        }
        let app = bundleIdentifier ?? StoreConnection.shared.resolvedAppIdentifier
        let verifier: ReceiptVerifier
        do {
            verifier = try SignedDataTrust.receiptVerifier()
        } catch {
            throw ValidationError(description: "no trusted root certificate: \(error)")
        }
        let device: [UInt8]
        do {
            device = try DeviceIdentifier.forApp(app)
        } catch {
            throw ValidationError(description: "cannot compute this device's identifier: \(error)")
        }
        return try validate([UInt8](data), app: app, verifier: verifier, deviceIdentifier: device)
    }

    /// The checks of `validated(contentsOf:bundleIdentifier:)` on receipt bytes.
    static func validate(_ data: [UInt8], app: String, verifier: ReceiptVerifier, deviceIdentifier device: [UInt8])
        throws(ValidationError) -> SKAppReceipt {
        let receipt: AppReceipt
        switch verifier.verify(data) {
        case .success(let verified): receipt = verified
        case .failure(let error): throw ValidationError(description: "the receipt does not verify: \(error.reason)")
        }
        guard receipt.bundleIdentifier == app else {
            throw ValidationError(description: "the receipt is for \(receipt.bundleIdentifier), not \(app)")
        }
        guard AppReceipt.hash(deviceIdentifier: device, opaqueValue: receipt.opaqueValue, bundleIdentifier: app) == receipt.sha1Hash else {
            throw ValidationError(description: "the receipt was made for another device")
        }
        return SKAppReceipt(
            bundleIdentifier: receipt.bundleIdentifier, appVersion: receipt.appVersion,
            originalApplicationVersion: receipt.originalApplicationVersion, creationDate: receipt.creationDate,
            receiptType: receipt.receiptType,
            inAppPurchases: receipt.inAppPurchases.map {
                InAppPurchase(productIdentifier: $0.productIdentifier, transactionIdentifier: $0.transactionIdentifier,
                              originalTransactionIdentifier: $0.originalTransactionIdentifier, quantity: Int($0.quantity),
                              purchaseDate: $0.purchaseDate, originalPurchaseDate: $0.originalPurchaseDate,
                              subscriptionExpirationDate: $0.subscriptionExpirationDate, cancellationDate: $0.cancellationDate)
            })
    }

    /// The purchase with this transaction identifier, if the receipt lists it.
    public func purchase(transactionIdentifier: String) -> InAppPurchase? {
        inAppPurchases.first { $0.transactionIdentifier == transactionIdentifier }
    }
}
