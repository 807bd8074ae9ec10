import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing

/// Bad input closes only the connection that sent it, with a typed error; everyone else goes on.
@Suite struct RobustnessTests {
    enum BadInput: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case garbage
        case oversizedLength
        case justOverMaximumFrameSize
        case emptyFrame
        case unknownMessageType
        case truncatedMessage
        case trailingBytes
        case frameBeforeHello
        case helloTwice

        var testDescription: String { rawValue }

        /// Whether the offender says hello first.
        var helloFirst: Bool { self != .frameBeforeHello }

        /// The request id the error result should carry, where the daemon could read one.
        var expectedRequestID: UInt32? { self == .frameBeforeHello ? 7 : nil }

        var bytes: [UInt8] {
            switch self {
            case .garbage:
                Array("GET / HTTP/1.1\r\nHost: storekitd\r\n\r\n".utf8)
            case .oversizedLength:
                [0xFF, 0xFF, 0xFF, 0x7F, 0x81]
            case .justOverMaximumFrameSize:
                // MaxFrameSize defaults to 1M: announce one byte more (the body need not follow).
                [0x01, 0x00, 0x10, 0x00]
            case .emptyFrame:
                [0, 0, 0, 0]
            case .unknownMessageType:
                Frame.encode(body: [0x7E, 0, 0, 0, 1])
            case .truncatedMessage:
                // addPayment's type byte and half a request id.
                Frame.encode(body: [4, 1, 0])
            case .trailingBytes:
                Frame.encode(body: ClientMessage.ping(requestID: 3).encode() + [0xAA, 0xBB])
            case .frameBeforeHello:
                Frame.encode(body: ClientMessage.subscribe(requestID: 7).encode())
            case .helloTwice:
                Frame.encode(body: ClientMessage.hello(version: ProtocolVersion.current, app: Sample.app).encode())
            }
        }
    }

    @Test(arguments: BadInput.allCases)
    func badInputClosesOnlyThatConnection(_ input: BadInput) throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()

        // A well-behaved observer, connected before the offender.
        let bystander = try Client(daemon)
        #expect(try bystander.subscribe().isEmpty)

        let offender = try WireConnection(path: daemon.clientSocket)
        offender.setReceiveTimeout(receiveTimeout)
        if input.helloFirst { _ = try offender.hello(app: Sample.app) }
        try offender.sendRaw(input.bytes)

        let answer = try offender.receive()
        guard case .result(let requestID, let code, _, _, let message) = answer else {
            Issue.record("expected an error result, got \(answer)")
            return
        }
        #expect(code == .malformedRequest, "\(code.name): \(message)")
        if let expected = input.expectedRequestID { #expect(requestID == expected) }
        #expect(offender.closedByPeer(), "the offending connection is closed after the error")

        // The daemon is alive and the other client is undisturbed: it buys and hears about it.
        #expect(daemon.isRunning)
        let purchase = try bystander.addPayment(Sample.coins)
        #expect(purchase.code == .ok, "\(purchase.message)")
        #expect(purchase.updated.map(\.state) == [.purchasing, .purchased])
        #expect(try bystander.finish(purchase.value).code == .ok)
        // New clients are still served.
        #expect(try Client(daemon).subscribe().isEmpty)
    }

    @Test func helloWithAnotherProtocolVersionIsRefused() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()

        let connection = try WireConnection(path: daemon.clientSocket)
        connection.setReceiveTimeout(receiveTimeout)
        let error = #expect(throws: ConnectionError.self) {
            _ = try connection.hello(app: Sample.app, version: ProtocolVersion.current + 1)
        }
        #expect(error?.code.refusal == .unsupportedVersion, "\(String(describing: error))")
        #expect(connection.closedByPeer())
        #expect(try Client(daemon).subscribe().isEmpty, "the daemon still serves the current version")
    }

    @Test func helloForAnUnregisteredAppIsRefused() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()

        let connection = try WireConnection(path: daemon.clientSocket)
        connection.setReceiveTimeout(receiveTimeout)
        let error = #expect(throws: ConnectionError.self) {
            _ = try connection.hello(app: "com.example.not_registered")
        }
        #expect(error?.code.refusal == .unknownApp, "\(String(describing: error))")
        #expect(connection.closedByPeer())
        #expect(try Client(daemon).subscribe().isEmpty)
    }

    @Test func controlCommandOnTheClientSocketIsRefused() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()

        let client = try Client(daemon)
        let reply = try client.request { .control(requestID: $0, command: "buy", arguments: ["app=\(Sample.app)", "product=\(Sample.coins)"]) }
        #expect(reply.code == .permissionDenied, "\(reply.code.name) \(reply.message)")
        #expect(client.connection.closedByPeer())
        #expect(try daemon.transactions().isEmpty, "the refused control command did nothing")

        // And the other way round: a client request on the control socket.
        let control = try WireConnection(path: daemon.controlSocket)
        control.setReceiveTimeout(receiveTimeout)
        _ = try control.hello(app: "")
        try control.send(.addPayment(.init(requestID: 9, key: "k", productID: Sample.coins, quantity: 1)))
        let answer = try control.result(for: 9)
        #expect(answer.code == .permissionDenied, "\(answer.code.name) \(answer.message)")
        #expect(try daemon.transactions().isEmpty)
    }
}

extension ConnectionError.Code {
    /// The result code of a refused hello.
    var refusal: ResultCode? {
        if case .refused(let code, _) = self { return code }
        return nil
    }
}
