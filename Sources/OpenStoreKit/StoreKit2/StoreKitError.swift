import Foundation

/// An error of the StoreKit 2 API, as Apple's `StoreKitError`.
public enum StoreKitError: Error, LocalizedError, Sendable {
    /// An unknown error occurred.
    case unknown
    /// The user cancelled.
    case userCancelled
    /// The store could not be reached.
    case networkError(URLError)
    /// A system error occurred; the underlying error says which.
    case systemError(any Error)
    /// The product is not available in the current storefront.
    case notAvailableInStorefront
    /// The app is not entitled to use the store (storekitd refused it: not registered, or not allowed).
    case notEntitled
    /// The operation is not supported here.
    case unsupported

    /// A description of the error.
    public var errorDescription: String? {
        switch self {
        case .unknown: "An unknown error occurred."
        case .userCancelled: "The user cancelled."
        case .networkError(let error): "The store could not be reached: \(error.localizedDescription)"
        case .systemError(let error): "A system error occurred: \(error.localizedDescription)"
        case .notAvailableInStorefront: "The product is not available in the current storefront."
        case .notEntitled: "The app is not entitled to use the store."
        case .unsupported: "The operation is not supported."
        }
    }

    /// The StoreKit 2 error for an error the connection reported as StoreKit 1's `SKError`.
    init(_ error: SKError) {
        switch error.code {
        case .cloudServiceNetworkConnectionFailed:
            self = .networkError(URLError(.notConnectedToInternet, userInfo: [NSLocalizedDescriptionKey: error.localizedDescription]))
        case .paymentCancelled: self = .userCancelled
        case .storeProductNotAvailable: self = .notAvailableInStorefront
        case .clientInvalid: self = .notEntitled
        case .unsupportedPlatform: self = .unsupported
        default: self = .systemError(error)
        }
    }
}
