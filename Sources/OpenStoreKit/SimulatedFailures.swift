import Foundation
import Synchronization

/// The errors OpenStoreKitTest's `SKTestSession.setSimulatedError(_:forAPI:)` asks this process's
/// StoreKit 2 calls to fail with: not API for apps (`@_spi(StoreKitTest)`).
///
/// One table for the process, as the store it stands for is one (the latest session's daemon).
/// The StoreKit 2 entry points read it before they talk to the daemon, so a simulated failure
/// never reaches storekitd and leaves no trace in its ledger.
@_spi(StoreKitTest)
public enum SimulatedFailures {
    /// The StoreKit 2 APIs a test can make fail, named as StoreKitTest's `FailableStoreKitAPI` values.
    public enum API: Hashable, Sendable {
        case appStoreSync, appTransaction, loadProducts, purchase, subscriptionStatus, verification
    }

    /// What a test set for one API: the value it asked for (handed back as it was given) and
    /// what the API does with it.
    struct Entry {
        let failure: any Sendable
        let effect: Effect
    }

    /// Throwing APIs throw the error; `.verification` turns results into `.unverified`.
    public enum Effect: Sendable {
        case thrown(any Error & Sendable)
        case unverified(VerificationResult<Any>.VerificationError)
    }

    private static let table = Mutex<[API: Entry]>([:])

    /// From now on `api` fails with `effect` (`failure` is what `failure(for:)` returns); nil: it
    /// no longer fails.
    public static func set(_ failure: (any Sendable)?, effect: Effect?, for api: API) {
        table.withLock { table in
            if let failure, let effect { table[api] = Entry(failure: failure, effect: effect) } else { table[api] = nil }
        }
    }

    /// The value last set for `api`, nil when none is.
    public static func failure(for api: API) -> (any Sendable)? {
        table.withLock { $0[api]?.failure }
    }

    /// No API fails any more (a session starts or ends).
    public static func clear() {
        table.withLock { $0.removeAll() }
    }

    /// Throws the error simulated for `api`, if one is set.
    static func throwIfSet(_ api: API) throws {
        if case .thrown(let error)? = table.withLock({ $0[api]?.effect }) { throw error }
    }

    /// The verification error simulated for every signed value, if one is set.
    static var verificationError: VerificationResult<Any>.VerificationError? {
        if case .unverified(let error)? = table.withLock({ $0[.verification]?.effect }) { return error }
        return nil
    }
}

extension VerificationResult.VerificationError {
    /// The same failure, for another signed type (each `VerificationResult<T>` nests its own enum).
    init<Other>(_ other: VerificationResult<Other>.VerificationError) {
        self = switch other {
        case .revokedCertificate: .revokedCertificate
        case .invalidCertificateChain: .invalidCertificateChain
        case .invalidDeviceVerification: .invalidDeviceVerification
        case .invalidEncoding: .invalidEncoding
        case .invalidSignature: .invalidSignature
        case .missingRequiredProperties: .missingRequiredProperties
        }
    }
}
