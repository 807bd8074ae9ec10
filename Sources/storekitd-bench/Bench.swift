import Foundation
import StoreKitConnection
import StoreKitPosix
import StoreKitSQLite
import StoreKitWire

/// The measurements, in the order of the benchmark issue, each with its peer where one exists.
final class Bench {
    let quick: Bool
    /// Phases to run (`--only cycles,latency,floods,replay,fanout,startup`); empty: all.
    let only: Set<String>
    let directory: String
    let daemon: BenchDaemon
    let redis: RedisPeer
    let cycleSeconds: Double
    static let appCount = 110
    /// The PostgreSQL phase's rows and notes (its settings, the rate used, or why it was skipped).
    var ledgerFigures: [LedgerFigure] = []
    var ledgerNotes: [String] = []
    /// PostgreSQL's own commit rate beside the ledger's cycles, at 1, 8 and 100 clients.
    var commitRates: [CommitRate] = []

    /// `--noisy-rate N`: the flooding uid's `MaxRequestsPerUIDPerSecond=` in the noisy figure;
    /// empty: the shipped default.
    let noisyRate: String

    init(quick: Bool, only: Set<String> = [], noisyRate: String = "") throws {
        self.quick = quick
        self.only = only
        self.noisyRate = noisyRate
        cycleSeconds = quick ? 1 : 4
        var template = Array(("/tmp/skbench-" + String(repeating: "X", count: 6)).utf8CString)   // mkdtemp template
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw BenchError("mkdtemp failed")
        }
        directory = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        chmod(directory, 0o755)   // the noisy-neighbour flood connects as another uid
        let binary = (CommandLine.arguments[0] as NSString).deletingLastPathComponent + "/storekitd"
        let resolved = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            .map { ($0 as NSString).deletingLastPathComponent + "/storekitd" } ?? binary
        mkdir(directory + "/daemon", 0o755)
        mkdir(directory + "/redis", 0o755)
        daemon = try BenchDaemon(directory: directory + "/daemon", binary: resolved, appCount: Self.appCount)
        redis = try RedisPeer(directory: directory + "/redis")
    }

    func cleanUp() {
        daemon.stop()
        redis.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    func log(_ text: String) {
        say(text)
    }

    /// Whether `phase` runs: all of them, unless `--only` named some.
    func wants(_ phase: String) -> Bool { only.isEmpty || only.contains(phase) }

    func runAll() throws -> [Figure] {
        var figures: [Figure] = []
        log("storekitd-bench: \(ProcessInfo.processInfo.activeProcessorCount) cores, temp dir \(directory)")
        let limits = try measureLimits()
        try daemon.start()
        usleep(300_000)
        let idle = Double(residentBytes(of: daemon.pid)) / 1_048_576

        for (clients, processes) in [(1, 1), (8, 8), (100, 4)] where wants("cycles") {
            log("purchase cycles with \(clients) clients…")
            settleDisk()
            let ours = try cycles(kind: "storekit", socket: daemon.clientSocket, clients: clients, processes: processes, firstApp: 0)
            settleDisk()
            let peer = try cycles(kind: "redis", socket: redis.socketPath, clients: clients, processes: processes, firstApp: clients * 10)
            figures.append(Figure(name: "purchase cycles/s, \(clients) client\(clients == 1 ? "" : "s")", unit: "cycles/s",
                                  value: ours, peer: peer, targetRatio: 1, targetAbsolute: nil, better: .higher))
        }

        if wants("latency") {
            log("latency at 1,000 payments/s…")
            settleDisk()
            let (ours50, ours99) = try storekitLatency(app: BenchDaemon.appID(101))
            settleDisk()
            let (peer50, peer99) = try redisLatency()
            figures.append(Figure(name: "latency p50 at 1,000/s", unit: "ms", value: ours50, peer: peer50,
                                  targetRatio: 1, targetAbsolute: nil, better: .lower))
            figures.append(Figure(name: "latency p99 at 1,000/s", unit: "ms", value: ours99, peer: peer99,
                                  targetRatio: 2, targetAbsolute: nil, better: .lower))
        }

        if wants("postgres") {
            try runPostgres()
        }

        if wants("signing") {
            log("signing: a transaction's JWS and an app receipt…")
            let (jws, receipt, largeReceipt) = try signingCost()
            figures.append(Figure(name: "signing one transaction (ES256 JWS)", unit: "µs", value: jws, peer: nil,
                                  targetRatio: nil, targetAbsolute: nil, better: .lower))
            figures.append(Figure(name: "signing an app receipt of 20 purchases (PKCS#7)", unit: "µs", value: receipt, peer: nil,
                                  targetRatio: nil, targetAbsolute: nil, better: .lower))
            figures.append(Figure(name: "making and signing an app receipt of 5,000 purchases (PKCS#7)", unit: "ms",
                                  value: largeReceipt, peer: nil, targetRatio: nil, targetAbsolute: nil, better: .lower))
        }

        if wants("noisy") {
            // With the shipped limits: the flooding uid is paced at `MaxRequestsPerUIDPerSecond=`'s
            // default, which is what protects the victim; then with the rate limit off, where only
            // the fair share of each unit of work does.
            log("noisy neighbour: a victim's purchases while another uid floods, shipped limits…")
            daemon.stop()
            mkdir(directory + "/daemon-shipped-limits", 0o755)
            let paced = try BenchDaemon(directory: directory + "/daemon-shipped-limits", binary: daemon.binary,
                                        appCount: Self.appCount, dropIn: "[Limits]\nMaxRequestsPerUIDPerSecond=\(noisyRate)\n")
            try paced.start()
            let shipped = try noisyNeighbour(socket: paced.clientSocket)
            paced.stop()
            try daemon.start()
            figures.append(Figure(name: "victim p99, another uid flooding, median of rounds (alone: \(String(format: "%.2f", shipped.1)) ms)", unit: "ms",
                                  value: shipped.3, peer: shipped.1, targetRatio: 2, targetAbsolute: nil, better: .lower))
            figures.append(Figure(name: "victim p50, another uid flooding (alone: \(String(format: "%.2f", shipped.0)) ms)", unit: "ms",
                                  value: shipped.2, peer: shipped.0, targetRatio: nil, targetAbsolute: nil, better: .lower))
            figures.append(Figure(name: "the flooding uid's purchase cycles/s meanwhile (paced)", unit: "cycles/s", value: shipped.4,
                                  peer: nil, targetRatio: nil, targetAbsolute: nil, better: .higher))
            // The same victim and flood on the peer, paced at the rate the daemon let the flood
            // have: what the machine's scheduler and disk do to a victim's p99 by themselves.
            log("noisy neighbour on the peer: a victim's XADDs at 500/s while 100 clients cycle at \(Int(shipped.4))/s…")
            let peerNoisy = try redisNoisyNeighbour(floodRate: shipped.4)
            figures.append(Figure(name: "the peer's victim p99 under the same paced flood (alone: \(String(format: "%.2f", peerNoisy.0)) ms)",
                                  unit: "ms", value: peerNoisy.1, peer: peerNoisy.0, targetRatio: nil, targetAbsolute: nil, better: .lower))
            log("noisy neighbour without a request rate (MaxRequestsPerUIDPerSecond=0)…")
            let unpaced = try noisyNeighbour(socket: daemon.clientSocket)
            figures.append(Figure(name: "victim p99, unpaced flood (alone: \(String(format: "%.2f", unpaced.1)) ms)", unit: "ms",
                                  value: unpaced.3, peer: unpaced.1, targetRatio: nil, targetAbsolute: nil, better: .lower))
            figures.append(Figure(name: "victim p50, unpaced flood (alone: \(String(format: "%.2f", unpaced.0)) ms)", unit: "ms",
                                  value: unpaced.2, peer: unpaced.0, targetRatio: nil, targetAbsolute: nil, better: .lower))
            figures.append(Figure(name: "the unpaced flooding uid's purchase cycles/s", unit: "cycles/s", value: unpaced.4,
                                  peer: nil, targetRatio: nil, targetAbsolute: nil, better: .higher))
        }

        if wants("floods") {
            figures += try runFloods()
        }

        if wants("replay") {
            log("replay of 100,000 unfinished transactions…")
            let replayCount = 100_000
            let oursReplay = try storekitReplay(app: BenchDaemon.appID(102), count: replayCount)
            let peerReplay = try redisReplay(count: replayCount)
            figures.append(Figure(name: "replay 100,000 to a new observer", unit: "s", value: oursReplay, peer: peerReplay,
                                  targetRatio: 0.5, targetAbsolute: nil, better: .lower))
        }

        if wants("fanout") {
            log("fan-out with 10,000 observer connections…")
            let (fanRSS, fanTime) = try fanOut(connections: quick ? 2_000 : 10_000)
            figures.append(Figure(name: "RSS with \(quick ? "2,000" : "10,000") observers held", unit: "MB", value: fanRSS,
                                  peer: nil, targetRatio: nil, targetAbsolute: 150, better: .lower))
            figures.append(Figure(name: "one update to 100 observers", unit: "ms", value: fanTime, peer: nil,
                                  targetRatio: nil, targetAbsolute: nil, better: .lower))
        }

        figures.append(Figure(name: "idle RSS", unit: "MB", value: idle, peer: nil, targetRatio: nil,
                              targetAbsolute: 30, better: .lower))

        daemon.stop()
        if wants("startup") {
            log("start-up with 1,000,000 transactions…")
            let startup = try startupWithMillion(rows: quick ? 100_000 : 1_000_000)
            figures.append(Figure(name: "start-up to READY=1, \(quick ? "100k" : "1M") transactions", unit: "ms",
                                  value: startup, peer: nil, targetRatio: nil, targetAbsolute: 250, better: .lower))
        }

        if wants("downloads") {
            figures += try runDownloads()
        }

        figures.append(Figure(name: "limit: Unix socket round trip", unit: "µs", value: limits.roundTrip, peer: nil,
                              targetRatio: nil, targetAbsolute: nil, better: .lower))
        figures.append(Figure(name: "limit: fdatasync in state dir", unit: "syncs/s", value: limits.syncs, peer: nil,
                              targetRatio: nil, targetAbsolute: nil, better: .higher))
        return figures
    }

    // MARK: 1. Purchase cycles

    /// Before each side's run of a phase: what the previous run left for the kernel to write back
    /// (the daemon's WAL and checkpoints, the peer's AOF) is written now, not during the next
    /// run. Each side used to start right after the other's heavier run, storekitd's always after
    /// the peer's 100-client one.
    func settleDisk() {
        sync()
        usleep(500_000)
    }

    func cycles(kind: String, socket: String, clients: Int, processes: Int, firstApp: Int) throws -> Double {
        let perProcess = clients / processes
        let startAt = monotonicNanoseconds() + 1_500_000_000
        var workers: [(pid: pid_t, output: String)] = []
        let executable = Self.executable
        for process in 0..<processes {
            let output = directory + "/worker-\(kind)-\(clients)-\(process).out"
            let first = kind == "storekit" ? (process * perProcess) % Self.appCount : firstApp + process * perProcess
            let pid = try spawn(executable, [executable, "--worker", kind, "--socket", socket, "--clients", String(perProcess),
                                             "--first", String(first), "--seconds", String(cycleSeconds),
                                             "--start-at", String(startAt)], stdoutPath: output)
            workers.append((pid, output))
        }
        return Double(try cyclesOf(workers, kind: kind)) / cycleSeconds
    }

    /// Waits for worker processes and adds up the purchase cycles each printed.
    func cyclesOf(_ workers: [(pid: pid_t, output: String)], kind: String) throws -> Int {
        var total = 0
        for (pid, output) in workers {
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            guard status == 0, let count = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw BenchError("\(kind) worker failed (status \(status), output '\(text)')")
            }
            total += count
        }
        return total
    }

    /// Sends `count` payments on `connection` from a thread of their own, one every `interval`
    /// ns, starting 50 ms from now; returns when each was sent.
    func sendPacedPayments(on connection: WireConnection, count: Int, interval: UInt64, keyPrefix: String) -> SendTimes {
        let sendTimes = SendTimes(count: count)
        let sender = SendableConnection(connection)
        let start = monotonicNanoseconds() + 50_000_000
        Thread.detachNewThread {
            for index in 0..<count {
                Worker.waitUntil(start + UInt64(index) * interval)
                sendTimes.set(index, monotonicNanoseconds())
                try? sender.connection.send(.addPayment(.init(requestID: UInt32(index + 2), key: "\(keyPrefix)-\(index)",
                                                                productID: "bench.coins", quantity: 1)))
            }
        }
        return sendTimes
    }

    // MARK: 2. Latency at a steady rate

    static func percentiles(_ samples: [Double]) -> (Double, Double) {
        let sorted = samples.sorted()
        guard !sorted.isEmpty else { return (0, 0) }
        return (sorted[sorted.count / 2], sorted[min(sorted.count - 1, Int(Double(sorted.count) * 0.99))])
    }

    /// Payments at a steady rate (one every `interval` ns), each timed from send to its
    /// `purchased` push; p50 and p99 in ms.
    func storekitLatency(app: String, count requested: Int? = nil, interval: UInt64 = 1_000_000, keyPrefix: String = "lat") throws -> (Double, Double) {
        Self.percentiles(try storekitLatencySamples(socket: daemon.clientSocket, app: app, count: requested ?? (quick ? 1_000 : 5_000),
                                                    interval: interval, keyPrefix: keyPrefix))
    }

    /// The latency figure's samples (ms) in the order the payments were sent, against the daemon
    /// listening on `socket`.
    func storekitLatencySamples(socket: String, app: String, count: Int, interval: UInt64, keyPrefix: String) throws -> [Double] {
        let connection = try WireConnection(path: socket)
        _ = try connection.hello(app: app)
        try connection.send(.subscribe(requestID: 1))
        _ = try connection.awaitResult(1)
        let sendTimes = sendPacedPayments(on: connection, count: count, interval: interval, keyPrefix: keyPrefix)
        // One connection keeps order: the n-th purchased push answers the n-th payment. Like the
        // peer's consumer (one XREADGROUP for all that is pending, one timestamp, one XACK), the
        // observer takes what has arrived, times it at once, then finishes those transactions
        // and waits for the answers, as an app does after unlocking the content. Finishing goes
        // over a second connection of the app: the first one's sends belong to the sender thread.
        let finisher = try WireConnection(path: socket)
        _ = try finisher.hello(app: app)
        var samples: [Double] = []
        samples.reserveCapacity(count)
        var finishID: UInt32 = 0
        while samples.count < count {
            var purchased: [UInt64] = []
            repeat {
                if case .updated(let records) = try connection.receive() {
                    purchased += records.filter { $0.state == .purchased }.map(\.id)
                }
            } while connection.hasBufferedMessage || Self.readable(connection.fd)
            let now = monotonicNanoseconds()
            for _ in purchased { samples.append(Double(now - sendTimes.get(samples.count)) / 1e6) }
            let first = finishID + 1
            for id in purchased {
                finishID += 1
                try finisher.send(.finish(requestID: finishID, transactionID: id))
            }
            for requestID in first..<(finishID + 1) { _ = try finisher.awaitResult(requestID) }
        }
        return samples
    }

    // MARK: Noisy neighbour

    /// The victim (this process's uid) buys at 500/s, timed as in the latency figure, first
    /// alone, then while 100 clients of another uid (nobody, 65534) run purchase cycles as fast
    /// as they can. Returns the victim's p50 and p99 alone and flooded, and the flood's rate.
    /// The noisy-neighbour figure on the daemon at `socket`: rounds of the victim alone, then
    /// flooded; the medians over the rounds (p50 alone, p99 alone, p50 flooded, p99 flooded, the
    /// flood's cycles/s). One short run's p99 swings with the disk's stalls, alone as much as
    /// flooded, so each round is logged and the figure is the median of three.
    func noisyNeighbour(socket: String) throws -> (Double, Double, Double, Double, Double) {
        let rounds = quick ? 1 : 3
        var results: [(Double, Double, Double, Double, Double)] = []
        for round in 1...rounds {
            let result = try noisyRound(socket: socket, round: round)
            log(String(format: "  round %d: alone p50 %.2f p99 %.2f ms; flooded p50 %.2f p99 %.2f ms (%.2f×); the flood %.0f cycles/s",
                       round, result.0, result.1, result.2, result.3, result.3 / result.1, result.4))
            results.append(result)
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        return (median(results.map(\.0)), median(results.map(\.1)), median(results.map(\.2)), median(results.map(\.3)),
                median(results.map(\.4)))
    }

    func noisyRound(socket: String, round: Int) throws -> (Double, Double, Double, Double, Double) {
        let victims = quick ? 500 : 2_500
        settleDisk()
        let (alone50, alone99) = try victimLatency(socket: socket, app: BenchDaemon.appID(104), count: victims, keyPrefix: "alone-\(round)")
        settleDisk()
        // The flood starts 1.5 s after it is spawned and outlasts the victim's run.
        let seconds = Double(victims) / 500 + 2
        let startAt = monotonicNanoseconds() + 1_500_000_000
        let executable = Self.executable
        var workers: [(pid: pid_t, output: String)] = []
        for process in 0..<4 {
            let output = directory + "/worker-flood-\(process).out"
            let pid = try spawn("/usr/bin/setpriv", ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", executable,
                                                     "--worker", "storekit", "--socket", socket, "--clients", "25",
                                                     "--first", String(process * 25), "--seconds", String(seconds),
                                                     "--start-at", String(startAt)], stdoutPath: output)
            workers.append((pid, output))
        }
        Worker.waitUntil(startAt + 500_000_000)
        let (flooded50, flooded99) = try victimLatency(socket: socket, app: BenchDaemon.appID(105), count: victims,
                                                       keyPrefix: "flooded-\(round)")
        return (alone50, alone99, flooded50, flooded99, Double(try cyclesOf(workers, kind: "flood")) / seconds)
    }

    /// The noisy-neighbour rounds on the peer: its victim (XADDs at 500/s, timed to their
    /// arrival at a consumer, as in its latency figure) alone, then while 100 clients run
    /// XADD → XREADGROUP → XACK cycles at `floodRate` cycles/s in all. Medians over the rounds of
    /// the p99 alone and flooded (ms).
    func redisNoisyNeighbour(floodRate: Double) throws -> (Double, Double) {
        let rounds = quick ? 1 : 3
        let victims = quick ? 500 : 2_500
        let clients = 100
        let interval = UInt64(Double(clients) / max(floodRate, 1) * 1e9)
        var results: [(Double, Double)] = []
        for round in 1...rounds {
            settleDisk()
            let alone = try redisLatency(stream: "victim-alone-\(round)", interval: 2_000_000, count: victims).1
            settleDisk()
            let seconds = Double(victims) / 500 + 2
            let startAt = monotonicNanoseconds() + 1_500_000_000
            var workers: [(pid: pid_t, output: String)] = []
            for process in 0..<4 {
                let output = directory + "/worker-peer-flood-\(process).out"
                let pid = try spawn(Self.executable, [Self.executable, "--worker", "redis", "--socket", redis.socketPath,
                                                      "--clients", String(clients / 4), "--first", String(1000 + process * 25),
                                                      "--seconds", String(seconds), "--start-at", String(startAt),
                                                      "--interval-ns", String(interval)], stdoutPath: output)
                workers.append((pid, output))
            }
            Worker.waitUntil(startAt + 500_000_000)
            let flooded = try redisLatency(stream: "victim-flooded-\(round)", interval: 2_000_000, count: victims).1
            let rate = Double(try cyclesOf(workers, kind: "peer flood")) / seconds
            log(String(format: "  round %d: alone p99 %.2f ms; flooded p99 %.2f ms (%.2f×); the flood %.0f cycles/s",
                       round, alone, flooded, flooded / alone, rate))
            results.append((alone, flooded))
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        return (median(results.map(\.0)), median(results.map(\.1)))
    }

    static var executable: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// The victim of the noisy-neighbour figure: payments at 500/s on one connection, each timed
    /// from its send to the arrival of its `purchased` push. Unlike the latency figure's reader,
    /// which finishes what it received before it reads on, the victim finishes on another thread
    /// and connection, so the wait for a finish never delays the timing of the next push.
    func victimLatency(socket: String, app: String, count: Int, keyPrefix: String) throws -> (Double, Double) {
        let connection = try WireConnection(path: socket)
        _ = try connection.hello(app: app)
        try connection.send(.subscribe(requestID: 1))
        _ = try connection.awaitResult(1)
        let finisher = try WireConnection(path: socket)
        _ = try finisher.hello(app: app)
        let toFinish = FinishQueue()
        let finishing = SendableConnection(finisher)
        Thread.detachNewThread {
            var requestID: UInt32 = 0
            while let id = toFinish.take() {
                requestID += 1
                guard (try? finishing.connection.send(.finish(requestID: requestID, transactionID: id))) != nil,
                      (try? finishing.connection.awaitResult(requestID)) != nil else { break }
            }
        }
        defer { toFinish.close() }
        let sendTimes = sendPacedPayments(on: connection, count: count, interval: 2_000_000, keyPrefix: keyPrefix)
        var samples: [Double] = []
        samples.reserveCapacity(count)
        while samples.count < count {
            guard case .updated(let records) = try connection.receive() else { continue }
            let now = monotonicNanoseconds()
            for record in records where record.state == .purchased {
                samples.append(Double(now - sendTimes.get(samples.count)) / 1e6)
                toFinish.put(record.id)
            }
        }
        return Self.percentiles(samples)
    }

    /// Whether bytes wait on `fd` (poll without waiting).
    static func readable(_ fd: Int32) -> Bool {
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&ready, 1, 0) > 0
    }

    /// The peer's latency figure: entries added one every `interval` ns to `stream`, each timed
    /// from its XADD to its arrival at the consumer; p50 and p99 in ms.
    func redisLatency(stream: String = "latency", interval: UInt64 = 1_000_000, count requested: Int? = nil) throws -> (Double, Double) {
        let producer = try RESPClient(path: redis.socketPath)
        let consumer = try RESPClient(path: redis.socketPath)
        _ = try? producer.command(["XGROUP", "CREATE", stream, "g", "$", "MKSTREAM"])
        let count = requested ?? (quick ? 1_000 : 5_000)
        let start = monotonicNanoseconds() + 50_000_000
        let box = SendableRedis(producer)
        Thread.detachNewThread {
            for index in 0..<count {
                Worker.waitUntil(start + UInt64(index) * interval)
                _ = try? box.client.command(["XADD", stream, "*", "sent", String(monotonicNanoseconds())])
            }
        }
        var samples: [Double] = []
        while samples.count < count {
            let reply = try consumer.command(["XREADGROUP", "GROUP", "g", "c", "COUNT", "100", "BLOCK", "0", "STREAMS", stream, ">"])
            let now = monotonicNanoseconds()
            guard case .array(let streams?) = reply, case .array(let pair?) = streams.first, pair.count == 2,
                  case .array(let entries?) = pair[1] else { continue }
            var ids: [String] = []
            for case .array(let entry?) in entries {
                guard entry.count == 2, let id = entry[0].string, case .array(let fields?) = entry[1], fields.count == 2,
                      let sent = fields[1].string.flatMap(UInt64.init) else { continue }
                ids.append(id)
                samples.append(Double(now - sent) / 1e6)
            }
            _ = try consumer.command(["XACK", stream, "g"] + ids)
        }
        return Self.percentiles(samples)
    }

    // MARK: 3. Replay

    func storekitReplay(app: String, count: Int) throws -> Double {
        let filler = try WireConnection(path: daemon.clientSocket)
        _ = try filler.hello(app: app)
        let chunk = 2_000
        var sent = 0
        while sent < count {
            var bytes: [UInt8] = []
            for index in sent..<min(sent + chunk, count) {
                Frame.append(body: ClientMessage.addPayment(.init(requestID: UInt32(index + 1), key: "replay-\(index)",
                                                                   productID: "bench.coins", quantity: 1)).encode(), to: &bytes)
            }
            try filler.sendRaw(bytes)
            let last = min(sent + chunk, count)
            _ = try filler.awaitResult(UInt32(last))
            sent = last
        }
        let observer = try WireConnection(path: daemon.clientSocket)
        _ = try observer.hello(app: app)
        let start = monotonicNanoseconds()
        try observer.send(.subscribe(requestID: 1))
        var received = 0
        while true {
            let message = try observer.receive()
            if case .updated(let records) = message { received += records.count }
            if case .result(1, _, _, _, _) = message { break }
        }
        let elapsed = Double(monotonicNanoseconds() - start) / 1e9
        guard received == count else { throw BenchError("replay delivered \(received) of \(count)") }
        return elapsed
    }

    func redisReplay(count: Int) throws -> Double {
        let client = try RESPClient(path: redis.socketPath)
        var sent = 0
        while sent < count {
            let batch = min(2_000, count - sent)
            try client.sendPipelined(Array(repeating: ["XADD", "replay", "*", "product", "bench.coins", "quantity", "1"], count: batch))
            for _ in 0..<batch { _ = try client.read() }
            sent += batch
        }
        _ = try client.command(["XGROUP", "CREATE", "replay", "g", "0"])
        // Deliver once without acknowledging: all entries become pending, as unfinished transactions are.
        _ = try client.command(["XREADGROUP", "GROUP", "g", "c", "COUNT", String(count), "STREAMS", "replay", ">"])
        let start = monotonicNanoseconds()
        let reply = try client.command(["XREADGROUP", "GROUP", "g", "c", "COUNT", String(count), "STREAMS", "replay", "0"])
        let elapsed = Double(monotonicNanoseconds() - start) / 1e9
        guard case .array(let streams?) = reply, case .array(let pair?) = streams.first, pair.count == 2,
              case .array(let entries?) = pair[1], entries.count == count else {
            throw BenchError("redis replay did not return \(count) entries")
        }
        return elapsed
    }

    // MARK: 4. Fan-out

    func fanOut(connections: Int) throws -> (Double, Double) {
        var held: [WireConnection] = []
        held.reserveCapacity(connections)
        let apps = 100
        for index in 0..<connections {
            let connection = try WireConnection(path: daemon.clientSocket)
            _ = try connection.hello(app: BenchDaemon.appID(index % apps))
            try connection.send(.subscribe(requestID: 1))
            held.append(connection)
        }
        for connection in held { _ = try connection.awaitResult(1) }
        usleep(200_000)
        let rss = Double(residentBytes(of: daemon.pid)) / 1_048_576
        // The observers of one (uid, app): every 100th connection; an update made by the control plane.
        let target = 7
        let observers = held.enumerated().filter { $0.offset % apps == target }.map(\.element).prefix(100)
        let control = try WireConnection(path: daemon.controlSocket)
        _ = try control.hello(app: "")
        let start = monotonicNanoseconds()
        try control.send(.control(requestID: 1, command: "buy", arguments: ["app=\(BenchDaemon.appID(target))", "product=bench.coins", "uid=\(getuid())"]))
        for observer in observers {
            var done = false
            while !done {
                if case .updated(let records) = try observer.receive(), records.contains(where: { $0.state == .purchased }) {
                    done = true
                }
            }
        }
        let elapsed = Double(monotonicNanoseconds() - start) / 1e6
        for connection in held { connection.close() }
        return (rss, elapsed)
    }

    // MARK: 5. Start-up

    /// Writes `rows` transactions of 100 apps and 50 users (one in ten unfinished) with the
    /// daemon stopped, in units of work of 10,000, and checkpoints them into the database file.
    func populate(rows: Int) throws {
        let store = try SQLiteLedger(path: daemon.databasePath)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        var index = 0
        while index < rows {
            try store.begin()
            for _ in 0..<min(10_000, rows - index) {
                let record = TransactionRecord(
                    id: store.allocateTransactionID(), uid: 1000 + UInt32(index % 50), app: BenchDaemon.appID(index % 100),
                    productID: "bench.coins", quantity: 1, state: .purchased, sequence: UInt64(index + 1), date: now,
                    finished: index % 10 != 0)
                try store.insert(record)
                index += 1
            }
            try store.commit()
            try store.checkpoint()
        }
        try store.database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }

    func startupWithMillion(rows: Int) throws -> Double {
        log("  writing \(rows) transactions…")
        try populate(rows: rows)
        var best = Double.infinity
        for _ in 0..<3 {
            let elapsed = try daemon.start()
            best = min(best, elapsed)
            daemon.stop()
        }
        return best
    }

    // MARK: 7. Limits

    func measureLimits() throws -> (roundTrip: Double, syncs: Double) {
        var pair: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else { throw BenchError("socketpair failed") }
        let echo = pair[1]
        Thread.detachNewThread {
            var byte: UInt8 = 0
            while read(echo, &byte, 1) == 1 { _ = write(echo, &byte, 1) }
        }
        let rounds = 20_000
        var byte: UInt8 = 1
        let start = monotonicNanoseconds()
        for _ in 0..<rounds {
            _ = write(pair[0], &byte, 1)
            _ = read(pair[0], &byte, 1)
        }
        let roundTrip = Double(monotonicNanoseconds() - start) / Double(rounds) / 1000
        close(pair[0])

        let path = daemon.directory + "/state/fdatasync-probe"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer {
            close(fd)
            unlink(path)
        }
        var block = [UInt8](repeating: 7, count: 512)
        let syncStart = monotonicNanoseconds()
        var syncs = 0
        while monotonicNanoseconds() - syncStart < 1_000_000_000 {
            _ = pwrite(fd, &block, block.count, off_t(syncs % 64 * 512))
            fdatasync(fd)
            syncs += 1
        }
        return (roundTrip, Double(syncs) / (Double(monotonicNanoseconds() - syncStart) / 1e9))
    }
}

/// Send timestamps shared between the pacing thread and the reader.
final class SendTimes: @unchecked Sendable {
    private var times: [UInt64]
    private let lock = NSLock()
    init(count: Int) { times = Array(repeating: 0, count: count) }
    func set(_ index: Int, _ value: UInt64) { lock.lock(); times[index] = value; lock.unlock() }
    func get(_ index: Int) -> UInt64 { lock.lock(); defer { lock.unlock() }; return times[index] }
}

/// Transaction ids handed from the victim's reader to its finisher thread.
final class FinishQueue: @unchecked Sendable {
    private var ids: [UInt64] = []
    private var closed = false
    private let condition = NSCondition()

    func put(_ id: UInt64) {
        condition.lock()
        ids.append(id)
        condition.signal()
        condition.unlock()
    }

    /// The next id, waiting for one; nil once closed.
    func take() -> UInt64? {
        condition.lock()
        defer { condition.unlock() }
        while ids.isEmpty && !closed { condition.wait() }
        return ids.isEmpty ? nil : ids.removeFirst()
    }

    func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }
}

/// A connection written by one thread while another reads (send touches only the fd).
struct SendableConnection: @unchecked Sendable {
    let connection: WireConnection
    init(_ connection: WireConnection) { self.connection = connection }
}

struct SendableRedis: @unchecked Sendable {
    let client: RESPClient
    init(_ client: RESPClient) { self.client = client }
}
