import Foundation

/// The pieces of a compact JWS (RFC 7515): three base64url segments joined by dots.
enum JWS {
    /// Segment `index` (0 header, 1 payload, 2 signature) decoded; nil when `jws` is not three
    /// base64url segments.
    static func segment(_ index: Int, of jws: String) -> [UInt8]? {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.indices.contains(index) else { return nil }
        return base64URLDecoded(parts[index])
    }

    /// base64url without padding, as JWS writes it; nil for anything else.
    static func base64URLDecoded(_ text: Substring) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !base64.contains("=") else { return nil }
        switch base64.count % 4 {
        case 2: base64 += "=="
        case 3: base64 += "="
        case 1: return nil
        default: break
        }
        return Data(base64Encoded: base64).map { [UInt8]($0) }
    }
}
