import StoreKitWire
import Testing

/// Strings from clients are taken exactly or refused: SQLite, libpq and C clients end a string at
/// its first NUL, so one holding a NUL would be stored, compared and signed cut short.
@Suite("NUL in client strings")
struct NULStringTests {
    static let nul = "k\u{0}second"

    /// Every string field of every client message, each with a NUL in it.
    static let messages: [(field: String, message: ClientMessage)] = [
        ("hello app", .hello(version: 2, app: "com.example.game\u{0}.other")),
        ("addPayment key", .addPayment(.init(requestID: 1, key: nul, productID: "p", quantity: 1))),
        ("addPayment productID", .addPayment(.init(requestID: 1, key: "k", productID: "com.example.game.coins100\u{0}x", quantity: 1))),
        ("addPayment applicationUsername", .addPayment(.init(requestID: 1, key: "k", productID: "p", quantity: 1,
                                                             applicationUsername: "0f6e2b9c-1111-4222-8333-944455556666\u{0}\",\"productId\":\"x"))),
        ("restore applicationUsername", .restore(requestID: 1, applicationUsername: "nul\u{0}byte")),
        ("products identifier", .products(requestID: 1, identifiers: ["a", "b\u{0}"])),
        ("control command", .control(requestID: 1, command: "buy\u{0}", arguments: [])),
        ("control argument", .control(requestID: 1, command: "storefront", arguments: ["storefront=USA\u{0}FRA"])),
        ("subscriptionStatus group", .subscriptionStatus(requestID: 1, groupID: "\u{0}")),
    ]

    @Test("a NUL in any string of a client's message is refused at decode", arguments: messages.map(\.field))
    func refused(field: String) throws {
        let message = try #require(Self.messages.first { $0.field == field }?.message)
        #expect(throws: WireError(.nulInString)) { try ClientMessage.decode(message.encode()) }
    }

    @Test("the same strings without the NUL decode as sent, byte for byte")
    func withoutNULDecodes() throws {
        for (_, message) in Self.messages {
            let clean = ClientMessage.strippingNUL(message)
            #expect(try ClientMessage.decode(clean.encode()) == clean)
        }
    }

    @Test("what the daemon sends may carry a NUL (a catalogue's text is the catalogue's): the client does not refuse it")
    func serverStringsAreNotRefused() throws {
        var reader = WireReader([3, 0, 0, 0, 0x61, 0, 0x62])
        #expect(try reader.string() == "a\u{0}b")
        var strict = WireReader([3, 0, 0, 0, 0x61, 0, 0x62], refusingNUL: true)
        #expect(throws: WireError(.nulInString)) { try strict.string() }
    }
}

extension ClientMessage {
    /// `message` with every NUL removed from its strings.
    static func strippingNUL(_ message: ClientMessage) -> ClientMessage {
        func strip(_ text: String) -> String { String(String.UnicodeScalarView(text.unicodeScalars.filter { $0 != "\u{0}" })) }
        switch message {
        case .hello(let version, let app): return .hello(version: version, app: strip(app))
        case .addPayment(var payment):
            payment.key = strip(payment.key)
            payment.productID = strip(payment.productID)
            payment.applicationUsername = payment.applicationUsername.map(strip)
            return .addPayment(payment)
        case .restore(let id, let name): return .restore(requestID: id, applicationUsername: name.map(strip))
        case .products(let id, let identifiers): return .products(requestID: id, identifiers: identifiers.map(strip))
        case .control(let id, let command, let arguments): return .control(requestID: id, command: strip(command), arguments: arguments.map(strip))
        case .subscriptionStatus(let id, let group): return .subscriptionStatus(requestID: id, groupID: strip(group))
        default: return message
        }
    }
}
