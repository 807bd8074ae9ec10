import CCrypto
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

// The app receipt's envelope: PKCS#7 signed data (RFC 2315) with the payload inside, signed by
// the leaf with SHA-256, carrying leaf, intermediate and root as Apple's receipts do.

extension SigningIdentity {
    /// The receipt file's bytes: `receipt`'s payload in PKCS#7 signed data, DER.
    public func signReceipt(_ receipt: AppReceipt) throws(SigningError) -> [UInt8] {
        let content = receipt.encoded()
        guard let chain = storekit_sk_X509_new() else { throw .openSSL("Cannot allocate a certificate stack") }
        defer { storekit_sk_X509_free(chain) }
        _ = storekit_sk_X509_push(chain, intermediate.pointer)
        _ = storekit_sk_X509_push(chain, root.pointer)
        let signed = try withReadBIO(content) { (bio) throws(SigningError) -> UnsafeMutablePointer<PKCS7> in
            guard let signed = PKCS7_sign(leaf.pointer, leafKey.pointer, chain, bio, PKCS7_BINARY | PKCS7_NOSMIMECAP) else {
                throw .openSSL("Cannot sign the receipt")
            }
            return signed
        }
        defer { PKCS7_free(signed) }
        var output: UnsafeMutablePointer<UInt8>?
        let length = i2d_PKCS7(signed, &output)
        guard length > 0, let output else { throw .openSSL("Cannot encode the receipt") }
        defer { CRYPTO_free(output, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: output, count: Int(length)))
    }
}

/// Checks an app receipt offline: PKCS#7 signed data whose signer chains to a trusted root (the
/// signer carrying the signing marker extension, revoked by no list its issuer signed), whose
/// signature covers the payload.
public struct ReceiptVerifier: Sendable {
    let roots: [Certificate]
    let revocations: [RevocationList]

    public init(roots: [Certificate], revocationLists: [RevocationList] = []) {
        self.roots = roots
        revocations = revocationLists
    }

    /// The payload when `receipt` is trusted; why not otherwise.
    public func verify(_ receipt: [UInt8], at date: Date = Date()) -> Result<AppReceipt, SignedDataVerificationError> {
        let parsed = receipt.withUnsafeBufferPointer { buffer -> UnsafeMutablePointer<PKCS7>? in
            var start = buffer.baseAddress
            return d2i_PKCS7(nil, &start, receipt.count)
        }
        guard let pkcs7 = parsed else {
            ERR_clear_error()
            return .failure(.init(.invalidEncoding, "the receipt is not PKCS#7 DER"))
        }
        defer { PKCS7_free(pkcs7) }
        guard let store = X509_STORE_new() else { return .failure(.init(.invalidCertificateChain, "cannot allocate a store")) }
        defer { X509_STORE_free(store) }
        for root in roots { _ = X509_STORE_add_cert(store, root.pointer) }
        if let parameters = X509_STORE_get0_param(store) {
            X509_VERIFY_PARAM_set_time(parameters, time_t(date.timeIntervalSince1970))
            X509_VERIFY_PARAM_set_flags(parameters, UInt(X509_V_FLAG_X509_STRICT))
        }
        guard let output = BIO_new(BIO_s_mem()) else { return .failure(.init(.invalidEncoding, "cannot allocate a BIO")) }
        defer { BIO_free(output) }
        guard PKCS7_verify(pkcs7, nil, store, nil, output, PKCS7_BINARY) == 1 else {
            let error = SigningError.openSSL("the signature or its chain does not verify")
            return .failure(.init(.invalidSignature, error.description))
        }
        guard let signers = PKCS7_get0_signers(pkcs7, nil, 0) else {
            ERR_clear_error()
            return .failure(.init(.invalidCertificateChain, "no signer"))
        }
        defer { storekit_sk_X509_free(signers) }
        guard storekit_sk_X509_num(signers) == 1, let signer = storekit_sk_X509_value(signers, 0),
              X509_up_ref(signer) == 1 else {
            return .failure(.init(.invalidCertificateChain, "not exactly one signer"))
        }
        let leaf = Certificate(adopting: signer)
        guard leaf.hasExtension(Certificate.Marker.leaf) else {
            return .failure(.init(.invalidCertificateChain, "the signer lacks the signing marker extension"))
        }
        if let revoked = revocation(of: leaf, in: pkcs7) {
            return .failure(.init(.revokedCertificate, "the signing certificate (serial \(revoked.serial)) was revoked on "
                                      + RFC3339.string(revoked.date)))
        }
        var data: UnsafeMutablePointer<CChar>?
        let count = storekit_BIO_get_mem_data(output, &data)
        let payload = count > 0 && data != nil
            ? data!.withMemoryRebound(to: UInt8.self, capacity: count) { Array(UnsafeBufferPointer(start: $0, count: count)) }
            : []
        do {
            return .success(try AppReceipt(payload: payload))
        } catch {
            return .failure(.init(.missingRequiredProperties, error.description))
        }
    }

    /// The entry revoking `leaf` in a list signed by one of the receipt's certificates that issued
    /// it (the signature's chain was verified through one of them; every candidate is asked, so a
    /// certificate added beside the real issuer cannot hide a list).
    func revocation(of leaf: Certificate, in pkcs7: UnsafeMutablePointer<PKCS7>) -> RevocationList.Entry? {
        guard !revocations.isEmpty, let certificates = pkcs7.pointee.d.sign?.pointee.cert else { return nil }
        for index in 0..<storekit_sk_X509_num(certificates) {
            guard let candidate = storekit_sk_X509_value(certificates, index),
                  X509_check_issued(candidate, leaf.pointer) == X509_V_OK, X509_up_ref(candidate) == 1 else { continue }
            let issuer = Certificate(adopting: candidate)
            for list in revocations where list.isIssued(by: issuer) {
                if let entry = list.entry(revoking: leaf) { return entry }
            }
        }
        return nil
    }
}


/// The device identifier an app receipt's hash is made with, on Linux: 16 bytes of
/// HMAC-SHA256 keyed with the machine id (`/etc/machine-id`) over the bundle identifier — stable
/// for one app on one machine, different between apps (like Apple's `identifierForVendor`), and
/// revealing nothing of the machine id.
public enum DeviceIdentifier {
    public static func forApp(_ bundleIdentifier: String, machineIDPath: String = "/etc/machine-id") throws(SigningError) -> [UInt8] {
        let machineID = machineIDPath == defaultPath ? try systemMachineID.get() : try Self.machineID(at: machineIDPath)
        return Array(Digest.hmacSHA256(key: machineID, Array(bundleIdentifier.utf8)).prefix(16))
    }

    static let defaultPath = "/etc/machine-id"
    /// The machine id does not change while a process runs: read once, not for every receipt.
    static let systemMachineID = Result { () throws(SigningError) -> [UInt8] in try machineID(at: defaultPath) }

    static func machineID(at machineIDPath: String) throws(SigningError) -> [UInt8] {
        guard let text = try? String(contentsOfFile: machineIDPath, encoding: .utf8) else {
            throw SigningError("Cannot read the machine id at \(machineIDPath)")
        }
        let hex = Array(text.trimmingWhitespace().utf8)
        guard hex.count == 32 else { throw SigningError("\(machineIDPath) is not a machine id") }
        var machineID: [UInt8] = []
        for index in stride(from: 0, to: 32, by: 2) {
            guard let byte = UInt8(String(decoding: hex[index..<index + 2], as: UTF8.self), radix: 16) else {
                throw SigningError("\(machineIDPath) is not a machine id")
            }
            machineID.append(byte)
        }
        return machineID
    }
}
