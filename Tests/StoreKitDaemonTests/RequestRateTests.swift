@testable import StoreKitDaemon
import Testing

@Suite("request rate (MaxRequestsPerUIDPerSecond=)")
struct RequestRateTests {
    @Test("a bucket holds a burst of two seconds' worth, then refills at the rate, per uid")
    func bucket() {
        var rates = RequestRateLimit()
        var admitted = 0
        while rates.admit(uid: 7, now: 0, perSecond: 2000) { admitted += 1 }
        #expect(admitted == 4000)
        #expect(rates.available(uid: 7, now: 0, perSecond: 2000) < 1)
        #expect(rates.available(uid: 7, now: 5, perSecond: 2000) == 10)
        #expect(rates.available(uid: 8, now: 0, perSecond: 2000) == 4000)   // another uid is not touched
        #expect(rates.available(uid: 7, now: 10_000, perSecond: 2000) == 4000)   // full again, not beyond
        let unlimited = rates.admit(uid: 7, now: 0, perSecond: 0)
        #expect(unlimited)   // 0: no limit
    }

    @Test("a paced uid is read again once its bucket holds 5 ms of its rate, and at least one request")
    func resumesAfterAQuantum() {
        // The default rate: 10 requests, 5 ms from an empty bucket; less for what is left.
        #expect(RequestRateLimit.resumesAt(left: 0, now: 1000, perSecond: 2000) == 1005)
        #expect(RequestRateLimit.resumesAt(left: 0.5, now: 1000, perSecond: 2000) == 1005)   // 4.75 ms, rounded up
        // Requests decoded and not yet executed count against the bucket (left below zero).
        #expect(RequestRateLimit.resumesAt(left: -3, now: 1000, perSecond: 2000) == 1007)
        // A slow rate resumes at each request, not after a quantum of requests.
        #expect(RequestRateLimit.resumesAt(left: 0, now: 1000, perSecond: 100) == 1010)
        #expect(RequestRateLimit.resumesAt(left: 0, now: 1000, perSecond: 1) == 2000)
        #expect(RequestRateLimit.resumesAt(left: 0.9, now: 1000, perSecond: 1) == 1100)
        // Never the same millisecond: the loop would spin on a uid it cannot read.
        #expect(RequestRateLimit.resumesAt(left: 0.999, now: 1000, perSecond: 1_000_000) == 1005)
        #expect(RequestRateLimit.resumesAt(left: 0.99999, now: 1000, perSecond: 1) == 1001)
    }
}
