import Foundation
@testable import StoreKitSigning
import Testing

@Suite("base64url and RFC 3339, written out")
struct EncodingTests {
    @Test("base64url agrees with Foundation's base64 on random input, and only canonical text decodes")
    func base64url() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<200 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let expected = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            let encoded = Base64URL.encode(bytes)
            #expect(encoded == expected)
            #expect(Base64URL.decode(Substring(encoded)) == bytes)
        }
        #expect(Base64URL.decode("QQ==") == nil, "padding")
        #expect(Base64URL.decode("QR") == nil, "bits past the end")
        #expect(Base64URL.decode("Q") == nil, "a length that cannot be")
        #expect(Base64URL.decode("a+b/") == nil, "base64's own alphabet")
        #expect(Base64URL.decode("QQ") == [0x41])
    }

    @Test("RFC 3339 dates round-trip whole seconds and refuse other shapes")
    func rfc3339() {
        for seconds in [0.0, 1_767_225_600, 253_402_300_799, 951_782_400] {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(RFC3339.date(RFC3339.string(date)) == date)
        }
        #expect(RFC3339.string(Date(timeIntervalSince1970: 1_767_225_600.9)) == "2026-01-01T00:00:00Z")
        #expect(RFC3339.date("2026-01-01T00:00:00.000Z") == nil)
        #expect(RFC3339.date("2026-13-01T00:00:00Z") == nil)
        #expect(RFC3339.date("") == nil)
    }
}
