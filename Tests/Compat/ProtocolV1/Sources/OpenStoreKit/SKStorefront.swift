import Foundation

/// The App Store storefront (country) of the user's account.
open class SKStorefront: NSObject {
    private let storedCountryCode: String
    private let storedIdentifier: String

    /// Creates an empty storefront; useful for test doubles.
    public override init() {
        storedCountryCode = ""
        storedIdentifier = ""
        super.init()
    }

    /// Creates a storefront with the given ISO 3166-1 alpha-3 country code and Apple identifier.
    init(countryCode: String, identifier: String) {
        storedCountryCode = countryCode
        storedIdentifier = identifier
        super.init()
    }

    /// The three-letter ISO 3166-1 alpha-3 code of the storefront's country, such as `USA`.
    open var countryCode: String { storedCountryCode }
    /// The store's identifier of the storefront, such as `143441`.
    open var identifier: String { storedIdentifier }
}
