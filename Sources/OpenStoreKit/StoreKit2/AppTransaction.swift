import Foundation
import StoreKitWire

/// The signed record of the user's acquisition of the app (Apple's `AppTransaction` fields).
public struct AppTransaction: Hashable, Sendable, JWSRepresentable, DeviceVerified {
    /// The app's identifier (the bundle ID on Apple platforms, the registered app ID here).
    public let bundleID: String
    /// The app version the record was made for.
    public let appVersion: String
    /// The app version the user first acquired.
    public let originalAppVersion: String
    /// When the user first acquired the app.
    public let originalPurchaseDate: Date
    /// When the store signed the record.
    public let signedDate: Date
    /// The environment that signed it.
    public let environment: AppStore.Environment
    /// The device verification value of the payload.
    public let deviceVerification: Data
    /// The nonce the device verification was made with.
    public let deviceVerificationNonce: UUID
    /// The identifier of the user's acquisition of the app: the same in each of the user's
    /// transactions of the app (`Transaction.appTransactionID`).
    public let appTransactionID: String
    /// The App Store's identifier of the app; nil, as in Apple's Xcode and sandbox environments
    /// (storekitd signs for those two only).
    public let appID: UInt64?
    /// The App Store's identifier of the app's version; nil, as `appID`.
    public let appVersionID: UInt64?
    /// When the user preordered the app; nil: the simulated store sells no preorders.
    public let preorderDate: Date?
    /// The app transaction as JSON: its signed payload.
    public let jsonRepresentation: Data
    /// The compact JWS it came in.
    let jwsRepresentation: String

    /// The app transaction from its payload; absent fields read as empty.
    init(payload: SignedPayload?, jws: String) {
        let signed = payload?.date("signedDate") ?? Date(timeIntervalSince1970: 0)
        bundleID = payload?.string("bundleId") ?? ""
        appVersion = payload?.string("applicationVersion") ?? payload?.string("appVersion") ?? ""
        originalAppVersion = payload?.string("originalApplicationVersion") ?? payload?.string("originalAppVersion") ?? ""
        originalPurchaseDate = payload?.date("originalPurchaseDate") ?? signed
        signedDate = signed
        environment = payload?.string("environment").map(AppStore.Environment.init(rawValue:)) ?? .xcode
        deviceVerification = payload?.string("deviceVerification").flatMap { Data(base64Encoded: $0) } ?? Data()
        deviceVerificationNonce = payload?.uuid("deviceVerificationNonce") ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        appTransactionID = payload?.string("appTransactionId") ?? ""
        appID = payload?.uint64("appAppleId")
        appVersionID = payload?.uint64("versionExternalIdentifier")
        preorderDate = payload?.date("preorderDate")
        jsonRepresentation = payload?.json ?? Data()
        jwsRepresentation = jws
    }

    /// The app transaction, signed by storekitd, with the result of checking its signature.
    public static var shared: VerificationResult<AppTransaction> {
        get async throws { try await refresh() }
    }

    /// Asks the store for the app transaction again.
    public static func refresh() async throws -> VerificationResult<AppTransaction> {
        try SimulatedFailures.throwIfSet(.appTransaction)
        let reply: ServerMessage
        do {
            reply = try await StoreConnection.shared.reply { .appTransaction(requestID: $0) }
        } catch {
            throw StoreKitError(error)
        }
        guard case .signed(_, let jws) = reply else { throw StoreKitError.unknown }
        let check = checkSignedData(jws)
        let payload = SignedPayload(check.payload)
        var failure = check.failure
        if failure == nil, !checkDeviceVerification(payload, app: StoreConnection.shared.resolvedAppIdentifier) {
            // Signed by the store, but for another app or machine.
            failure = .invalidDeviceVerification
        }
        return VerificationResult(AppTransaction(payload: payload, jws: jws), failure: failure)
    }
}
