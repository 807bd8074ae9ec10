import CCrypto
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// An X.509 certificate (OpenSSL `X509`), immutable once made.
public final class Certificate: @unchecked Sendable {
    let pointer: OpaquePointer

    init(adopting pointer: OpaquePointer) { self.pointer = pointer }
    deinit { X509_free(pointer) }

    /// Apple's marker extensions, which verifiers written for Apple's chain look for: on the
    /// signing leaf (receipt and JWS signing) and on the intermediate (WWDR).
    public enum Marker {
        public static let leaf = "1.2.840.113635.100.6.11.1"
        public static let intermediate = "1.2.840.113635.100.6.2.1"
    }

    /// What a certificate of the three-level chain may do.
    public enum Role: Sendable {
        case root, intermediate, leaf
    }

    public convenience init(der: [UInt8]) throws(SigningError) {
        let certificate = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var start = buffer.baseAddress
            return d2i_X509(nil, &start, der.count)
        }
        guard let certificate else { throw .openSSL("Cannot read the DER certificate") }
        self.init(adopting: certificate)
    }

    public convenience init(pem: [UInt8]) throws(SigningError) {
        let certificate = try withReadBIO(pem) { (bio) throws(SigningError) -> OpaquePointer in
            guard let certificate = PEM_read_bio_X509(bio, nil, nil, nil) else { throw .openSSL("Cannot read the PEM certificate") }
            return certificate
        }
        self.init(adopting: certificate)
    }

    public var der: [UInt8] {
        var output: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509(pointer, &output)
        guard length > 0, let output else { return [] }
        defer { CRYPTO_free(output, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: output, count: Int(length)))
    }

    public var pem: [UInt8] {
        (try? withMemoryBIO { PEM_write_bio_X509($0, pointer) }) ?? []
    }

    /// The subject's common name.
    public var commonName: String {
        guard let name = X509_get_subject_name(pointer) else { return "" }
        var buffer = [CChar](repeating: 0, count: 256)
        let length = X509_NAME_get_text_by_NID(name, NID_commonName, &buffer, Int32(buffer.count))
        guard length > 0 else { return "" }
        return String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether the certificate carries the extension with this dotted OID.
    public func hasExtension(_ oid: String) -> Bool {
        guard let object = OBJ_txt2obj(oid, 1) else { return false }
        defer { ASN1_OBJECT_free(object) }
        return X509_get_ext_by_OBJ(pointer, object, -1) >= 0
    }

    /// The end of the validity period.
    public var notAfter: Date {
        var days: Int32 = 0
        var seconds: Int32 = 0
        guard let end = X509_get0_notAfter(pointer), ASN1_TIME_diff(&days, &seconds, nil, end) == 1 else { return .distantPast }
        return Date(timeIntervalSinceNow: Double(days) * 86_400 + Double(seconds))
    }

    /// Issues a certificate of `role` for `key`, signed by `issuer` (nil: self-signed root).
    /// RFC 5280 profile that OpenSSL's strict verification accepts: version 3, random positive
    /// serial, critical basic constraints and key usage, subject and authority key identifiers.
    public static func issue(
        role: Role, commonName: String, key: SigningKey, issuer: (certificate: Certificate, key: SigningKey)?,
        validForDays days: Int
    ) throws(SigningError) -> Certificate {
        guard let x509 = X509_new() else { throw .openSSL("Cannot allocate a certificate") }
        let certificate = Certificate(adopting: x509)
        guard X509_set_version(x509, 2) == 1 else { throw .openSSL("Cannot set the version") }
        var serial = [UInt8](repeating: 0, count: 16)
        guard RAND_bytes(&serial, Int32(serial.count)) == 1 else { throw .openSSL("Cannot draw a serial number") }
        serial[0] = (serial[0] & 0x7F) | 0x40
        guard let number = BN_bin2bn(serial, Int32(serial.count), nil) else { throw .openSSL("Cannot make the serial") }
        defer { BN_free(number) }
        guard BN_to_ASN1_INTEGER(number, X509_get_serialNumber(x509)) != nil else { throw .openSSL("Cannot set the serial") }

        guard let name = X509_NAME_new() else { throw .openSSL("Cannot allocate a name") }
        defer { X509_NAME_free(name) }
        guard X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, "storekitd", -1, -1, 0) == 1,
              X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, commonName, -1, -1, 0) == 1,
              X509_set_subject_name(x509, name) == 1 else { throw .openSSL("Cannot set the subject") }
        let issuerName = issuer.map { X509_get_subject_name($0.certificate.pointer) } ?? name
        guard X509_set_issuer_name(x509, issuerName) == 1 else { throw .openSSL("Cannot set the issuer") }
        // Valid from an hour ago, so that a clock a little behind still accepts a new chain.
        guard X509_time_adj_ex(X509_getm_notBefore(x509), 0, -3600, nil) != nil,
              X509_time_adj_ex(X509_getm_notAfter(x509), Int32(days), 0, nil) != nil else {
            throw .openSSL("Cannot set the validity")
        }
        guard X509_set_pubkey(x509, key.pointer) == 1 else { throw .openSSL("Cannot set the public key") }

        var extensions: [(String, String)] = []
        switch role {
        case .root:
            extensions = [("basicConstraints", "critical,CA:TRUE"), ("keyUsage", "critical,keyCertSign,cRLSign"),
                          ("subjectKeyIdentifier", "hash")]
        case .intermediate:
            extensions = [("basicConstraints", "critical,CA:TRUE,pathlen:0"), ("keyUsage", "critical,keyCertSign,cRLSign"),
                          ("subjectKeyIdentifier", "hash"), ("authorityKeyIdentifier", "keyid:always"),
                          (Marker.intermediate, "ASN1:NULL")]
        case .leaf:
            extensions = [("basicConstraints", "critical,CA:FALSE"), ("keyUsage", "critical,digitalSignature"),
                          ("subjectKeyIdentifier", "hash"), ("authorityKeyIdentifier", "keyid:always"),
                          (Marker.leaf, "ASN1:NULL")]
        }
        var context = X509V3_CTX()
        storekit_X509V3_set_ctx_nodb(&context)
        X509V3_set_ctx(&context, issuer?.certificate.pointer ?? x509, x509, nil, nil, 0)
        for (name, value) in extensions {
            guard let ext = X509V3_EXT_nconf(nil, &context, name, value) else { throw .openSSL("Cannot make the \(name) extension") }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(x509, ext, -1) == 1 else { throw .openSSL("Cannot add the \(name) extension") }
        }
        guard X509_sign(x509, (issuer?.key ?? key).pointer, EVP_sha256()) > 0 else { throw .openSSL("Cannot sign the certificate") }
        return certificate
    }
}
