// Per-uid rate limits of the serving loop: how often a uid's refusals are written, and how many
// requests per second a uid may send.

/// Repeated warnings about one uid, limited: at most `burst` in a `window` (ms), then one line
/// saying how many were left out. The journal has a rate limit of its own; the console and a
/// file do not, and a hostile client can cause a refusal per frame.
struct WarningRateLimit {
    private struct Window {
        var start: Int64
        var said = 0
        var suppressed = 0
    }

    let burst: Int
    let window: Int64
    private var windows: [UInt32: Window] = [:]

    init(burst: Int = 20, window: Int64 = 10_000) {
        self.burst = burst
        self.window = window
    }

    /// What to do about one more warning concerning `uid` at `now`.
    enum Decision: Equatable {
        /// Say it; `suppressedBefore` warnings were left out in the window that just ended.
        case say(suppressedBefore: Int)
        case suppress
    }

    mutating func admit(uid: UInt32, now: Int64) -> Decision {
        var entry = windows[uid] ?? Window(start: now)
        var suppressedBefore = 0
        if now - entry.start >= window {
            suppressedBefore = entry.suppressed
            entry = Window(start: now)
        }
        defer { windows[uid] = entry }
        guard entry.said < burst else {
            entry.suppressed += 1
            return .suppress
        }
        entry.said += 1
        return .say(suppressedBefore: suppressedBefore)
    }

    /// Windows that ended with warnings left out: (uid, count), and forgets every ended window.
    mutating func expire(now: Int64) -> [(uid: UInt32, suppressed: Int)] {
        var ended: [(UInt32, Int)] = []
        for (uid, entry) in windows where now - entry.start >= window {
            if entry.suppressed > 0 { ended.append((uid, entry.suppressed)) }
            windows[uid] = nil
        }
        return ended
    }
}

/// `MaxRequestsPerUIDPerSecond=`: a token bucket per uid, refilled at the rate and holding at
/// most two seconds' worth, so that a burst is served and a flood is paced: a uid whose bucket is
/// empty is not read (`Server.pace`), and what it had pipelined beyond the bucket is refused.
struct RequestRateLimit {
    private struct Bucket {
        var tokens: Double
        var updated: Int64
    }

    private var buckets: [UInt32: Bucket] = [:]

    /// One request of `uid` at `now` (ms) under `perSecond` (0: no limit): true when allowed.
    mutating func admit(uid: UInt32, now: Int64, perSecond: Int) -> Bool {
        guard perSecond > 0 else { return true }
        var bucket = Bucket(tokens: available(uid: uid, now: now, perSecond: perSecond), updated: now)
        defer { buckets[uid] = bucket }
        guard bucket.tokens >= 1 else { return false }
        bucket.tokens -= 1
        return true
    }

    /// Requests `uid` may send at `now` (whole or not); consumes nothing.
    func available(uid: UInt32, now: Int64, perSecond: Int) -> Double {
        guard perSecond > 0 else { return .infinity }
        guard let bucket = buckets[uid] else { return Double(perSecond) * 2 }
        return min(Double(perSecond) * 2, bucket.tokens + Double(max(now - bucket.updated, 0)) * Double(perSecond) / 1000)
    }

    /// When (ms, after `now`) a bucket holds `requests` more than it holds at `now`.
    static func refilled(_ requests: Double, now: Int64, perSecond: Int) -> Int64 {
        guard perSecond > 0 else { return now }
        return now + max(1, Int64((requests * 1000 / Double(perSecond)).rounded(.up)))
    }

    /// How much of its rate a paced uid's bucket gathers before the uid is read again (ms): its
    /// connections are then read together, into one unit of work, not one request per unit as
    /// each token arrives. At the default rate that is 10 requests every 5 ms instead of one or
    /// two every millisecond: for the same paced flood the daemon made a quarter fewer syncs and
    /// used a sixth less CPU, and a victim's p99 was a quarter lower (docs/performance.md, tenth
    /// session). A slow rate still resumes at each request (1/s: every second).
    static let pacingQuantum = 5

    /// When (ms) a paced uid with `left` requests in its bucket (less than one) is read again:
    /// once the bucket holds `pacingQuantum` ms of the rate, and at least one request.
    static func resumesAt(left: Double, now: Int64, perSecond: Int) -> Int64 {
        let quantum = max(1, Double(perSecond) * Double(pacingQuantum) / 1000)
        return refilled(quantum - left, now: now, perSecond: perSecond)
    }

    /// Forgets uids idle long enough for their bucket to be full again.
    mutating func expire(now: Int64) {
        buckets = buckets.filter { now - $0.value.updated < 2000 }
    }
}
