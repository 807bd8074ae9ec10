import Foundation

/// The App Store storefront of the user: a country and its identifier (StoreKit 2).
public struct Storefront: Identifiable, Hashable, Sendable {
    /// The storefront identifier, e.g. `143441`.
    public let id: String
    /// The three-letter ISO 3166-1 alpha-3 country code, e.g. `USA`.
    public let countryCode: String
    /// The storefront's currency (docs/protocol.md §11a), when known.
    public let currency: Locale.Currency?

    init(countryCode: String, id: String, currency: String? = nil) {
        self.id = id
        self.countryCode = countryCode
        self.currency = (currency ?? Self.currencies[countryCode.uppercased()]).map { Locale.Currency($0) }
    }

    /// The storefront in effect, as storekitd announced it; nil when the store cannot be reached.
    public static var current: Storefront? {
        get async {
            let connection = StoreConnection.shared
            if connection.storefront == nil {
                // The welcome carries the storefront: make sure the connection was opened once.
                _ = try? await connection.reply { .ping(requestID: $0) }
            }
            return connection.storefront.map { Storefront(countryCode: $0.countryCode, id: $0.identifier) }
        }
    }

    /// The storefront of a transaction whose payload does not say: the current one, else `USA`.
    static var lastKnown: Storefront {
        StoreConnection.shared.storefront.map { Storefront(countryCode: $0.countryCode, id: $0.identifier) }
            ?? Storefront(countryCode: "USA", id: "143441")
    }

    /// The currencies of the storefronts storekitd knows (docs/protocol.md §11a); others use USD.
    private static let currencies: [String: String] = [
        "AUS": "AUD", "BRA": "BRL", "CAN": "CAD", "CHE": "CHF", "CHN": "CNY", "DEU": "EUR", "DNK": "DKK",
        "ESP": "EUR", "FRA": "EUR", "GBR": "GBP", "IND": "INR", "ITA": "EUR", "JPN": "JPY", "KOR": "KRW",
        "MEX": "MXN", "NLD": "EUR", "NOR": "NOK", "POL": "PLN", "SWE": "SEK", "USA": "USD",
    ]
}
