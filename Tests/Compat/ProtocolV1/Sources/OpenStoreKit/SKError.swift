import Foundation

/// The error domain of `SKError`, as an `NSError` sees it.
public let SKErrorDomain: String = "SKErrorDomain"

/// An error of the store, shaped like Apple's bridged `SKError`: a struct over a stored `NSError`.
///
/// Match it as on Apple platforms: `catch SKError.paymentCancelled`, `(error as? SKError)?.code`,
/// or `(error as NSError).domain == SKErrorDomain`.
public struct SKError: Error, Hashable, CustomNSError, @unchecked Sendable {
    // @unchecked: the stored NSError is never mutated after init (as with Apple's bridged errors).

    /// The `NSError` this error wraps; its domain is always `SKErrorDomain`.
    public let _nsError: NSError

    /// Wraps an `NSError` of the `SKErrorDomain` domain.
    public init(_nsError error: NSError) {
        precondition(error.domain == SKErrorDomain, "SKError(_nsError:) needs an error of domain \(SKErrorDomain)")
        self._nsError = error
    }

    /// Creates an error with the given code and user info.
    public init(_ code: Code, userInfo: [String: Any] = [:]) {
        self._nsError = NSError(domain: SKErrorDomain, code: code.rawValue, userInfo: userInfo)
    }

    /// The error domain, `SKErrorDomain`.
    public static var errorDomain: String { SKErrorDomain }

    /// The error's code; a raw value this library does not know reads as `.unknown`.
    public var code: Code { Code(rawValue: _nsError.code) ?? .unknown }

    /// The raw error code as the `NSError` carries it.
    public var errorCode: Int { _nsError.code }

    /// The user info of the `NSError`.
    public var errorUserInfo: [String: Any] { _nsError.userInfo }

    /// The user info of the `NSError`.
    public var userInfo: [String: Any] { _nsError.userInfo }

    /// A description of the error for the user.
    public var localizedDescription: String { _nsError.localizedDescription }

    /// Whether two errors have the same domain, code and user info.
    public static func == (lhs: SKError, rhs: SKError) -> Bool {
        // NSError.hash is unimplemented in swift-corelibs-foundation, so hash/compare field by field.
        lhs._nsError.code == rhs._nsError.code
            && NSDictionary(dictionary: lhs._nsError.userInfo).isEqual(to: rhs._nsError.userInfo)
    }

    /// Hashes the error's code.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(_nsError.code)
    }
}

extension SKError {
    /// The codes of `SKError`, with Apple's raw values.
    public enum Code: Int, Sendable {
        /// An unknown or unexpected error occurred.
        case unknown = 0
        /// The client is not allowed to issue the request.
        case clientInvalid = 1
        /// The user cancelled the payment request.
        case paymentCancelled = 2
        /// A purchase identifier or a payment parameter was invalid.
        case paymentInvalid = 3
        /// The user is not allowed to authorize payments.
        case paymentNotAllowed = 4
        /// The product is not available in the current storefront.
        case storeProductNotAvailable = 5
        /// The user has not allowed access to cloud service information.
        case cloudServicePermissionDenied = 6
        /// The device could not connect to the network.
        case cloudServiceNetworkConnectionFailed = 7
        /// The user revoked permission to use the cloud service.
        case cloudServiceRevoked = 8
        /// The user has not yet acknowledged the store's privacy policy.
        case privacyAcknowledgementRequired = 9
        /// The app is requesting something it is not entitled to.
        case unauthorizedRequestData = 10
        /// The offer identifier is invalid.
        case invalidOfferIdentifier = 11
        /// The signature of the payment discount is invalid.
        case invalidSignature = 12
        /// Parameters of the payment discount are missing.
        case missingOfferParams = 13
        /// The price of the offer is invalid.
        case invalidOfferPrice = 14
        /// The user dismissed the overlay.
        case overlayCancelled = 15
        /// The overlay's configuration is invalid.
        case overlayInvalidConfiguration = 16
        /// The overlay timed out.
        case overlayTimeout = 17
        /// The user is not eligible for the subscription offer.
        case ineligibleForOffer = 18
        /// The platform does not support the operation.
        case unsupportedPlatform = 19
        /// The app tried to present an overlay from a background scene.
        case overlayPresentedInBackgroundScene = 20
    }

    /// An unknown or unexpected error occurred.
    public static var unknown: Code { .unknown }
    /// The client is not allowed to issue the request.
    public static var clientInvalid: Code { .clientInvalid }
    /// The user cancelled the payment request.
    public static var paymentCancelled: Code { .paymentCancelled }
    /// A purchase identifier or a payment parameter was invalid.
    public static var paymentInvalid: Code { .paymentInvalid }
    /// The user is not allowed to authorize payments.
    public static var paymentNotAllowed: Code { .paymentNotAllowed }
    /// The product is not available in the current storefront.
    public static var storeProductNotAvailable: Code { .storeProductNotAvailable }
    /// The user has not allowed access to cloud service information.
    public static var cloudServicePermissionDenied: Code { .cloudServicePermissionDenied }
    /// The device could not connect to the network.
    public static var cloudServiceNetworkConnectionFailed: Code { .cloudServiceNetworkConnectionFailed }
    /// The user revoked permission to use the cloud service.
    public static var cloudServiceRevoked: Code { .cloudServiceRevoked }
    /// The user has not yet acknowledged the store's privacy policy.
    public static var privacyAcknowledgementRequired: Code { .privacyAcknowledgementRequired }
    /// The app is requesting something it is not entitled to.
    public static var unauthorizedRequestData: Code { .unauthorizedRequestData }
    /// The offer identifier is invalid.
    public static var invalidOfferIdentifier: Code { .invalidOfferIdentifier }
    /// The signature of the payment discount is invalid.
    public static var invalidSignature: Code { .invalidSignature }
    /// Parameters of the payment discount are missing.
    public static var missingOfferParams: Code { .missingOfferParams }
    /// The price of the offer is invalid.
    public static var invalidOfferPrice: Code { .invalidOfferPrice }
    /// The user dismissed the overlay.
    public static var overlayCancelled: Code { .overlayCancelled }
    /// The overlay's configuration is invalid.
    public static var overlayInvalidConfiguration: Code { .overlayInvalidConfiguration }
    /// The overlay timed out.
    public static var overlayTimeout: Code { .overlayTimeout }
    /// The user is not eligible for the subscription offer.
    public static var ineligibleForOffer: Code { .ineligibleForOffer }
    /// The platform does not support the operation.
    public static var unsupportedPlatform: Code { .unsupportedPlatform }
    /// The app tried to present an overlay from a background scene.
    public static var overlayPresentedInBackgroundScene: Code { .overlayPresentedInBackgroundScene }
}

extension SKError.Code {
    /// Whether `error` is an `SKError` (or an `NSError` of `SKErrorDomain`) with this code; powers
    /// `catch SKError.paymentCancelled`.
    public static func ~= (match: SKError.Code, error: any Error) -> Bool {
        if let error = error as? SKError {
            return error.code == match
        }
        let nsError = error as NSError
        guard nsError.domain == SKErrorDomain else { return false }
        return (SKError.Code(rawValue: nsError.code) ?? .unknown) == match
    }
}
