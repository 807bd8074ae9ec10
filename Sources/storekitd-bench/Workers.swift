import Foundation
import StoreKitConnection
import StoreKitWire
import Synchronization

/// A worker process runs `clients` connections, one thread each, doing purchase cycles (storekitd)
/// or XADD → XREADGROUP → XACK loops (the Redis peer) from `startAt` for `seconds`, then prints
/// the number of completed cycles. Separate processes keep the clients really concurrent.
enum Worker {
    static func main(_ arguments: [String]) -> Int32 {
        var options: [String: String] = [:]
        var index = 0
        while index + 1 < arguments.count {
            options[arguments[index]] = arguments[index + 1]
            index += 2
        }
        if let kind = options["--worker"], FloodWorker.kinds.contains(kind) {
            return FloodWorker.main(kind: kind, options: options)
        }
        guard let kind = options["--worker"], let socket = options["--socket"],
              let clients = Int(options["--clients"] ?? ""), let first = Int(options["--first"] ?? ""),
              let seconds = Double(options["--seconds"] ?? ""), let startAt = UInt64(options["--start-at"] ?? "") else {
            FileHandle.standardError.write(Data("storekitd-bench: bad worker arguments\n".utf8))
            return 64
        }
        // `--interval-ns N`: each client starts a cycle at most every N ns (a paced flood).
        let interval = UInt64(options["--interval-ns"] ?? "") ?? 0
        let total = Atomic<Int>(0)
        let failures = Atomic<Int>(0)
        let group = DispatchGroup()
        for client in 0..<clients {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                do {
                    let count = try kind == "storekit"
                        ? storekitCycles(socket: socket, app: BenchDaemon.appID(first + client), startAt: startAt, seconds: seconds)
                        : redisCycles(socket: socket, stream: "s\(first + client)",
                                      startAt: startAt + interval * UInt64(client) / UInt64(clients), seconds: seconds, interval: interval)
                    total.add(count, ordering: .relaxed)
                } catch {
                    failures.add(1, ordering: .relaxed)
                    FileHandle.standardError.write(Data("storekitd-bench worker: \(error)\n".utf8))
                }
            }
        }
        group.wait()
        print(total.load(ordering: .relaxed))
        return failures.load(ordering: .relaxed) == 0 ? 0 : 1
    }

    static func waitUntil(_ time: UInt64) {
        let now = monotonicNanoseconds()
        if time > now { usleep(UInt32((time - now) / 1000)) }
    }

    /// add payment → purchased → finish → removed, as many times as fit.
    static func storekitCycles(socket: String, app: String, startAt: UInt64, seconds: Double) throws -> Int {
        let connection = try WireConnection(path: socket)
        _ = try connection.hello(app: app)
        try connection.send(.subscribe(requestID: 1))
        _ = try connection.awaitResult(1)
        waitUntil(startAt)
        let deadline = startAt + UInt64(seconds * 1e9)
        var requestID: UInt32 = 2
        var cycles = 0
        let prefix = "\(getpid())-\(app)-"
        while monotonicNanoseconds() < deadline {
            // A request refused at the uid's rate (`rateLimited`) is sent again at once, as a
            // flood would: the daemon paces the uid instead of spending its time on refusals.
            let key = prefix + String(requestID)
            var purchased: UInt64 = 0
            var acknowledged = false
            try connection.send(.addPayment(.init(requestID: requestID, key: key, productID: "bench.coins", quantity: 1)))
            while purchased == 0 || !acknowledged {
                switch try connection.receive() {
                case .updated(let records):
                    if let record = records.first(where: { $0.state == .purchased }) { purchased = record.id }
                case .result(let id, let code, _, _, let message) where id == requestID:
                    if code == .rateLimited {
                        try connection.send(.addPayment(.init(requestID: requestID, key: key, productID: "bench.coins", quantity: 1)))
                    } else if code == .ok {
                        acknowledged = true
                    } else {
                        throw BenchError("payment refused: \(code.name) \(message)")
                    }
                default:
                    break
                }
            }
            try connection.send(.finish(requestID: requestID + 1, transactionID: purchased))
            var removed = false
            acknowledged = false
            while !removed || !acknowledged {
                switch try connection.receive() {
                case .removed(let records):
                    if records.contains(where: { $0.id == purchased }) { removed = true }
                case .result(let id, let code, _, _, let message) where id == requestID + 1:
                    if code == .rateLimited {
                        try connection.send(.finish(requestID: requestID + 1, transactionID: purchased))
                    } else if code == .ok {
                        acknowledged = true
                    } else {
                        throw BenchError("finish refused: \(code.name) \(message)")
                    }
                default:
                    break
                }
            }
            requestID += 2
            cycles += 1
        }
        return cycles
    }

    /// XADD one entry → XREADGROUP BLOCK until it arrives → XACK, on the client's own stream;
    /// with an `interval` (ns), one cycle at most every interval.
    static func redisCycles(socket: String, stream: String, startAt: UInt64, seconds: Double, interval: UInt64 = 0) throws -> Int {
        let redis = try RESPClient(path: socket)
        _ = try? redis.command(["XGROUP", "CREATE", stream, "g", "$", "MKSTREAM"])
        waitUntil(startAt)
        let deadline = startAt + UInt64(seconds * 1e9)
        var cycles = 0
        while monotonicNanoseconds() < deadline {
            if interval > 0 { waitUntil(startAt + UInt64(cycles) * interval) }
            _ = try redis.command(["XADD", stream, "*", "product", "bench.coins", "quantity", "1"])
            let reply = try redis.command(["XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "BLOCK", "0", "STREAMS", stream, ">"])
            guard let id = Self.firstEntryID(reply) else { throw BenchError("XREADGROUP returned no entry") }
            _ = try redis.command(["XACK", stream, "g", id])
            cycles += 1
        }
        return cycles
    }

    /// The id of the first entry of an XREADGROUP reply: [[stream, [[id, [fields]]]]].
    static func firstEntryID(_ reply: RESPClient.Reply) -> String? {
        guard case .array(let streams?) = reply, case .array(let pair?) = streams.first,
              pair.count == 2, case .array(let entries?) = pair[1], case .array(let entry?) = entries.first else { return nil }
        return entry.first?.string
    }
}

extension WireConnection {
    /// Receives until the result of `requestID`; throws when it is not ok.
    func awaitResult(_ requestID: UInt32) throws -> UInt64 {
        while true {
            if case .result(let id, let code, _, let value, let message) = try receive(), id == requestID {
                guard code == .ok else { throw BenchError("request \(requestID) refused: \(code.name) \(message)") }
                return value
            }
        }
    }
}
