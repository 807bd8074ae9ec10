import Foundation
import StoreKitConnection
import StoreKitWire

// Flood kinds (`--only floods`, issue 33): the noisy phase's victim, alone and while another uid
// (nobody, 65534) floods requests whose cost grows with its queue rather than purchases: history
// pages of 5,000 finished purchases, then receipts of 5,000 unfinished consumables, 16 requests
// in flight on one connection, as fast as they are answered. The paced purchase flood is the
// noisy phase's. The daemon is the bench's own, request rate off (MaxRequestsPerUIDPerSecond=0):
// nothing paces the flood, and what stands between it and the victim is a unit of work's share,
// where a history page costs half of it and a receipt all of it. Besides its purchases, the
// victim pings on a connection of its own, one ping after another 2 ms apart, during both runs:
// a ping is answered as soon as it is read, so its round trip is the wait for the serving loop
// alone, with no unit of work or disk in it.
extension Bench {
    enum FloodKind: String, CaseIterable {
        case history
        case receipt

        /// The flooding uid's app: a queue of its own for each kind.
        var app: String { BenchDaemon.appID(self == .history ? 100 : 101) }
        var requests: String { self == .history ? "history pages" : "receipts" }
    }

    static let flooderUID = "65534"
    static let floodInFlight = 16
    static let floodQueueSize = 5_000
    /// The receipt flood buys once per this many receipts answered, so that receipts are made
    /// again (a kept receipt of an unchanged queue is only copied out).
    static let purchaseEveryReceipts = 16
    /// Issue 33's bound on another uid's ping p99 under a flood (`SharingTests` holds the debug
    /// build to it too).
    static let pingBound = 50.0

    /// One round: the victim's purchase p50 and p99 and ping p99 alone, the same flooded (ms),
    /// and the flood's requests and purchases per second.
    struct FloodRound {
        var alone50, alone99, pingAlone99: Double
        var flooded50, flooded99, pingFlooded99: Double
        var served, purchases: Double
        /// What the flood's answers brought, MB/s (transactions' encoded size, or receipts').
        var megabytes: Double
    }

    func runFloods() throws -> [Figure] {
        var figures: [Figure] = []
        // Other work on the machine makes every tail longer: said with the figures.
        log("flood kinds: load average (1 min) \(Self.loadAverage())")
        defer { log("flood kinds: load average (1 min) at the end \(Self.loadAverage())") }
        for kind in FloodKind.allCases {
            log("flood kinds: another uid's queue of \(Self.floodQueueSize) \(kind == .history ? "finished" : "unfinished") purchases…")
            let started = monotonicNanoseconds()
            let held = try holdForFlood(kind)
            log(String(format: "  %d purchases held in %.1f s", held, Double(monotonicNanoseconds() - started) / 1e9))
            log("flood kinds: a victim's purchases and pings while another uid floods \(kind.requests), \(Self.floodInFlight) in flight…")
            let rounds = quick ? 1 : 3
            var results: [FloodRound] = []
            for round in 1...rounds {
                let result = try floodRound(kind, round: round)
                log(String(format: "  round %d: alone p50 %.2f p99 %.2f ms, ping p99 %.2f ms; flooded p50 %.2f p99 %.2f ms (%.2f×), "
                           + "ping p99 %.2f ms (%.2f×); the flood %.0f \(kind.requests)/s", round, result.alone50, result.alone99,
                           result.pingAlone99, result.flooded50, result.flooded99, result.flooded99 / result.alone99,
                           result.pingFlooded99, result.pingFlooded99 / result.pingAlone99, result.served)
                    + String(format: " (%.0f MB/s)", result.megabytes)
                    + (kind == .receipt ? String(format: ", %.1f purchases/s", result.purchases) : ""))
                results.append(result)
            }
            func median(_ value: (FloodRound) -> Double) -> Double { results.map(value).sorted()[results.count / 2] }
            let alone50 = median(\.alone50), alone99 = median(\.alone99), pingAlone99 = median(\.pingAlone99)
            let flood = kind == .history ? "history flood" : "receipt flood"
            figures.append(Figure(name: "victim p99, another uid flooding \(kind.requests), median of rounds (alone: \(String(format: "%.2f", alone99)) ms)",
                                  unit: "ms", value: median(\.flooded99), peer: alone99, targetRatio: 2, targetAbsolute: nil, better: .lower))
            figures.append(Figure(name: "victim p50, \(flood) (alone: \(String(format: "%.2f", alone50)) ms)", unit: "ms",
                                  value: median(\.flooded50), peer: alone50, targetRatio: nil, targetAbsolute: nil, better: .lower))
            figures.append(Figure(name: "victim ping p99, \(flood) (alone: \(String(format: "%.2f", pingAlone99)) ms)", unit: "ms",
                                  value: median(\.pingFlooded99), peer: pingAlone99, targetRatio: nil, targetAbsolute: Self.pingBound,
                                  better: .lower))
            let meanwhile = kind == .history
                ? "the flooding uid's history pages/s meanwhile (\(Self.floodInFlight) in flight)"
                : "the flooding uid's receipts/s meanwhile (\(Self.floodInFlight) in flight, a purchase every \(Self.purchaseEveryReceipts))"
            figures.append(Figure(name: meanwhile, unit: "req/s", value: median(\.served), peer: nil, targetRatio: nil,
                                  targetAbsolute: nil, better: .higher))
        }
        return figures
    }

    /// Fills the flooding uid's queue of `kind`'s app through the client socket, as that uid:
    /// 5,000 purchases, finished for the history flood (a history is mostly finished
    /// transactions), left unfinished for the receipt flood (a consumable is in the receipt until
    /// it is finished). Returns how many were bought.
    func holdForFlood(_ kind: FloodKind) throws -> Int {
        let output = directory + "/worker-hold-\(kind.rawValue).out"
        let pid = try spawn("/usr/bin/setpriv", ["setpriv", "--reuid=\(Self.flooderUID)", "--regid=\(Self.flooderUID)", "--clear-groups",
                                                 Self.executable, "--worker", "hold", "--socket", daemon.clientSocket,
                                                 "--app", kind.app, "--count", String(Self.floodQueueSize),
                                                 "--finish", kind == .history ? "yes" : "no"], stdoutPath: output)
        let counts = try floodWorkerCounts(pid: pid, output: output, kind: "hold")
        guard counts.first == Self.floodQueueSize else { throw BenchError("the hold worker bought \(counts) of \(Self.floodQueueSize)") }
        return counts[0]
    }

    /// The victim alone, then flooded, as in `noisyRound`: the flood starts 1.5 s after it is
    /// spawned, the victim half a second later, and the flood outlasts the victim's run. The
    /// victim buys in one app alone and in another flooded, so that both grow alike over rounds.
    func floodRound(_ kind: FloodKind, round: Int) throws -> FloodRound {
        let victims = quick ? 500 : 2_500
        settleDisk()
        let alone = try victimWithPings(app: BenchDaemon.appID(107), count: victims, keyPrefix: "\(kind.rawValue)-alone-\(round)")
        settleDisk()
        let seconds = Double(victims) / 500 + 2
        let startAt = monotonicNanoseconds() + 1_500_000_000
        let output = directory + "/worker-\(kind.rawValue)-flood.out"
        let pid = try spawn("/usr/bin/setpriv", ["setpriv", "--reuid=\(Self.flooderUID)", "--regid=\(Self.flooderUID)", "--clear-groups",
                                                 Self.executable, "--worker", kind.rawValue, "--socket", daemon.clientSocket,
                                                 "--app", kind.app, "--seconds", String(seconds), "--start-at", String(startAt),
                                                 "--in-flight", String(Self.floodInFlight),
                                                 "--purchase-every", String(kind == .receipt ? Self.purchaseEveryReceipts : 0)],
                            stdoutPath: output)
        Worker.waitUntil(startAt + 500_000_000)
        let flooded = try victimWithPings(app: BenchDaemon.appID(108), count: victims, keyPrefix: "\(kind.rawValue)-flooded-\(round)")
        let counts = try floodWorkerCounts(pid: pid, output: output, kind: kind.rawValue)
        guard counts.count == 3 else { throw BenchError("the \(kind.rawValue) flood printed \(counts)") }
        return FloodRound(alone50: alone.0, alone99: alone.1, pingAlone99: alone.2, flooded50: flooded.0, flooded99: flooded.1,
                          pingFlooded99: flooded.2, served: Double(counts[0]) / seconds, purchases: Double(counts[2]) / seconds,
                          megabytes: Double(counts[1]) / seconds / 1_048_576)
    }

    /// Waits for a flood worker and reads the numbers it printed.
    func floodWorkerCounts(pid: pid_t, output: String, kind: String) throws -> [Int] {
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        let counts = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard status == 0, !counts.isEmpty else { throw BenchError("\(kind) worker failed (status \(status), output '\(text)')") }
        return counts
    }

    /// `victimLatency` on the bench's daemon while a thread of this process pings on a
    /// connection of its own, one ping after another 2 ms apart, until the victim is done.
    /// Returns the purchases' p50 and p99 and the pings' p99 (ms).
    func victimWithPings(app: String, count: Int, keyPrefix: String) throws -> (Double, Double, Double) {
        let connection = try WireConnection(path: daemon.clientSocket)
        _ = try connection.hello(app: app)
        let pinger = SendableConnection(connection)
        let pings = PingSamples()
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            defer { done.signal() }
            var requestID: UInt32 = 0
            while !pings.stopped {
                requestID += 1
                let start = monotonicNanoseconds()
                guard (try? pinger.connection.send(.ping(requestID: requestID))) != nil,
                      (try? pinger.connection.awaitResult(requestID)) != nil else { return }
                pings.append(Double(monotonicNanoseconds() - start) / 1e6)
                usleep(2_000)
            }
        }
        let purchases = Result { try victimLatency(socket: daemon.clientSocket, app: app, count: count, keyPrefix: keyPrefix) }
        pings.stop()
        done.wait()
        connection.close()
        let (p50, p99) = try purchases.get()
        return (p50, p99, Self.percentiles(pings.samples).1)
    }
}

/// Ping round trips (ms) taken by the pinging thread, read by the bench when it stopped.
final class PingSamples: @unchecked Sendable {
    private var values: [Double] = []
    private var done = false
    private let lock = NSLock()

    func append(_ value: Double) { lock.lock(); values.append(value); lock.unlock() }
    var samples: [Double] { lock.lock(); defer { lock.unlock() }; return values }
    var stopped: Bool { lock.lock(); defer { lock.unlock() }; return done }
    func stop() { lock.lock(); done = true; lock.unlock() }
}
