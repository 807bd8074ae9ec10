import Foundation
import StoreKitWire

/// A purchase the store processed: a first purchase, a renewal, a restore (StoreKit 2).
///
/// Values come from the transaction's signed payload (Apple's `JWSTransaction` fields); what a
/// payload lacks is taken from storekitd's record of the transaction. Deliver the content, then
/// call `finish()`.
public struct Transaction: Identifiable, Hashable, Sendable, JWSRepresentable, DeviceVerified {
    /// The transaction's identifier.
    public let id: UInt64
    /// The identifier of the original purchase (itself for a first purchase; the first one for
    /// renewals and restores).
    public let originalID: UInt64
    /// The identifier of a subscription purchase event across devices, when the store gives one.
    public let webOrderLineItemID: String?
    /// The product's identifier.
    public let productID: String
    /// The subscription group of an auto-renewable subscription.
    public let subscriptionGroupID: String?
    /// The app's identifier (the bundle ID on Apple platforms, the registered app ID here).
    public let appBundleID: String
    /// When the store charged the user (for a renewal, when it renewed).
    public let purchaseDate: Date
    /// When the original purchase was made.
    public let originalPurchaseDate: Date
    /// When a subscription expires or renews.
    public let expirationDate: Date?
    /// How many units were bought.
    public let purchasedQuantity: Int
    /// Whether the user upgraded to another subscription of the group.
    public let isUpgraded: Bool
    /// Whether the user bought the product or has it through Family Sharing.
    public let ownershipType: OwnershipType
    /// When the store signed the transaction.
    public let signedDate: Date
    /// When the store refunded or revoked the transaction.
    public let revocationDate: Date?
    /// Why the store refunded or revoked it.
    public let revocationReason: RevocationReason?
    /// The kind of product.
    public let productType: Product.ProductType
    /// The app's token for the user's account, given with `Product.PurchaseOption.appAccountToken(_:)`.
    public let appAccountToken: UUID?
    /// The environment that signed the transaction.
    public let environment: AppStore.Environment
    /// Why the transaction was made: a purchase or a renewal.
    public let reason: Reason
    /// The storefront of the purchase.
    public let storefront: Storefront
    /// The price the user paid, when the store says.
    public let price: Decimal?
    /// The currency of `price`.
    public let currency: Locale.Currency?
    /// The kind of subscription offer used, if any.
    public let offerType: OfferType?
    /// The identifier of the promotional offer or offer code used, if any.
    public let offerID: String?
    /// The offer the transaction was bought or renewed with, if any.
    public let offer: Offer?
    /// How a subscription transaction was billed: `.monthly` for a billing period of a
    /// commitment, `.upFront` otherwise; nil for other products.
    public let billingPlanType: Product.SubscriptionInfo.BillingPlanType?
    /// Where a transaction billed monthly stands in its commitment; nil otherwise.
    public let commitmentInfo: CommitmentInfo?
    /// What a purchase made with the Advanced Commerce API bought (nil for any other).
    public let advancedCommerceInfo: AdvancedCommerceInfo?
    /// The device verification of the payload: SHA-384 of `deviceVerificationNonce`'s lowercase
    /// string followed by `AppStore.deviceVerificationID`'s, for the machine and app it was
    /// signed for (empty when the payload has none).
    public let deviceVerification: Data
    /// The nonce the device verification was made with.
    public let deviceVerificationNonce: UUID
    /// The identifier of the user's acquisition of the app (`AppTransaction.appTransactionID`).
    public let appTransactionID: String
    /// The transaction as JSON: its signed payload.
    public let jsonRepresentation: Data
    /// The compact JWS the transaction came in (empty when the store sent none).
    let jwsRepresentation: String

    /// The country code of the purchase's storefront.
    public var storefrontCountryCode: String { storefront.countryCode }

    /// Tells the store that the app delivered the content: the transaction leaves the queue, for
    /// StoreKit 1's `SKPaymentQueue` too. Returns once the finish is durable (or failed: then the
    /// transaction stays unfinished and is delivered again).
    public func finish() async {
        let id = self.id
        do {
            _ = try await StoreConnection.shared.reply { .finish(requestID: $0, transactionID: id) }
        } catch {
            FileHandle.standardError.write(Data("OpenStoreKit: finishing transaction \(id) failed: \(error.localizedDescription)\n".utf8))
        }
    }
}

extension Transaction: CustomDebugStringConvertible {
    /// The transaction's JSON.
    public var debugDescription: String { String(decoding: jsonRepresentation, as: UTF8.self) }
}

extension Transaction {
    /// A transaction from its signed payload, with what the payload lacks taken from the daemon's
    /// record (and `product`, the catalogue's record, for the type and group).
    init(payload: SignedPayload?, record: TransactionRecord, product: ProductRecord?) {
        let recordDate = Date(milliseconds: record.date)
        id = payload?.uint64("transactionId") ?? record.id
        originalID = payload?.uint64("originalTransactionId") ?? record.originalID ?? record.id
        webOrderLineItemID = payload?.string("webOrderLineItemId")
        productID = payload?.string("productId") ?? record.productID
        subscriptionGroupID = payload?.string("subscriptionGroupIdentifier") ?? product?.subscriptionGroupID
        appBundleID = payload?.string("bundleId") ?? record.app
        purchaseDate = payload?.date("purchaseDate") ?? recordDate
        originalPurchaseDate = payload?.date("originalPurchaseDate") ?? purchaseDate
        purchasedQuantity = payload?.int("quantity") ?? Int(record.quantity)
        isUpgraded = payload?.bool("isUpgraded") ?? false
        ownershipType = payload?.string("inAppOwnershipType").map(OwnershipType.init(rawValue:)) ?? .purchased
        signedDate = payload?.date("signedDate") ?? recordDate
        let revoked = payload?.date("revocationDate") ?? record.revocationDate.map(Date.init(milliseconds:))
        revocationDate = revoked
        revocationReason = revoked == nil ? nil
            : (payload?.int("revocationReason") ?? record.revocationReason.map(Int.init)).map(RevocationReason.init(rawValue:))
        productType = payload?.string("type").map(Product.ProductType.init(rawValue:))
            ?? product.map { Product.ProductType($0.kind) }
            ?? (record.expiresDate != nil ? .autoRenewable : .nonConsumable)
        appAccountToken = payload?.uuid("appAccountToken") ?? record.applicationUsername.flatMap(UUID.init(uuidString:))
        environment = payload?.string("environment").map(AppStore.Environment.init(rawValue:)) ?? .xcode
        let expires = payload?.date("expiresDate") ?? record.expiresDate.map(Date.init(milliseconds:))
        expirationDate = expires
        reason = payload?.string("transactionReason").map(Reason.init(rawValue:))
            ?? (record.originalID != nil && record.state == .purchased && expires != nil ? .renewal : .purchase)
        if let country = payload?.string("storefront") {
            storefront = Storefront(countryCode: country, id: payload?.string("storefrontId") ?? "143441")
        } else {
            storefront = Storefront.lastKnown
        }
        price = payload?.int("price").map { Decimal($0) / 1000 }
        currency = payload?.string("currency").map { Locale.Currency($0) }
        offerType = payload?.int("offerType").map(OfferType.init(rawValue:))
        offerID = payload?.string("offerIdentifier")
        offer = Offer(payload: payload)
        billingPlanType = payload?.string("billingPlanType").map(Product.SubscriptionInfo.BillingPlanType.init(rawValue:))
        commitmentInfo = CommitmentInfo(payload: payload)
        advancedCommerceInfo = AdvancedCommerceInfo(payload: payload)
        deviceVerification = payload?.string("deviceVerification").flatMap { Data(base64Encoded: $0) } ?? Data()
        deviceVerificationNonce = payload?.uuid("deviceVerificationNonce") ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        appTransactionID = payload?.string("appTransactionId") ?? ""
        jwsRepresentation = record.jwsRepresentation ?? ""
        jsonRepresentation = payload?.json ?? Self.json(of: record)
    }

    /// A JSON rendering of a record that came without a payload, in the payload's field names.
    private static func json(of record: TransactionRecord) -> Data {
        var object: [String: Any] = [
            "transactionId": String(record.id), "originalTransactionId": String(record.originalID ?? record.id),
            "productId": record.productID, "bundleId": record.app, "purchaseDate": record.date,
            "quantity": Int(record.quantity),
        ]
        if let expires = record.expiresDate { object["expiresDate"] = expires }
        if let revoked = record.revocationDate { object["revocationDate"] = revoked }
        if let reason = record.revocationReason { object["revocationReason"] = Int(reason) }
        if let token = record.applicationUsername { object["appAccountToken"] = token }
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
    }
}

extension Date {
    /// A date on the store's clock, given in milliseconds since 1970 as the wire carries it.
    init(milliseconds: Int64) {
        self.init(timeIntervalSince1970: TimeInterval(milliseconds) / 1000)
    }
}
