import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing

/// One machine shared fairly: a uid's expensive requests (history pages, receipts of a long
/// queue) do not stall another uid's cheap ones.
@Suite("sharing the daemon")
struct SharingTests {
    /// `count` unfinished consumables for the connection's uid, pipelined in batches.
    static func holdPurchases(_ connection: WireConnection, count: Int) throws {
        var sent = 0
        var requestID: UInt32 = 100
        while sent < count {
            let batch = min(250, count - sent)
            var bytes: [UInt8] = []
            for _ in 0..<batch {
                requestID += 1
                Frame.append(body: ClientMessage.addPayment(.init(requestID: requestID, key: UUID().uuidString,
                                                                  productID: Sample.coins, quantity: 1)).encode(), to: &bytes)
            }
            try connection.sendRaw(bytes)
            var answered = 0
            while answered < batch {
                if case .result(let id, let code, _, _, let message) = try connection.receive(), id > 100 {
                    #expect(code == .ok, "\(code.name) \(message)")
                    answered += 1
                }
            }
            sent += batch
        }
    }

    /// Keeps 16 requests made by `make` in flight on `connection` until `stop`; returns how many were answered.
    static func flood(_ connection: WireConnection, until stop: Date, _ kind: String) throws -> Int {
        func make(_ id: UInt32) -> ClientMessage { kind == "history" ? .history(requestID: id, afterID: 0) : .receipt(requestID: id) }
        var next: UInt32 = 10_000
        var bytes: [UInt8] = []
        for _ in 0..<16 {
            next += 1
            Frame.append(body: make(next).encode(), to: &bytes)
        }
        try connection.sendRaw(bytes)
        var answered = 0
        var outstanding = 16
        while outstanding > 0 {
            switch try connection.receive() {
            case .transactions(let id, _) where id > 10_000, .receipt(let id, _) where id > 10_000:
                answered += 1
                outstanding -= 1
                if Date() < stop {
                    next += 1
                    try connection.send(make(next))
                    outstanding += 1
                }
            case .result(let id, let code, _, _, let message) where id > 10_000:
                Issue.record("a flood request was refused: \(code.name) \(message)")
                outstanding -= 1
            default:
                break
            }
        }
        return answered
    }

    /// Pings as `uid` one after another until `stop`; each round trip in ms.
    static func pings(socket: String, uid: UInt32, until stop: Date) throws -> [Double] {
        let connection = try connectWithThreadUID(uid, path: socket)
        defer { connection.close() }
        _ = try connection.hello(app: Sample.app)
        var times: [Double] = []
        var id: UInt32 = 1
        while Date() < stop {
            let started = DispatchTime.now().uptimeNanoseconds
            try connection.send(.ping(requestID: id))
            while true {
                if case .result(let answered, _, _, _, _) = try connection.receive(), answered == id { break }
            }
            times.append(Double(DispatchTime.now().uptimeNanoseconds - started) / 1_000_000)
            id += 1
            Thread.sleep(forTimeInterval: 0.002)
        }
        return times
    }

    static func p99(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * 0.99))]
    }

    @Test("another uid's pings stay fast while a uid with 5,000 purchases floods history pages, then receipts, 16 in flight",
          .enabled(if: getuid() == 0, "needs root to connect as another uid"),
          .enabled(if: ProcessInfo.processInfo.environment["STOREKIT_SANITIZER"] == nil,
                   "a measurement of time: a sanitizer slows the daemon many times over"))
    func pingUnderExpensiveFloods() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        daemon.openDirectoriesToOtherUsers()
        let flooder = try daemon.connect()
        defer { flooder.close() }
        flooder.setReceiveTimeout(60)
        try Self.holdPurchases(flooder, count: 5_000)

        // Issue #33's bound, in the debug build the tests run with the other suites beside it:
        // history pages p99 10-16 ms measured, receipts 1.9-34 ms since receipts and pages are
        // signed on the signer's threads (a receipt flood's p99 was 14-85 ms when the first
        // receipt of 5,000 purchases was made on the serving loop; before receipts were kept,
        // every request made one and pings waited seconds). A round over the bound is measured
        // again, up to three rounds: other suites running beside this one on two cores can take
        // the CPU for a moment (the receipt flood's p99 measured 5-61 ms in full parallel runs);
        // a daemon that really stalls pings stays over it in every round.
        let bound: Double = 50
        for kind in ["history", "receipt"] {
            var p99s: [Double] = []
            for _ in 1...3 {
                let stop = Date().addingTimeInterval(4)
                let measured = LockedValue<[Double]?>(nil)
                let socket = daemon.clientSocket
                let pinging = Thread {
                    let times = (try? Self.pings(socket: socket, uid: 4402, until: stop)) ?? []
                    measured.withLock { $0 = times }
                }
                pinging.start()
                let served = try Self.flood(flooder, until: stop, kind)
                #expect(eventually(timeout: 60) { measured.withLock { $0 } != nil }, "the pings did not end")
                let times = measured.withLock { $0 } ?? []
                #expect(served > 16, "the \(kind) flood was served \(served) requests")
                #expect(times.count > 100)
                print("sharing: \(kind) flood: \(served) served; ping p50 \(times.sorted()[times.count / 2]) ms, p99 \(Self.p99(times)) ms over \(times.count) pings (max \(times.max() ?? 0) ms)")
                p99s.append(Self.p99(times))
                if p99s.last! <= bound { break }
            }
            #expect(p99s.last! <= bound, "\(kind) flood: ping p99 \(p99s.map { String(format: "%.1f", $0) }.joined(separator: ", then ")) ms")
        }
    }
}
