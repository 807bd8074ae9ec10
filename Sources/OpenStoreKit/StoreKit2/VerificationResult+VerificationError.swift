import Foundation

extension VerificationResult {
    /// Why signed data did not verify.
    public enum VerificationError: Error, LocalizedError, Sendable, Hashable {
        /// A certificate of the chain has been revoked.
        case revokedCertificate
        /// The certificate chain does not lead to the store's root certificate.
        case invalidCertificateChain
        /// The data was signed for another device.
        case invalidDeviceVerification
        /// The data is not a well-formed compact JWS.
        case invalidEncoding
        /// The signature does not match the data, or could not be checked.
        case invalidSignature
        /// The payload lacks properties it must have.
        case missingRequiredProperties

        /// A description of the failure.
        public var errorDescription: String? {
            switch self {
            case .revokedCertificate: "A certificate of the signed data has been revoked."
            case .invalidCertificateChain: "The certificate chain of the signed data is not valid."
            case .invalidDeviceVerification: "The signed data belongs to another device."
            case .invalidEncoding: "The signed data is not correctly encoded."
            case .invalidSignature: "The signature of the signed data is not valid."
            case .missingRequiredProperties: "The signed data lacks required properties."
            }
        }

        /// The error for a failure of the library's check.
        init(_ failure: SignatureFailure) {
            self = switch failure {
            case .invalidEncoding: .invalidEncoding
            case .invalidCertificateChain: .invalidCertificateChain
            case .invalidSignature: .invalidSignature
            case .missingRequiredProperties: .missingRequiredProperties
            case .invalidDeviceVerification: .invalidDeviceVerification
            case .revokedCertificate: .revokedCertificate
            }
        }
    }

    /// `.verified(value)` when the check found no failure, else `.unverified(value, reason)`.
    /// A verification error a test simulates (`SKTestSession.setSimulatedError(_:forAPI:)`) wins.
    init(_ value: SignedType, failure: SignatureFailure?) {
        if let simulated = SimulatedFailures.verificationError {
            self = .unverified(value, VerificationError(simulated))
        } else if let failure {
            self = .unverified(value, VerificationError(failure))
        } else {
            self = .verified(value)
        }
    }
}
