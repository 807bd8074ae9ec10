import Foundation

/// The result of checking signed data from the store: the value, and whether its signature verified.
///
/// OpenStoreKit reports `.verified` only for data whose compact JWS chains to storekitd's root
/// certificate and whose signature checks out; everything else is `.unverified` with the reason.
public enum VerificationResult<SignedType> {
    /// The signed data did not pass verification; the value is what it claims, unchecked.
    case unverified(SignedType, VerificationResult<SignedType>.VerificationError)
    /// The signed data passed verification.
    case verified(SignedType)
}

extension VerificationResult: Sendable where SignedType: Sendable {}
extension VerificationResult: Equatable where SignedType: Equatable {}
extension VerificationResult: Hashable where SignedType: Hashable {}

extension VerificationResult {
    /// The verified value; throws the verification error when the data did not verify.
    public var payloadValue: SignedType {
        get throws {
            switch self {
            case .verified(let value): return value
            case .unverified(_, let error): throw error
            }
        }
    }

    /// The value whether or not it verified; use it only where an unverified value does no harm.
    public var unsafePayloadValue: SignedType {
        switch self {
        case .verified(let value), .unverified(let value, _): value
        }
    }

    /// The signed data as the store sent it: a compact JWS (header.payload.signature, base64url).
    public var jwsRepresentation: String {
        (unsafePayloadValue as? any JWSRepresentable)?.jwsRepresentation ?? ""
    }

    /// The JWS header, decoded from base64url.
    public var headerData: Data { Data(JWS.segment(0, of: jwsRepresentation) ?? []) }

    /// The JWS payload (the value's JSON), decoded from base64url.
    public var payloadData: Data { Data(JWS.segment(1, of: jwsRepresentation) ?? []) }

    /// The JWS signature bytes (raw r ‖ s for ES256), decoded from base64url.
    public var signatureData: Data { Data(JWS.segment(2, of: jwsRepresentation) ?? []) }

    /// The bytes the signature covers: the header and payload segments as sent, joined by a dot.
    public var signedData: Data {
        let parts = jwsRepresentation.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return Data() }
        return Data("\(parts[0]).\(parts[1])".utf8)
    }

    /// When the store signed the data.
    public var signedDate: Date {
        (unsafePayloadValue as? any JWSRepresentable)?.signedDate ?? Date(timeIntervalSince1970: 0)
    }

    /// The device verification of a transaction or app transaction (see
    /// `Transaction.deviceVerification`); empty for renewal info, which carries none.
    public var deviceVerification: Data {
        (unsafePayloadValue as? any DeviceVerified)?.deviceVerification ?? Data()
    }

    /// The nonce the device verification was made with (all zeros where there is none).
    public var deviceVerificationNonce: UUID {
        (unsafePayloadValue as? any DeviceVerified)?.deviceVerificationNonce ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    }
}

/// Signed values made for one device (`Transaction`, `AppTransaction`).
protocol DeviceVerified {
    var deviceVerification: Data { get }
    var deviceVerificationNonce: UUID { get }
}

/// The StoreKit 2 values that come from a compact JWS (`Transaction`, `RenewalInfo`, `AppTransaction`).
protocol JWSRepresentable {
    /// The compact JWS the value was decoded from (empty when the store sent none).
    var jwsRepresentation: String { get }
    /// The payload's `signedDate`.
    var signedDate: Date { get }
}
