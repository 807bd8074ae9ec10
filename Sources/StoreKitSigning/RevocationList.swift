import CCrypto
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The signing certificates taken back before their end: an X.509 certificate revocation list
/// (RFC 5280, OpenSSL `X509_CRL`) that the chain's intermediate signs, naming each revoked
/// leaf by its serial number. `storekitctl rotate-key --revoke` adds the leaf it replaces.
///
/// A verifier trusts a list only when the intermediate of the chain it checks signed it (so the
/// list's place needs no trust of its own: a list nobody could sign is ignored), and a leaf it
/// names is refused whatever the date of the signature: a key taken back because someone else may
/// hold it could have signed any date.
public final class RevocationList: @unchecked Sendable {
    let pointer: OpaquePointer

    init(adopting pointer: OpaquePointer) { self.pointer = pointer }
    deinit { X509_CRL_free(pointer) }

    /// One revoked certificate: its serial number (hexadecimal, as `openssl` prints it) and when.
    public struct Entry: Sendable, Equatable {
        public let serial: String
        public let date: Date
    }

    public convenience init(pem: [UInt8]) throws(SigningError) {
        let list = try withReadBIO(pem) { (bio) throws(SigningError) -> OpaquePointer in
            guard let list = PEM_read_bio_X509_CRL(bio, nil, nil, nil) else { throw .openSSL("Cannot read the PEM revocation list") }
            return list
        }
        self.init(adopting: list)
    }

    public convenience init(der: [UInt8]) throws(SigningError) {
        let list = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var start = buffer.baseAddress
            return d2i_X509_CRL(nil, &start, der.count)
        }
        guard let list else { throw .openSSL("Cannot read the DER revocation list") }
        self.init(adopting: list)
    }

    public var pem: [UInt8] {
        (try? withMemoryBIO { PEM_write_bio_X509_CRL($0, pointer) }) ?? []
    }

    public var der: [UInt8] {
        var output: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509_CRL(pointer, &output)
        guard length > 0, let output else { return [] }
        defer { CRYPTO_free(output, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: output, count: Int(length)))
    }

    /// The revoked certificates, in the list's order.
    public var entries: [Entry] {
        guard let revoked = X509_CRL_get_REVOKED(pointer) else { return [] }
        return (0..<storekit_sk_X509_REVOKED_num(revoked)).compactMap { index -> Entry? in
            guard let entry = storekit_sk_X509_REVOKED_value(revoked, index),
                  let serial = X509_REVOKED_get0_serialNumber(entry) else { return nil }
            return Entry(serial: Self.hex(serial), date: Self.date(X509_REVOKED_get0_revocationDate(entry)))
        }
    }

    /// When the list was made.
    public var lastUpdate: Date { Self.date(X509_CRL_get0_lastUpdate(pointer)) }

    /// Whether `issuer`'s key signed this list and `issuer` is the list's named issuer.
    public func isIssued(by issuer: Certificate) -> Bool {
        defer { ERR_clear_error() }
        guard let name = X509_CRL_get_issuer(pointer), X509_NAME_cmp(name, X509_get_subject_name(issuer.pointer)) == 0,
              let key = X509_get0_pubkey(issuer.pointer) else { return false }
        return X509_CRL_verify(pointer, key) == 1
    }

    /// The entry naming `certificate`, if the list revokes it (by serial number; the caller has
    /// checked that the list's issuer issued `certificate`).
    public func entry(revoking certificate: Certificate) -> Entry? {
        var found: OpaquePointer?
        guard let serial = X509_get0_serialNumber(certificate.pointer),
              X509_CRL_get0_by_serial(pointer, &found, serial) == 1, let found else { return nil }
        return Entry(serial: Self.hex(serial), date: Self.date(X509_REVOKED_get0_revocationDate(found)))
    }

    /// A list by `issuer` (signed with `key`) naming `earlier`'s entries and, when given,
    /// `certificate` revoked now. Its next update is the issuer's end: the list is re-made only
    /// when a certificate is revoked, and a verifier offline reads the newest it has.
    public static func issue(revoking certificate: Certificate? = nil, keeping earlier: RevocationList? = nil,
                             issuer: Certificate, key: SigningKey) throws(SigningError) -> RevocationList {
        guard let made = X509_CRL_new() else { throw .openSSL("Cannot allocate a revocation list") }
        let list = RevocationList(adopting: made)
        guard X509_CRL_set_version(made, 1) == 1,   // v2, for the extensions
              X509_CRL_set_issuer_name(made, X509_get_subject_name(issuer.pointer)) == 1 else {
            throw .openSSL("Cannot set the revocation list's issuer")
        }
        let now = time(nil)
        guard let lastUpdate = ASN1_TIME_set(nil, now) else { throw .openSSL("Cannot make a time") }
        defer { ASN1_TIME_free(lastUpdate) }
        guard X509_CRL_set1_lastUpdate(made, lastUpdate) == 1,
              X509_CRL_set1_nextUpdate(made, X509_get0_notAfter(issuer.pointer)) == 1 else {
            throw .openSSL("Cannot set the revocation list's dates")
        }
        var revoked: [(serial: UnsafePointer<ASN1_INTEGER>, date: UnsafePointer<ASN1_TIME>?)] = []
        if let earlier, let entries = X509_CRL_get_REVOKED(earlier.pointer) {
            for index in 0..<storekit_sk_X509_REVOKED_num(entries) {
                guard let entry = storekit_sk_X509_REVOKED_value(entries, index),
                      let serial = X509_REVOKED_get0_serialNumber(entry) else { continue }
                revoked.append((serial, X509_REVOKED_get0_revocationDate(entry)))
            }
        }
        if let certificate, let serial = X509_get0_serialNumber(certificate.pointer),
           certificate.pointer != issuer.pointer, earlier?.entry(revoking: certificate) == nil {
            revoked.append((serial, UnsafePointer(lastUpdate)))
        }
        for (serial, date) in revoked {
            guard let entry = X509_REVOKED_new() else { throw .openSSL("Cannot allocate a revocation entry") }
            guard X509_REVOKED_set_serialNumber(entry, UnsafeMutablePointer(mutating: serial)) == 1,
                  X509_REVOKED_set_revocationDate(entry, UnsafeMutablePointer(mutating: date ?? UnsafePointer(lastUpdate))) == 1,
                  X509_CRL_add0_revoked(made, entry) == 1 else {
                X509_REVOKED_free(entry)
                throw .openSSL("Cannot add a revocation entry")
            }
        }
        var context = X509V3_CTX()
        storekit_X509V3_set_ctx_nodb(&context)
        X509V3_set_ctx(&context, issuer.pointer, nil, nil, made, 0)
        guard let keyIdentifier = X509V3_EXT_nconf(nil, &context, "authorityKeyIdentifier", "keyid:always") else {
            throw .openSSL("Cannot make the authorityKeyIdentifier extension")
        }
        defer { X509_EXTENSION_free(keyIdentifier) }
        guard X509_CRL_add_ext(made, keyIdentifier, -1) == 1 else { throw .openSSL("Cannot add the authorityKeyIdentifier extension") }
        guard X509_CRL_sort(made) == 1, X509_CRL_sign(made, key.pointer, EVP_sha256()) > 0 else {
            throw .openSSL("Cannot sign the revocation list")
        }
        return list
    }

    static func hex(_ serial: UnsafePointer<ASN1_INTEGER>) -> String {
        guard let number = ASN1_INTEGER_to_BN(serial, nil) else { return "" }
        defer { BN_free(number) }
        guard let text = BN_bn2hex(number) else { return "" }
        defer { CRYPTO_free(text, #fileID, #line) }
        return String(cString: text)
    }

    static func date(_ time: UnsafePointer<ASN1_TIME>?) -> Date {
        var parts = tm()
        guard let time, ASN1_TIME_to_tm(time, &parts) == 1 else { return .distantPast }
        return Date(timeIntervalSince1970: Double(timegm(&parts)))
    }
}
