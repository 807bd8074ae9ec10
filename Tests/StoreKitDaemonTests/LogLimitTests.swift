@testable import StoreKitDaemon
import Testing

@Suite("log limits")
struct LogLimitTests {
    @Test("sanitizing: control characters escaped, text cut at the limit with the rest counted")
    func sanitized() {
        #expect(Logger.sanitized("plain text ☕️", limit: 100) == "plain text ☕️")
        #expect(Logger.sanitized("a\nb\tc\u{0}d\u{7f}", limit: 100) == "a\\nb\\tc\\x00d\\x7f")
        #expect(Logger.sanitized("line\u{2028}sep\u{85}", limit: 100) == "line\\u{2028}sep\\u{85}")
        #expect(Logger.sanitized(String(repeating: "x", count: 50), limit: 10) == "xxxxxxxxxx…[40 more bytes]")
        #expect(Logger.sanitized("é" + String(repeating: "x", count: 20), limit: 5) == "éxxx…[17 more bytes]")
    }

    @Test("a uid's warnings: a burst per window, then left out and counted, per uid")
    func rateLimit() {
        var limit = WarningRateLimit(burst: 3, window: 1000)
        for _ in 0..<3 { #expect(limit.admit(uid: 7, now: 0) == .say(suppressedBefore: 0)) }
        #expect(limit.admit(uid: 7, now: 10) == .suppress)
        #expect(limit.admit(uid: 7, now: 20) == .suppress)
        // Another uid is not held back by the first.
        #expect(limit.admit(uid: 8, now: 20) == .say(suppressedBefore: 0))
        // The next window says how many were left out in the last.
        #expect(limit.admit(uid: 7, now: 1000) == .say(suppressedBefore: 2))
        #expect(limit.expire(now: 5000).isEmpty)
        for _ in 0..<5 { _ = limit.admit(uid: 9, now: 6000) }
        let ended = limit.expire(now: 7000)
        #expect(ended.count == 1 && ended[0].uid == 9 && ended[0].suppressed == 2)
    }
}
