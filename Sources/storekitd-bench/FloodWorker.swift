import Foundation
import StoreKitConnection
import StoreKitWire

/// The flood kinds' worker processes, run as the flooding uid (`setpriv`): `hold` fills the
/// uid's queue of one app before the rounds, `history` and `receipt` flood it during a round.
/// Each prints its counts on one line.
enum FloodWorker {
    static let kinds: Set<String> = ["hold", "history", "receipt"]

    static func main(kind: String, options: [String: String]) -> Int32 {
        guard let socket = options["--socket"], let app = options["--app"] else {
            FileHandle.standardError.write(Data("storekitd-bench: bad flood worker arguments\n".utf8))
            return 64
        }
        do {
            if kind == "hold" {
                guard let count = Int(options["--count"] ?? "") else { throw BenchError("hold needs --count") }
                print(try hold(socket: socket, app: app, count: count, finish: options["--finish"] == "yes"))
            } else {
                guard let seconds = Double(options["--seconds"] ?? ""), let startAt = UInt64(options["--start-at"] ?? ""),
                      let inFlight = Int(options["--in-flight"] ?? ""), inFlight > 0 else {
                    throw BenchError("a flood needs --seconds, --start-at and --in-flight")
                }
                let purchaseEvery = Int(options["--purchase-every"] ?? "") ?? 0
                let (served, bytes, purchases) = try flood(kind: kind, socket: socket, app: app, startAt: startAt, seconds: seconds,
                                                           inFlight: inFlight, purchaseEvery: purchaseEvery)
                print(served, bytes, purchases)
            }
            return 0
        } catch {
            FileHandle.standardError.write(Data("storekitd-bench \(kind) worker: \(error)\n".utf8))
            return 1
        }
    }

    /// `count` consumables bought in `app`, pipelined 250 at a time as `SharingTests` fills a
    /// queue (one `storekitctl buy` per purchase would take minutes), then finished the same way
    /// when `finish`: a history of finished purchases, or a queue of unfinished ones.
    static func hold(socket: String, app: String, count: Int, finish: Bool) throws -> Int {
        let connection = try WireConnection(path: socket)
        _ = try connection.hello(app: app)
        connection.setReceiveTimeout(60)
        var requestID: UInt32 = 0
        var ids: [UInt64] = []
        ids.reserveCapacity(count)
        let prefix = "hold-\(getpid())-"
        while ids.count < count {
            let batch = min(250, count - ids.count)
            var bytes: [UInt8] = []
            for _ in 0..<batch {
                requestID += 1
                Frame.append(body: ClientMessage.addPayment(.init(requestID: requestID, key: prefix + String(requestID),
                                                                  productID: "bench.coins", quantity: 1)).encode(), to: &bytes)
            }
            try connection.sendRaw(bytes)
            ids += try answers(on: connection, from: requestID - UInt32(batch) + 1, through: requestID)
        }
        guard finish else { return ids.count }
        var start = 0
        while start < ids.count {
            let batch = ids[start..<min(start + 250, ids.count)]
            var bytes: [UInt8] = []
            let first = requestID + 1
            for id in batch {
                requestID += 1
                Frame.append(body: ClientMessage.finish(requestID: requestID, transactionID: id).encode(), to: &bytes)
            }
            try connection.sendRaw(bytes)
            _ = try answers(on: connection, from: first, through: requestID)
            start += batch.count
        }
        return ids.count
    }

    /// The values of the results of requests `first…last` (a payment's is its transaction id),
    /// in request order, whatever order they arrive in; throws at a refusal.
    static func answers(on connection: WireConnection, from first: UInt32, through last: UInt32) throws -> [UInt64] {
        var values: [UInt32: UInt64] = [:]
        while values.count < Int(last - first + 1) {
            if case .result(let id, let code, _, let value, let message) = try connection.receive(), (first...last).contains(id) {
                guard code == .ok else { throw BenchError("request \(id) refused: \(code.name) \(message)") }
                values[id] = value
            }
        }
        return (first...last).map { values[$0]! }
    }

    /// Keeps `inFlight` requests of `kind` in flight on one connection from `startAt` for
    /// `seconds`, as `SharingTests.flood` does, then waits for the last answers. Returns the
    /// requests answered, the bytes they brought (transactions' encoded size, or receipts'),
    /// and the purchases made meanwhile.
    ///
    /// `history`: each of the requests in flight pages through the whole history on its own,
    /// the next page after the last id of the one before, from the start again after the empty
    /// page that ends it (16 apps reading `Transaction.all` at once).
    ///
    /// `receipt`: the daemon keeps a queue's receipt until the queue changes, so a flood of an
    /// unchanged queue would cost one receipt and then copies; one purchase after every
    /// `purchaseEvery` receipts answered changes it, and the next receipt is made and signed
    /// again, as a receipt refreshed after each purchase is. The purchases stay unfinished, so
    /// each is in the receipts that follow (the queue grows by them round after round).
    static func flood(kind: String, socket: String, app: String, startAt: UInt64, seconds: Double, inFlight: Int,
                      purchaseEvery: Int) throws -> (Int, Int, Int) {
        let connection = try WireConnection(path: socket)
        _ = try connection.hello(app: app)
        connection.setReceiveTimeout(60)
        let history = kind == "history"
        var cursors = [UInt64](repeating: 0, count: inFlight)
        var slotOf: [UInt32: Int] = [:]   // the request in flight of each slot
        var payments = Set<UInt32>()
        var next: UInt32 = 0
        var served = 0
        var bytes = 0
        var purchases = 0
        func request(_ slot: Int) -> [UInt8] {
            next += 1
            slotOf[next] = slot
            let message: ClientMessage = history ? .history(requestID: next, afterID: cursors[slot]) : .receipt(requestID: next)
            return Frame.encode(body: message.encode())
        }
        Worker.waitUntil(startAt)
        let deadline = startAt + UInt64(seconds * 1e9)
        try connection.sendRaw((0..<inFlight).flatMap { request($0) })
        while !slotOf.isEmpty || !payments.isEmpty {
            let message = try connection.receive()
            var answered: Int?
            switch message {
            case .transactions(let id, let records):
                guard let slot = slotOf.removeValue(forKey: id) else { continue }
                bytes += records.reduce(0) { $0 + $1.encodedSize }
                cursors[slot] = records.last?.id ?? 0
                answered = slot
            case .receipt(let id, let data):
                guard let slot = slotOf.removeValue(forKey: id) else { continue }
                bytes += data.count
                answered = slot
            case .result(let id, let code, _, _, let text):
                if payments.remove(id) != nil {
                    guard code == .ok else { throw BenchError("a purchase in the receipt flood was refused: \(code.name) \(text)") }
                    purchases += 1
                } else if slotOf[id] != nil {
                    throw BenchError("a \(kind) request was refused: \(code.name) \(text)")
                }
            default:
                break
            }
            guard let slot = answered else { continue }
            served += 1
            guard monotonicNanoseconds() < deadline else { continue }
            if purchaseEvery > 0, served % purchaseEvery == 0 {
                next += 1
                payments.insert(next)
                try connection.send(.addPayment(.init(requestID: next, key: "flood-\(getpid())-\(next)", productID: "bench.coins",
                                                      quantity: 1)))
            }
            try connection.sendRaw(request(slot))
        }
        return (served, bytes, purchases)
    }
}
