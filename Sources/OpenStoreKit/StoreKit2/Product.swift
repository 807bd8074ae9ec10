import Foundation
import StoreKitWire

/// A product of the store's catalogue, with what is needed to show and sell it (StoreKit 2).
public struct Product: Identifiable, Hashable, Sendable {
    /// The product identifier.
    public let id: String
    /// The kind of product.
    public let type: ProductType
    /// The product's name in the storefront's language.
    public let displayName: String
    /// The product's description in the storefront's language.
    public let description: String
    /// The price, in the storefront's currency.
    public let price: Decimal
    /// The price formatted for display in the storefront's currency, e.g. `$4.99`.
    public let displayPrice: String
    /// Whether the product can be shared with the family.
    public let isFamilyShareable: Bool
    /// What is specific to an auto-renewable subscription; nil for other products.
    public let subscription: SubscriptionInfo?
    /// The catalogue record the product was made from.
    let record: ProductRecord

    /// The format style that renders prices in the product's currency and locale.
    public var priceFormatStyle: Decimal.FormatStyle.Currency {
        Decimal.FormatStyle.Currency(code: record.currencyCode.isEmpty ? "USD" : record.currencyCode,
                                     locale: Locale(identifier: record.locale))
    }

    /// The product as JSON: its identifier, type, names, price, currency and subscription terms.
    public var jsonRepresentation: Data {
        var object: [String: Any] = [
            "id": id, "type": type.rawValue, "displayName": displayName, "description": description,
            "price": "\(price)", "displayPrice": displayPrice, "currencyCode": record.currencyCode,
            "isFamilyShareable": isFamilyShareable,
        ]
        if let subscription {
            object["subscriptionGroupID"] = subscription.subscriptionGroupID
            object["subscriptionPeriod"] = record.subscriptionPeriod ?? ""
        }
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
    }

    /// A product from the daemon's catalogue record.
    init(record: ProductRecord) {
        self.record = record
        id = record.productID
        type = ProductType(record.kind)
        displayName = record.localizedTitle
        description = record.localizedDescription
        price = Self.decimal(record.displayPrice, cents: record.priceCents)
        let currency = record.currencyCode.isEmpty ? "USD" : record.currencyCode
        displayPrice = price.formatted(.currency(code: currency).locale(Locale(identifier: record.locale)))
        isFamilyShareable = record.familyShareable
        subscription = SubscriptionInfo(record: record)
    }

    /// The catalogue's price as written (`0.99`), else the cents the daemon computed from it.
    static func decimal(_ written: String, cents: Int64) -> Decimal {
        if let value = Decimal(string: written, locale: Locale(identifier: "en_US_POSIX")), !value.isNaN { return value }
        return Decimal(cents) / 100
    }

    /// Two products are equal when the catalogue describes them the same way.
    public static func == (lhs: Product, rhs: Product) -> Bool { lhs.record == rhs.record }

    /// Hashes the product identifier.
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }
}

extension Product {
    /// Fetches the products with these identifiers; identifiers the catalogue does not know are
    /// left out. Throws `StoreKitError.networkError` when the store cannot be reached.
    public static func products<Identifiers: Collection>(for identifiers: Identifiers) async throws -> [Product]
    where Identifiers.Element == String {
        try SimulatedFailures.throwIfSet(.loadProducts)
        var seen = Set<String>()
        let unique = identifiers.filter { seen.insert($0).inserted }
        do {
            let records = try await StoreConnection.shared.products(unique)
            ProductCache.shared.remember(records)
            return records.map(Product.init(record:))
        } catch {
            throw StoreKitError(error)
        }
    }

    /// The transaction that entitles the user to this product now, if any (see
    /// `Transaction.currentEntitlements`).
    public var currentEntitlement: VerificationResult<Transaction>? {
        get async { await Transaction.currentEntitlement(for: id) }
    }

    /// The user's latest transaction for this product, if any.
    public var latestTransaction: VerificationResult<Transaction>? {
        get async { await Transaction.latest(for: id) }
    }
}

extension Product: CustomDebugStringConvertible {
    /// The product's JSON.
    public var debugDescription: String { String(decoding: jsonRepresentation, as: UTF8.self) }
}
