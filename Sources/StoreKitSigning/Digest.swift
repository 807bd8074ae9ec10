import CCrypto
#if canImport(Glibc)
import Glibc
#endif

/// Digests and keyed hashes from libcrypto.
public enum Digest {
    public static func sha1(_ bytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
        _ = SHA1(bytes, bytes.count, &output)
        return output
    }

    public static func sha384(_ bytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(SHA384_DIGEST_LENGTH))
        _ = SHA384(bytes, bytes.count, &output)
        return output
    }

    /// `AppTransaction.deviceVerification` as Apple computes it: SHA-384 of the nonce's lowercase
    /// UUID string followed by the device identifier's lowercase UUID string.
    public static func deviceVerification(nonce: String, deviceIdentifier: [UInt8]) -> [UInt8] {
        sha384(Array((nonce.lowercased() + uuidString(deviceIdentifier)).utf8))
    }

    /// 16 bytes as a lowercase UUID string.
    /// (Fewer than 16 bytes: their hex digits alone.) Written digit by digit into the string's
    /// own storage: it runs for every transaction signed (its device verification).
    public static func uuidString(_ bytes: [UInt8]) -> String {
        let count = min(bytes.count, 16)
        let dashed = count == 16
        return String(unsafeUninitializedCapacity: count * 2 + (dashed ? 4 : 0)) { buffer in
            var at = 0
            for index in 0..<count {
                if dashed && (index == 4 || index == 6 || index == 8 || index == 10) {
                    buffer[at] = UInt8(ascii: "-")
                    at += 1
                }
                buffer[at] = hexDigits[Int(bytes[index] >> 4)]
                buffer[at + 1] = hexDigits[Int(bytes[index] & 0x0F)]
                at += 2
            }
            return at
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    public static func hmacSHA256(key: [UInt8], _ bytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = HMAC(EVP_sha256(), key, Int32(key.count), bytes, bytes.count, &output, &length)
        return Array(output.prefix(Int(length)))
    }
}

/// SHA-256 of bytes given piece by piece (a file read in chunks), from libcrypto.
public final class SHA256Stream {
    private let context: OpaquePointer?

    public init() {
        context = EVP_MD_CTX_new()
        _ = EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        _ = EVP_DigestUpdate(context, base, bytes.count)
    }

    public func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest of everything given (32 bytes); the stream is spent.
    public func finish() -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = EVP_DigestFinal_ex(context, &output, &length)
        return output
    }

    /// The SHA-256 of what the open file `fd` holds from `offset` to its end, read with pread
    /// (the file's offset does not move); nil with the errno when a read fails.
    public static func digest(ofFile fd: Int32, from offset: Int64 = 0, into stream: SHA256Stream = SHA256Stream())
        -> Result<[UInt8], FileReadError>
    {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var position = offset
        while true {
            let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(position)) }
            if count < 0 {
                if errno == EINTR { continue }
                return .failure(FileReadError(errno: errno))
            }
            if count == 0 { return .success(stream.finish()) }
            buffer.withUnsafeBytes { stream.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            position += Int64(count)
        }
    }
}

/// A read that failed, with its errno.
public struct FileReadError: Error, Sendable {
    public let errno: Int32
}

/// libcrypto as a library linked into apps uses it: from threads of its own, which the app does
/// not stop before it exits.
public enum CryptoLibrary {
    /// Keeps libcrypto's state until the process is gone: by default OpenSSL frees it in an
    /// `atexit` handler, and a thread of this library hashing or verifying meanwhile (a download,
    /// the connection's signature checks) would crash an app calling `exit()` in a callback.
    public static func keepUntilExit() {
        _ = initialized
    }

    private static let initialized: Bool = OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_ATEXIT), nil) == 1
}
