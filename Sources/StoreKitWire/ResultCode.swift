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
    /// The ledger's database server (PostgreSQL) cannot be reached: stopped, restarting, or the
    /// network. Nothing was recorded; the same request (with the same payment key) can be sent again.
    case storeUnreachable = 18
    /// The transaction has no hosted content this connection may download: not purchased or
    /// restored, revoked, or its product comes with none (version 3).
    case noContent = 19

    /// The code as a client of protocol `version` knows it: version 1 ends at `quotaExceeded`
    /// (17), so `storeUnreachable` is `storageFailure` there (nothing was recorded either way).
    public func rawValue(version: UInt16) -> UInt16 {
        switch self {
        case .storeUnreachable where version < 2: ResultCode.storageFailure.rawValue
        // Only a version-3 request is answered with it; an older client would not know it.
        case .noContent where version < 3: ResultCode.invalidArgument.rawValue
        default: rawValue
        }
    }

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
        case .storeUnreachable: "store-unreachable"
        case .noContent: "no-content"
        }
    }
}

/// StoreKit 1's `SKError.Code`, by raw value: the one table of them daemon, CLI and engine share
/// (what a failed transaction carries; `storekitctl fail-next CODE` by number or name).
public enum StoreKitErrorCode: Int32, Sendable, CaseIterable {
    case unknown = 0
    case clientInvalid = 1
    case paymentCancelled = 2
    case paymentInvalid = 3
    case paymentNotAllowed = 4
    case storeProductNotAvailable = 5
    case cloudServicePermissionDenied = 6
    case cloudServiceNetworkConnectionFailed = 7
    case cloudServiceRevoked = 8
    case privacyAcknowledgementRequired = 9
    case unauthorizedRequestData = 10
    case invalidOfferIdentifier = 11
    case invalidSignature = 12
    case missingOfferParams = 13
    case invalidOfferPrice = 14
    case overlayCancelled = 15
    case overlayInvalidConfiguration = 16
    case overlayTimeout = 17
    case ineligibleForOffer = 18
    case unsupportedPlatform = 19
    case overlayPresentedInBackgroundScene = 20

    /// Apple's case name, e.g. `paymentCancelled`.
    public var name: String { "\(self)" }

    /// The name of a raw value, or "code N" for one StoreKit does not define.
    public static func name(of code: Int32) -> String {
        StoreKitErrorCode(rawValue: code)?.name ?? "code \(code)"
    }

    /// A code given by number (`2`) or name (`paymentCancelled`, any case).
    public init?(text: String) {
        if let number = Int32(text) {
            guard let code = StoreKitErrorCode(rawValue: number) else { return nil }
            self = code
            return
        }
        guard let code = Self.allCases.first(where: { $0.name.lowercased() == text.lowercased() }) else { return nil }
        self = code
    }
}
