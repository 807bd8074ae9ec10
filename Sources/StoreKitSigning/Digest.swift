import CCrypto

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
    public static func uuidString(_ bytes: [UInt8]) -> String {
        let hex = bytes.prefix(16).map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        let characters = Array(hex)
        guard characters.count == 32 else { return hex }
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(characters[$0]) }.joined(separator: "-")
    }

    public static func hmacSHA256(key: [UInt8], _ bytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = HMAC(EVP_sha256(), key, Int32(key.count), bytes, bytes.count, &output, &length)
        return Array(output.prefix(Int(length)))
    }
}
