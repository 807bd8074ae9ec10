import CCrypto

/// Digests and keyed hashes from libcrypto.
public enum Digest {
    public static func sha1(_ bytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
        _ = SHA1(bytes, bytes.count, &output)
        return output
    }

    public static func hmacSHA256(key: [UInt8], _ bytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = HMAC(EVP_sha256(), key, Int32(key.count), bytes, bytes.count, &output, &length)
        return Array(output.prefix(Int(length)))
    }
}
