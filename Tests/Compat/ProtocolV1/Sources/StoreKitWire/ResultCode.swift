/// The outcome of a request. `storeKit` carries an `SKError.Code` raw value (0–20) in `detail`.
public enum ResultCode: UInt16, Sendable, CaseIterable {
    case ok = 0
    /// The payment or request was refused as StoreKit would; `detail` is the `SKError.Code`.
    case storeKit = 1
    case malformedRequest = 2
    case unknownApp = 3
    case permissionDenied = 4
    case transactionNotFound = 5
    /// Finishing a `purchasing` or `deferred` transaction.
    case notFinishable = 6
    case restoreInProgress = 7
    case storageFailure = 8
    case storageFull = 9
    case limitExceeded = 10
    case notRegistered = 11
    case unsupportedVersion = 12
    case shuttingDown = 13
    case invalidArgument = 14
    case internalError = 15
    /// The uid sent more requests per second than `MaxRequestsPerUIDPerSecond=` allows.
    case rateLimited = 16
    /// The (uid, app) queue holds `MaxUnfinishedPerQueue=` unfinished transactions already.
    case quotaExceeded = 17

    public var name: String {
        switch self {
        case .ok: "ok"
        case .storeKit: "store-kit-error"
        case .malformedRequest: "malformed-request"
        case .unknownApp: "unknown-app"
        case .permissionDenied: "permission-denied"
        case .transactionNotFound: "transaction-not-found"
        case .notFinishable: "not-finishable"
        case .restoreInProgress: "restore-in-progress"
        case .storageFailure: "storage-failure"
        case .storageFull: "storage-full"
        case .limitExceeded: "limit-exceeded"
        case .notRegistered: "not-registered"
        case .unsupportedVersion: "unsupported-version"
        case .shuttingDown: "shutting-down"
        case .invalidArgument: "invalid-argument"
        case .internalError: "internal-error"
        case .rateLimited: "rate-limited"
        case .quotaExceeded: "quota-exceeded"
        }
    }
}

/// `SKError.Code` raw values the daemon produces.
public enum StoreKitErrorCode: Int32, Sendable {
    case unknown = 0
    case clientInvalid = 1
    case paymentCancelled = 2
    case paymentInvalid = 3
    case paymentNotAllowed = 4
    case storeProductNotAvailable = 5
    case cloudServiceNetworkConnectionFailed = 7
    case unauthorizedRequestData = 10
    case invalidOfferIdentifier = 11
    case ineligibleForOffer = 18
}
