import Foundation
import StoreKitConnection
import StoreKitPosix
import StoreKitTestSupport
import StoreKitWire
import Testing

/// Malformed, slow, flooding and greedy clients against the real daemon: each is cut off or held
/// back on its own, and the daemon keeps serving everyone else.
@Suite("hostile clients")
struct HostileClientTests {
    /// A daemon with `limits` in its [Limits] section.
    static func daemon(limits: String) throws -> DaemonProcess {
        let daemon = try DaemonProcess()
        try "[Limits]\n\(limits)\n".write(toFile: daemon.configFile, atomically: true, encoding: .utf8)
        try daemon.start()
        return daemon
    }

    /// Whether the daemon closed `fd` within `seconds` (EOF or reset on read); what it sent
    /// before is read and dropped.
    static func closedByDaemon(_ fd: Int32, within seconds: Double) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        return eventually(timeout: seconds) {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while poll(&descriptor, 1, 0) > 0 {
                if read(fd, &buffer, buffer.count) <= 0 { return true }
            }
            return false
        }
    }

    /// A purchase by a well-behaved client, end to end.
    static func purchaseWorks(_ daemon: DaemonProcess) throws -> Bool {
        let client = try daemon.connect()
        try client.send(.addPayment(.init(requestID: 1, key: UUID().uuidString, productID: "com.example.game.coins100", quantity: 1)))
        return try client.result(for: 1).code == .ok
    }

    @Test("10,000 garbage frames on one connection: it is closed, the daemon serves the next client")
    func garbageFlood() throws {
        let daemon = try Self.daemon(limits: "")
        defer { daemon.remove() }
        let bystander = try daemon.connect()
        let attacker = try daemon.connect()
        var garbage: [UInt8] = []
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<10_000 {
            let body = (0..<Int.random(in: 1...40, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            Frame.append(body: [200] + body, to: &garbage)   // 200: no such message type
        }
        try? attacker.sendRaw(garbage)
        if case .result(_, let code, _, _, _)? = try? attacker.receive() {
            #expect(code == .malformedRequest)
        }
        #expect(Self.closedByDaemon(attacker.fd, within: 5))
        try bystander.send(.ping(requestID: 3))
        #expect(try bystander.result(for: 3).code == .ok)
        #expect(try Self.purchaseWorks(daemon))
        #expect(daemon.log().contains("protocol error"))
    }

    @Test("half a frame, then silence: dropped after PartialFrameTimeoutSec=")
    func slowClientDropped() throws {
        let daemon = try Self.daemon(limits: "PartialFrameTimeoutSec=1s")
        defer { daemon.remove() }
        let slow = try daemon.connect()
        let frame = Frame.encode(body: ClientMessage.ping(requestID: 1).encode())
        try slow.sendRaw(Array(frame.prefix(3)))
        let started = Date()
        #expect(Self.closedByDaemon(slow.fd, within: 5))
        #expect(Date().timeIntervalSince(started) >= 0.9, "dropped before the deadline")
        #expect(try Self.purchaseWorks(daemon))
    }

    @Test("a client that never reads is cut off at the high-water mark; the daemon's memory stays bounded")
    func nonReaderCutOff() throws {
        let daemon = try Self.daemon(limits: "OutputHighWaterMark=1M\nSendTimeoutSec=2s")
        defer { daemon.remove() }
        // 400 unfinished transactions make every `unfinished` answer ~50 KB.
        for _ in 0..<4 {
            let filler = try daemon.connect()
            var bytes: [UInt8] = []
            for index in 0..<100 {
                Frame.append(body: ClientMessage.addPayment(.init(requestID: UInt32(index + 1), key: UUID().uuidString,
                                                                  productID: "com.example.game.coins100", quantity: 1)).encode(),
                             to: &bytes)
            }
            try filler.sendRaw(bytes)
            _ = try filler.result(for: 100)
        }
        let pid = try #require(daemon.process?.processIdentifier)
        let rssBefore = Self.residentKilobytes(pid)
        let greedy = try daemon.connect()
        try UnixSocket.setNonBlocking(greedy.fd, true)
        var request: [UInt8] = []
        for index in 0..<2_000 { Frame.append(body: ClientMessage.unfinished(requestID: UInt32(index)).encode(), to: &request) }
        var sent = 0
        // Keep asking, never read: the daemon must cut us off instead of buffering ~100 MB.
        eventually(timeout: 20) {
            // Fill the socket, then look whether the daemon has had enough.
            while true {
                let result = request.withUnsafeBytes { raw in
                    Result { () throws(Errno) -> IOResult in try UnixSocket.write(greedy.fd, UnsafeRawBufferPointer(rebasing: raw[(sent % request.count)...])) }
                }
                guard case .success(.transferred(let count)) = result else { break }
                sent += count
            }
            return daemon.log().contains("Cut off pid")
        }
        #expect(daemon.log().contains("Cut off pid"), "the non-reading client was not cut off")
        let rssAfter = Self.residentKilobytes(pid)
        #expect(rssAfter - rssBefore < 64 * 1024, "daemon grew by \(rssAfter - rssBefore) KB")
        #expect(try Self.purchaseWorks(daemon))
    }

    @Test("connection limits refuse cleanly and recover when connections close")
    func connectionLimits() throws {
        let daemon = try Self.daemon(limits: "MaxConnections=4\nMaxConnectionsPerUID=3")
        defer { daemon.remove() }
        var held: [WireConnection] = []
        for _ in 0..<3 { held.append(try daemon.connect()) }
        // The fourth connection of this uid is refused with limitExceeded.
        let refused = try WireConnection(path: daemon.clientSocket)
        #expect(throws: ConnectionError.self) { _ = try refused.hello(app: "com.example.game") }
        #expect(daemon.log().contains("too many connections for uid"))
        // Closing one makes room again, as soon as the daemon has seen it close.
        held.removeFirst().close()
        var again: WireConnection?
        #expect(eventually {
            again = try? daemon.connect()
            return again != nil
        }, "no room after a connection closed")
        let connection = try #require(again)
        try connection.send(.ping(requestID: 1))
        #expect(try connection.result(for: 1).code == .ok)
    }

    @Test("pipelined requests beyond MaxRequestsInFlight= are held back, not dropped")
    func requestsInFlightBackpressure() throws {
        let daemon = try Self.daemon(limits: "MaxRequestsInFlight=4")
        defer { daemon.remove() }
        let client = try daemon.connect()
        var bytes: [UInt8] = []
        for index in 1...500 { Frame.append(body: ClientMessage.ping(requestID: UInt32(index)).encode(), to: &bytes) }
        try client.sendRaw(bytes)
        var answered: [UInt32] = []
        while answered.count < 500 {
            if case .result(let id, let code, _, _, _) = try client.receive() {
                #expect(code == .ok)
                answered.append(id)
            }
        }
        #expect(answered == Array(1...500), "answers out of order or missing")
    }

    @Test("Executable=: a process not running the registered binary cannot act as the app")
    func executableCheck() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        let appFile = (daemon.configFile as NSString).deletingLastPathComponent + "/apps.d/com.example.game.conf"
        try "[App]\nID=com.example.game\nCatalog=catalog/example.storekit\nExecutable=\(Paths.binary("storekit-example-app"))\n"
            .write(toFile: appFile, atomically: true, encoding: .utf8)
        try daemon.start()
        // This test process is not the registered executable.
        let impostor = try WireConnection(path: daemon.clientSocket)
        do {
            _ = try impostor.hello(app: "com.example.game")
            Issue.record("an impostor was accepted")
        } catch {
            guard case .refused(let code, _) = error.code else {
                Issue.record("expected a refusal, got \(error)")
                return
            }
            #expect(code == .permissionDenied)
            #expect("\(error)".contains("may not act as com.example.game"))
        }
        // The registered binary is accepted.
        let result = try daemon.app(["buy", "com.example.game.coins100"])
        #expect(result.status == 0, "\(result.stderr)")
    }

    static func residentKilobytes(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.filter(\.isNumber)) ?? 0
    }
}

/// Strings with a NUL, through the real daemon: refused as malformed, nothing stored or signed.
@Suite("hostile clients: NUL in strings")
struct HostileNULTests {
    /// Sends `message` after a good hello and returns whether the daemon answered malformedRequest and closed.
    static func refusedAndClosed(_ daemon: DaemonProcess, _ message: ClientMessage) throws -> Bool {
        let client = try daemon.connect()
        defer { client.close() }
        try client.send(message)
        guard case .result(_, let code, _, _, _)? = try? client.receive() else { return false }
        return code == .malformedRequest && HostileClientTests.closedByDaemon(client.fd, within: 5)
    }

    @Test("an appAccountToken with a NUL (a UUID then forged JSON) is refused, not stored as the UUID and signed")
    func applicationUsername() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let forged = "0f6e2b9c-1111-4222-8333-944455556666\u{0}\",\"productId\":\"com.example.game.level_pack"
        #expect(try Self.refusedAndClosed(daemon, .addPayment(.init(requestID: 1, key: "forged", productID: Sample.coins,
                                                                     quantity: 1, applicationUsername: forged))))
        #expect(try Self.refusedAndClosed(daemon, .addPayment(.init(requestID: 1, key: "plain", productID: Sample.coins,
                                                                     quantity: 1, applicationUsername: "nul\u{0}byte"))))
        #expect(try daemon.transactions().isEmpty, "nothing was bought")
        #expect(daemon.log().contains("NUL"), "\(daemon.log())")
        // The same bytes without the NUL are stored and signed as sent.
        let client = try daemon.connect()
        try client.send(.addPayment(.init(requestID: 1, key: "clean", productID: Sample.coins, quantity: 1,
                                          applicationUsername: "0f6e2b9c-1111-4222-8333-944455556666")))
        #expect(try client.result(for: 1).code == .ok)
    }

    @Test("payment keys k\\0first and k\\0second are not one key: both are refused, neither answers with the other's id")
    func paymentKeys() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        for key in ["k\u{0}first", "k\u{0}second"] {
            #expect(try Self.refusedAndClosed(daemon, .addPayment(.init(requestID: 1, key: key, productID: Sample.coins, quantity: 1))))
        }
        #expect(try daemon.transactions().isEmpty)
        let client = try daemon.connect()
        try client.send(.addPayment(.init(requestID: 1, key: "k", productID: Sample.coins, quantity: 1)))
        #expect(try client.result(for: 1).code == .ok)
        try client.send(.addPayment(.init(requestID: 2, key: "kfirst", productID: Sample.coins, quantity: 1)))
        #expect(try client.result(for: 2).code == .ok)
        #expect(try daemon.transactions().count == 2)
    }

    @Test("an app id, product id, group id or control argument with a NUL is refused the same way")
    func otherFields() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let raw = try WireConnection(path: daemon.clientSocket)
        defer { raw.close() }
        try raw.send(.hello(version: ProtocolVersion.current, app: Sample.app + "\u{0}.x"))
        if case .result(_, let code, _, _, _)? = try? raw.receive() { #expect(code == .malformedRequest) }
        #expect(HostileClientTests.closedByDaemon(raw.fd, within: 5))
        #expect(try Self.refusedAndClosed(daemon, .addPayment(.init(requestID: 1, key: "p", productID: Sample.coins + "\u{0}",
                                                                     quantity: 1))))
        #expect(try Self.refusedAndClosed(daemon, .products(requestID: 1, identifiers: [Sample.coins + "\u{0}"])))
        #expect(try Self.refusedAndClosed(daemon, .subscriptionStatus(requestID: 1, groupID: "g\u{0}")))
        let control = try WireConnection(path: daemon.controlSocket)
        defer { control.close() }
        _ = try control.hello(app: "")
        try control.send(.control(requestID: 7, command: "storefront", arguments: ["storefront=USA\u{0}FRA"]))
        var answered: ResultCode?
        while answered == nil, let message = try? control.receive() {
            if case .result(let id, let code, _, _, _) = message, id == 7 || id == 0 { answered = code }
        }
        #expect(answered == .malformedRequest)
        #expect(try daemon.ctl(["buy", Sample.app, Sample.coins]).status == 0, "the daemon serves on")
    }
}
