/// Why a `.storekit` catalogue could not be loaded, and where in the file.
///
/// `description` reads `PATH: LOCATION: REASON`, e.g.
/// `catalog/example.storekit: products[2].displayPrice: expected a price like "0.99", found "abc"` or
/// `catalog/example.storekit: line 3 column 7: expected ':' after an object key`.
public struct CatalogError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The catalogue file, as given to the loader.
    public let path: String
    /// A JSON path (`products[2].price`, `settings._timeRate`) for a bad value, `line L column C`
    /// for a syntax error, or empty when the file could not be read at all.
    public let location: String
    /// What is wrong, in words.
    public let reason: String

    public init(path: String, location: String, reason: String) {
        self.path = path
        self.location = location
        self.reason = reason
    }

    public var description: String {
        location.isEmpty ? "\(path): \(reason)" : "\(path): \(location): \(reason)"
    }
}
