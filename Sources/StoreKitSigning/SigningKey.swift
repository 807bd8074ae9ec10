import CCrypto

/// SHA-256 fetched once: `EVP_sha256()` makes OpenSSL 3 look the algorithm up at every use.
nonisolated(unsafe) let sha256: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

/// A P-256 key pair (OpenSSL `EVP_PKEY`), used read-only once made: signing from several threads is safe.
public final class SigningKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init(adopting pointer: OpaquePointer) { self.pointer = pointer }
    deinit { EVP_PKEY_free(pointer) }

    /// A new random P-256 key.
    public static func generate() throws(SigningError) -> SigningKey {
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil) else { throw .openSSL("Cannot make a key context") }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1,
              EVP_PKEY_CTX_set_ec_paramgen_curve_nid(context, NID_X9_62_prime256v1) == 1,
              EVP_PKEY_keygen(context, &key) == 1, let key else {
            throw .openSSL("Cannot generate a P-256 key")
        }
        return SigningKey(adopting: key)
    }

    /// Reads a PEM private key (PKCS#8 or SEC 1) and checks that it is P-256.
    public convenience init(pem: [UInt8]) throws(SigningError) {
        let key = try withReadBIO(pem) { (bio) throws(SigningError) -> OpaquePointer in
            guard let key = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else { throw .openSSL("Cannot read the private key") }
            return key
        }
        self.init(adopting: key)
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC, EVP_PKEY_get_bits(key) == 256 else {
            throw SigningError("The private key is not a P-256 key")
        }
    }

    /// The private key as PKCS#8 PEM.
    public func privateKeyPEM() throws(SigningError) -> [UInt8] {
        try withMemoryBIO { PEM_write_bio_PrivateKey($0, pointer, nil, nil, 0, nil, nil) }
    }

    /// An ECDSA signature with SHA-256 over `data`, as JWS wants it: r and s, 32 bytes each.
    public func signatureES256(over data: [UInt8]) throws(SigningError) -> [UInt8] {
        let der = try signatureDER(over: data)
        return try der.withUnsafeBufferPointer { (buffer) throws(SigningError) -> [UInt8] in
            var start = buffer.baseAddress
            guard let signature = d2i_ECDSA_SIG(nil, &start, der.count) else { throw .openSSL("Cannot read the ECDSA signature") }
            defer { ECDSA_SIG_free(signature) }
            var raw = [UInt8](repeating: 0, count: 64)
            guard BN_bn2binpad(ECDSA_SIG_get0_r(signature), &raw, 32) == 32,
                  raw.withUnsafeMutableBufferPointer({ BN_bn2binpad(ECDSA_SIG_get0_s(signature), $0.baseAddress! + 32, 32) }) == 32 else {
                throw .openSSL("Cannot encode the ECDSA signature")
            }
            return raw
        }
    }

    /// An ECDSA signature with SHA-256 over `data`, DER-encoded (`ECDSA-Sig-Value`).
    public func signatureDER(over data: [UInt8]) throws(SigningError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw .openSSL("Cannot make a digest context") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, sha256 ?? EVP_sha256(), nil, pointer) == 1 else { throw .openSSL("Cannot start signing") }
        var length = 0
        guard EVP_DigestSign(context, nil, &length, data, data.count) == 1 else { throw .openSSL("Cannot size the signature") }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, data, data.count) == 1 else { throw .openSSL("Cannot sign") }
        return Array(signature.prefix(length))
    }
}

/// Checks an ES256 signature (r ‖ s, 64 bytes) over `data` with the public key of `key`.
func verifiesES256(_ signature: [UInt8], over data: [UInt8], publicKey key: OpaquePointer) -> Bool {
    guard signature.count == 64, let ecdsa = ECDSA_SIG_new() else { return false }
    defer { ECDSA_SIG_free(ecdsa) }
    guard let r = BN_bin2bn(signature, 32, nil) else { return false }
    guard let s = signature.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress! + 32, 32, nil) }) else {
        BN_free(r)
        return false
    }
    guard ECDSA_SIG_set0(ecdsa, r, s) == 1 else {
        BN_free(r)
        BN_free(s)
        return false
    }
    var derPointer: UnsafeMutablePointer<UInt8>?
    let derLength = i2d_ECDSA_SIG(ecdsa, &derPointer)
    guard derLength > 0, let derPointer else { return false }
    defer { CRYPTO_free(derPointer, #fileID, #line) }
    guard let context = EVP_MD_CTX_new() else { return false }
    defer { EVP_MD_CTX_free(context) }
    guard EVP_DigestVerifyInit(context, nil, sha256 ?? EVP_sha256(), nil, key) == 1 else { return false }
    let verified = EVP_DigestVerify(context, derPointer, Int(derLength), data, data.count) == 1
    ERR_clear_error()
    return verified
}
