import CCrypto
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Why signed data was not trusted.
public struct SignedDataVerificationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kinds StoreKit 2's `VerificationResult.VerificationError` distinguishes.
    public enum Kind: Sendable, Equatable {
        case invalidEncoding, invalidCertificateChain, invalidSignature, missingRequiredProperties, revokedCertificate
    }

    public var kind: Kind
    public var reason: String

    public init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }

    public var description: String { reason }
}

/// Checks compact JWS made by storekitd (or by anything signing as Apple does: ES256, an `x5c`
/// chain of leaf, intermediate and root), offline, against trusted root certificates.
///
/// A JWS is trusted when: it has three canonical base64url parts; its header says `ES256` and
/// carries at least leaf and intermediate in `x5c`; the leaf chains through the intermediate to a
/// trusted root under OpenSSL's strict X.509 rules at the payload's `signedDate` (as Apple's
/// verifiers do offline, so an old signature stays verifiable after the leaf is replaced); leaf
/// and intermediate carry Apple's marker extensions; no revocation list the intermediate signed
/// names the leaf (`RevocationList`; a revoked leaf is refused whatever the signature's date);
/// and the signature over `header.payload` verifies with the leaf's key. Anything else is an
/// error with its reason.
public struct SignedDataVerifier: Sendable {
    let roots: [Certificate]
    let revocations: [RevocationList]

    /// `rootCertificatesDER`: the trust anchors, DER-encoded; `revocationLists`: the lists of
    /// revoked certificates known (each counts only for the chains whose intermediate signed it).
    public init(rootCertificatesDER: [[UInt8]], revocationLists: [RevocationList] = []) {
        roots = rootCertificatesDER.compactMap { try? Certificate(der: $0) }
        revocations = revocationLists
    }

    public init(roots: [Certificate], revocationLists: [RevocationList] = []) {
        self.roots = roots
        revocations = revocationLists
    }

    /// The same trust anchors with `revocationLists` in place of the lists known so far.
    public func revoking(_ revocationLists: [RevocationList]) -> SignedDataVerifier {
        SignedDataVerifier(roots: roots, revocationLists: revocationLists)
    }

    /// The payload's bytes (JSON) when `compactJWS` is trusted. `date`: when the chain must be
    /// valid; nil means the payload's `signedDate`, or now when it has none.
    public func verify(_ compactJWS: String, at date: Date? = nil) -> Result<[UInt8], SignedDataVerificationError> {
        let parts = compactJWS.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return .failure(.init(.invalidEncoding, "a compact JWS has three parts, this has \(parts.count)")) }
        guard let headerBytes = Base64URL.decode(parts[0]), let payload = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]) else {
            return .failure(.init(.invalidEncoding, "a part is not base64url"))
        }
        guard case .object(let header)? = try? JSONDecoder().decode(JSONDocument.self, from: Data(headerBytes)) else {
            return .failure(.init(.invalidEncoding, "the header is not a JSON object"))
        }
        guard case .string("ES256")? = header["alg"] else {
            return .failure(.init(.invalidEncoding, "the header's alg is not ES256"))
        }
        guard case .array(let members)? = header["x5c"], case let x5c = members.compactMap(\.string),
              x5c.count == members.count, x5c.count >= 2 else {
            return .failure(.init(.invalidCertificateChain, "the header has no x5c chain of leaf and intermediate"))
        }
        var chain: [Certificate] = []
        for encoded in x5c.prefix(2) {
            guard let der = Data(base64Encoded: encoded), let certificate = try? Certificate(der: [UInt8](der)) else {
                return .failure(.init(.invalidCertificateChain, "a certificate of x5c cannot be read"))
            }
            chain.append(certificate)
        }
        guard case .object(let body)? = try? JSONDecoder().decode(JSONDocument.self, from: Data(payload)) else {
            return .failure(.init(.invalidEncoding, "the payload is not a JSON object"))
        }
        var signedDate: Date?
        switch body["signedDate"] {
        case nil: break
        case .number(let milliseconds)?: signedDate = Date(timeIntervalSince1970: milliseconds / 1000)
        default: return .failure(.init(.invalidEncoding, "the payload's signedDate is not a number"))
        }
        if let problem = verifyChain(leaf: chain[0], intermediate: chain[1], at: date ?? signedDate ?? Date()) {
            return .failure(.init(.invalidCertificateChain, problem))
        }
        if let revoked = revocation(of: chain[0], issuedBy: chain[1]) {
            return .failure(.init(.revokedCertificate, "the signing certificate (serial \(revoked.serial)) was revoked on "
                                      + RFC3339.string(revoked.date)))
        }
        guard let publicKey = X509_get0_pubkey(chain[0].pointer) else {
            return .failure(.init(.invalidCertificateChain, "the leaf has no public key"))
        }
        let signingInput = Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8)
        guard verifiesES256(signature, over: signingInput, publicKey: publicKey) else {
            return .failure(.init(.invalidSignature, "the signature does not verify with the leaf's key"))
        }
        return .success(payload)
    }

    /// A whole JSON document, every value decoded: `JSONDecoder` checks only the members it is
    /// asked for, so a header or payload with a malformed member elsewhere would pass. (Of a
    /// member named twice, one is kept.)
    private enum JSONDocument: Decodable {
        case null, bool(Bool), number(Double), string(String), array([JSONDocument]), object([String: JSONDocument])

        private struct Key: CodingKey {
            let stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        init(from decoder: any Decoder) throws {
            if let object = try? decoder.container(keyedBy: Key.self) {
                var members: [String: JSONDocument] = [:]
                for key in object.allKeys { members[key.stringValue] = try object.decode(JSONDocument.self, forKey: key) }
                self = .object(members)
            } else if var array = try? decoder.unkeyedContainer() {
                var elements: [JSONDocument] = []
                while !array.isAtEnd { elements.append(try array.decode(JSONDocument.self)) }
                self = .array(elements)
            } else {
                let value = try decoder.singleValueContainer()
                if value.decodeNil() {
                    self = .null
                } else if let bool = try? value.decode(Bool.self) {
                    self = .bool(bool)
                } else if let number = try? value.decode(Double.self) {
                    self = .number(number)
                } else {
                    self = .string(try value.decode(String.self))
                }
            }
        }

        var string: String? { if case .string(let text) = self { text } else { nil } }
    }

    /// The entry of a list `intermediate` signed that revokes `certificate`, if any.
    public func revocation(of certificate: Certificate, issuedBy intermediate: Certificate) -> RevocationList.Entry? {
        for list in revocations where list.isIssued(by: intermediate) {
            if let entry = list.entry(revoking: certificate) { return entry }
        }
        return nil
    }

    /// nil when `leaf` chains through `intermediate` to a trusted root at `date`, else the reason.
    func verifyChain(leaf: Certificate, intermediate: Certificate, at date: Date) -> String? {
        guard !roots.isEmpty else { return "no trusted root certificate" }
        guard leaf.hasExtension(Certificate.Marker.leaf) else { return "the leaf lacks the signing marker extension" }
        guard intermediate.hasExtension(Certificate.Marker.intermediate) else {
            return "the intermediate lacks its marker extension"
        }
        return Self.verify(leaf, untrusted: [intermediate], roots: roots, at: date)
    }

    /// OpenSSL's strict path validation of `certificate` at `date`; nil when it passes.
    static func verify(_ certificate: Certificate, untrusted: [Certificate], roots: [Certificate], at date: Date) -> String? {
        guard let store = X509_STORE_new() else { return "cannot allocate a certificate store" }
        defer { X509_STORE_free(store) }
        for root in roots where X509_STORE_add_cert(store, root.pointer) != 1 {
            ERR_clear_error()
        }
        guard let stack = storekit_sk_X509_new() else { return "cannot allocate a certificate stack" }
        defer { storekit_sk_X509_free(stack) }
        for other in untrusted { _ = storekit_sk_X509_push(stack, other.pointer) }
        guard let context = X509_STORE_CTX_new() else { return "cannot allocate a verification context" }
        defer { X509_STORE_CTX_free(context) }
        guard X509_STORE_CTX_init(context, store, certificate.pointer, stack) == 1 else { return "cannot start verification" }
        X509_STORE_CTX_set_flags(context, UInt(X509_V_FLAG_X509_STRICT))
        X509_STORE_CTX_set_time(context, 0, time_t(date.timeIntervalSince1970))
        let verified = X509_verify_cert(context) == 1
        ERR_clear_error()
        if verified { return nil }
        let code = X509_STORE_CTX_get_error(context)
        return String(cString: X509_verify_cert_error_string(Int(code)))
    }
}
