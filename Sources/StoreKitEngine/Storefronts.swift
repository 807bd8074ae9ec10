/// App Store storefront codes (ISO 3166-1 alpha-3) and their currencies, for the simulated store.
public enum Storefronts {
    static let currencies: [String: String] = [
        "USA": "USD", "GBR": "GBP", "DEU": "EUR", "FRA": "EUR", "ITA": "EUR", "ESP": "EUR", "NLD": "EUR",
        "JPN": "JPY", "CAN": "CAD", "AUS": "AUD", "CHE": "CHF", "SWE": "SEK", "NOR": "NOK", "DNK": "DKK",
        "POL": "PLN", "BRA": "BRL", "MEX": "MXN", "IND": "INR", "CHN": "CNY", "KOR": "KRW",
    ]

    public static func currency(for storefront: String) -> String { currencies[storefront] ?? "USD" }

    public static func isKnown(_ storefront: String) -> Bool { currencies[storefront] != nil }

    /// Every storefront the simulated store knows, sorted.
    public static var known: [String] { currencies.keys.sorted() }

    /// The storefront identifier StoreKit reports (`SKStorefront.identifier`), e.g. USA → 143441.
    public static func identifier(for storefront: String) -> String {
        let identifiers = ["USA": "143441", "GBR": "143444", "DEU": "143443", "FRA": "143442", "JPN": "143462",
                           "CAN": "143455", "AUS": "143460", "ITA": "143450", "ESP": "143454", "NLD": "143452",
                           "CHE": "143459", "SWE": "143456", "NOR": "143457", "DNK": "143458", "POL": "143478",
                           "BRA": "143503", "MEX": "143468", "IND": "143467", "CHN": "143465", "KOR": "143466"]
        return identifiers[storefront] ?? "143441"
    }
}
