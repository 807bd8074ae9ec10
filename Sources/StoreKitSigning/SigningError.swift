import CCrypto

/// A failure to make, load or use keys, certificates and signatures; carries OpenSSL's reason.
public struct SigningError: Error, Sendable, CustomStringConvertible {
    public let description: String

    public init(_ message: String) { description = message }

    /// `message` followed by the reasons OpenSSL queued on this thread (the queue is emptied).
    static func openSSL(_ message: String) -> SigningError {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return SigningError(reasons.isEmpty ? message : message + ": " + reasons.joined(separator: "; "))
    }
}

/// Runs `body` with a memory BIO and returns what was written to it.
func withMemoryBIO(_ body: (OpaquePointer) -> Int32) throws(SigningError) -> [UInt8] {
    guard let bio = BIO_new(BIO_s_mem()) else { throw .openSSL("Cannot allocate a memory BIO") }
    defer { BIO_free(bio) }
    guard body(bio) == 1 else { throw .openSSL("Cannot encode") }
    var data: UnsafeMutablePointer<CChar>?
    let count = storekit_BIO_get_mem_data(bio, &data)
    guard count > 0, let data else { return [] }
    return data.withMemoryRebound(to: UInt8.self, capacity: count) { Array(UnsafeBufferPointer(start: $0, count: count)) }
}

/// Runs `body` with a read-only memory BIO over `bytes`.
func withReadBIO<T>(_ bytes: [UInt8], _ body: (OpaquePointer) throws(SigningError) -> T) throws(SigningError) -> T {
    let result = bytes.withUnsafeBytes { buffer -> Result<T, SigningError> in
        guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else {
            return .failure(.openSSL("Cannot allocate a memory BIO"))
        }
        defer { BIO_free(bio) }
        do throws(SigningError) {
            return .success(try body(bio))
        } catch {
            return .failure(error)
        }
    }
    return try result.get()
}
