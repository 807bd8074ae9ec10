/// Why the store could not do what was asked. Messages name the database file.
public struct StoreError: Error, CustomStringConvertible, Sendable, Equatable {
    public enum Code: Sendable, Equatable {
        case full
        case corrupt
        case notADatabase
        case foreignDatabase
        case unsupportedSchema(found: Int, supported: Int)
        case readOnly
        case io
        case busy
        case other(Int32)
    }

    public let code: Code
    public let path: String
    public let message: String

    public init(_ code: Code, path: String, message: String) {
        self.code = code
        self.path = path
        self.message = message
    }

    public var description: String { "\(path): \(message)" }
}
