import Foundation
import StoreKitEngine
import StoreKitLedger
import StoreKitSQLite
import StoreKitWire

/// The structure-aware fuzz target `requests`: a byte string read as a program of client and
/// control requests, each encoded and decoded through the wire codec where it has a wire form,
/// then run through the engine and the store on a temporary database, one unit of work each,
/// as the daemon runs them.
///
/// Checked after every request:
/// - nothing traps (a trap is the finding, with the input that caused it);
/// - every request is answered: an `Outcome`, or a `LedgerError` only for a full disk;
/// - nothing of another queue is returned: every effect's records belong to the effect's queue,
///   `unfinished` answers only the asker's (uid, app) and only unfinished rows, `products` only
///   the asker's catalogue;
/// - what the engine says is durable is there when read back;
/// - what was acknowledged is byte for byte what is stored and what is signed: an accepted
///   payment's product and applicationUsername read back from the store, and its payload's
///   `appAccountToken`, are exactly what the client sent; two different payment keys never
///   answer with one transaction;
/// - every request type survives the wire, and a string holding a NUL is refused at decode
///   (`WireError.nulInString`), never passed on cut short.
final class RequestHarness {
    static let app = "com.example.game"
    static let otherApp = "com.example.other"
    static let uids: [UInt32] = [1000, 1001, 0, UInt32.max]

    let directory: String
    let store: SQLiteLedger
    let engine: PaymentQueueEngine
    let productIDs: [String]
    /// Transaction ids seen in answers: requests name them most of the time, raw numbers sometimes.
    var knownIDs: [UInt64] = []
    var knownKeys: [String] = []
    var executed = 0

    init(catalogPath: String) throws {
        directory = NSTemporaryDirectory() + "storekitd-fuzz-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        store = try SQLiteLedger(path: directory + "/storekitd.sqlite", spaceReserve: 0)
        let catalog = try Catalog.load(path: catalogPath)
        engine = PaymentQueueEngine(store: store, catalogs: [Self.app: catalog, Self.otherApp: catalog])
        engine.limits.unfinishedPerQueue = 50
        productIDs = catalog.products.map(\.id)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs one input: a fresh start of the queues, then its requests in order.
    func run(_ data: [UInt8]) {
        var input = FuzzInput(data)
        unit { _ = try engine.clear(uid: nil, app: nil) }
        knownIDs.removeAll(keepingCapacity: true)
        knownKeys.removeAll(keepingCapacity: true)
        answeredKeys.removeAll(keepingCapacity: true)
        while !input.isEmpty, executed < Int.max {
            step(&input)
            executed += 1
        }
    }

    // MARK: One request

    private func step(_ input: inout FuzzInput) {
        let uid = input.pick(Self.uids) ?? 1000
        let app = input.pick([Self.app, Self.app, Self.otherApp, "no.such.app", input.string()]) ?? Self.app
        switch input.byte() % 19 {
        case 0, 1, 2:
            let message = ClientMessage.addPayment(.init(
                requestID: input.u32(), key: paymentKey(&input), productID: product(&input), quantity: quantity(&input),
                applicationUsername: input.bool() ? input.string(limit: input.bool() ? 300 : 16) : nil,
                hasRequestData: input.byte() == 0, simulatesAskToBuy: input.bool(),
                billingPlanType: input.pick([nil, nil, ProductRecord.BillingPlan.PlanType.upFront, .monthly]) ?? nil))
            guard case .addPayment(let payment) = roundTrip(message) else { return }
            client(uid, app) {
                // A key already used names that payment: the new one's content is not taken.
                let earlier = payment.key.isEmpty ? nil : try store.transaction(uid: uid, app: app, paymentKey: payment.key)
                let outcome = try engine.addPayment(uid: uid, app: app, payment: payment)
                if let earlier {
                    check(outcome.code != .ok || outcome.value == earlier.id, "payment key \(payment.key.debugDescription) answered "
                          + "\(outcome.value), not its earlier transaction \(earlier.id)")
                } else if !payment.key.isEmpty, outcome.code == .ok,
                          try store.transaction(uid: uid, app: app, paymentKey: payment.key)?.id == outcome.value {
                    // A transaction this payment made (not an open Ask to Buy request it joined).
                    checkStoredAsSent(payment, uid: uid, app: app, outcome: outcome)
                }
                return outcome
            }
        case 3, 4:
            guard case .finish(_, let id) = roundTrip(.finish(requestID: input.u32(), transactionID: transactionID(&input))) else { return }
            client(uid, app) { try engine.finish(uid: uid, app: app, transactionID: id) }
        case 5:
            guard case .cancelPayment(_, let id) = roundTrip(.cancelPayment(requestID: input.u32(), transactionID: transactionID(&input))) else { return }
            client(uid, app) { try engine.cancelDeferred(uid: uid, app: app, transactionID: id) }
        case 6:
            client(uid, app) { try engine.restore(uid: uid, app: app, applicationUsername: input.bool() ? input.string() : nil) }
        case 7:
            guard case .unfinished = roundTrip(.unfinished(requestID: input.u32(), afterID: input.u64())) else { return }
            let records = answer { try engine.unfinished(uid: uid, app: app) } ?? []
            for record in records {
                check(record.uid == uid && record.app == app, "unfinished of \(uid)/\(app) returned \(record.uid)/\(record.app)")
                check(!record.finished, "unfinished returned finished transaction \(record.id)")
            }
        case 8:
            let asked = (0..<Int(input.byte() % 4)).map { _ in product(&input) }
            guard case .products(_, let identifiers) = roundTrip(.products(requestID: input.u32(), identifiers: asked)) else { return }
            let (products, invalid) = engine.products(app: app, identifiers: identifiers)
            for product in products { check(identifiers.contains(product.productID), "products answered \(product.productID), not asked for") }
            check(products.count + invalid.count <= identifiers.count, "products answered more than was asked")
        case 9: control { try engine.approve(transactionID: transactionID(&input)) }
        case 10: control { try engine.decline(transactionID: transactionID(&input)) }
        case 11: control { try engine.resolve(transactionID: transactionID(&input)) }
        case 12: control { try engine.refund(transactionID: transactionID(&input), reason: input.i32()) }
        case 13:
            let text = input.pick(["1d", "1mo", "1y", "30s", "P1M", "999999999y", "99999999y", "PT0S", input.string()]) ?? "1d"
            guard let duration = ClockDuration(text) else { return }
            control { try engine.advanceClock(by: duration) }
        case 14:
            let selector: SubscriptionSelector = input.bool() ? .transaction(transactionID(&input)) : .product(uid: uid, app: app, productID: product(&input))
            switch input.byte() % 3 {
            case 0: control { try engine.expire(selector) }
            case 1: control { try engine.forceRenewal(selector) }
            default: control { try engine.setAutoRenew(input.bool(), selector) }
            }
        case 15:
            let outcome = engine.promote(uid: uid, app: app, productID: product(&input))
            checkEffects(outcome.effects)
        case 16:
            let askToBuy = input.bool()
            let interrupted = input.bool()
            let failing = input.byte() % 3 == 0 ? (code: input.i32(), remaining: Int(input.byte() % 3)) : nil
            unit {
                checkEffects(try engine.updateSwitches { switches in
                    switches.askToBuy = askToBuy
                    switches.interrupted = interrupted
                    switches.failure = failing
                })
            }
        case 17:
            // What proof of purchase states (history, subscriptionStatus, receipts): only the
            // caller's own transactions, each payload naming itself and its app. The requests
            // that ask for it (version 2) go through the wire first.
            let asks: [ClientMessage] = [
                .history(requestID: input.u32(), afterID: input.byte() % 4 == 0 ? input.u64() : 0),
                .subscriptionStatus(requestID: input.u32(), groupID: input.string(limit: input.bool() ? 300 : 16)),
                .appTransaction(requestID: input.u32()), .receipt(requestID: input.u32()),
                .ping(requestID: input.u32()), .subscribe(requestID: input.u32()), .unsubscribe(requestID: input.u32()),
                .hello(version: UInt16(truncatingIfNeeded: input.u32()), app: input.string()),
                .control(requestID: input.u32(), command: input.string(), arguments: [input.string(), input.string(limit: 300)]),
            ]
            guard let ask = input.pick(asks), roundTrip(ask) != nil else { return }
            let history = answer { try engine.history(uid: uid, app: app) } ?? []
            for record in history {
                check(record.uid == uid && record.app == app, "history of \(uid)/\(app) returned \(record.uid)/\(record.app)")
                guard let payload = answer({ try engine.transactionPayload(record, environment: "Xcode", signedDate: 0) }) ?? nil else {
                    check(!PaymentQueueEngine.isSignable(record), "no payload for signable transaction \(record.id)")
                    continue
                }
                let text = payload.serialized()
                check(text.contains("\"transactionId\":\"\(record.id)\""), "payload of \(record.id) names another transaction")
                check(text.contains("\"bundleId\":"), "payload of \(record.id) has no bundleId")
            }
            for status in answer({ try engine.subscriptionStatuses(uid: uid, app: app, groupID: nil) }) ?? [] {
                check(status.latest.uid == uid && status.latest.app == app, "subscription status of \(uid)/\(app) crossed queues")
            }
            for record in answer({ try engine.receiptPurchases(uid: uid, app: app) }) ?? [] {
                check(record.uid == uid && record.app == app, "receipt of \(uid)/\(app) lists \(record.uid)/\(record.app)")
            }
        default:
            unit { checkEffects(try engine.fireDueEvents()) }
        }
    }

    // MARK: Requests as the daemon runs them

    /// A client request of (uid, app): one unit of work, and its effects only for its own queue's
    /// records (effects may name other queues only through the store's scheduled events).
    private func client(_ uid: UInt32, _ app: String, _ body: () throws -> Outcome) {
        unit {
            let outcome = try body()
            checkEffects(outcome.effects)
            remember(outcome)
        }
    }

    private func control(_ body: () throws -> Outcome) {
        unit {
            let outcome = try body()
            checkEffects(outcome.effects)
            remember(outcome)
        }
    }

    private func answer<T>(_ body: () throws -> T) -> T? {
        do {
            return try body()
        } catch {
            check((error as? LedgerError)?.code == .full, "a read failed: \(error)")
            return nil
        }
    }

    private func unit(_ body: () throws -> Void) {
        do {
            try store.begin()
            try body()
            try store.commit()
        } catch {
            store.rollback()
            check((error as? LedgerError)?.code == .full, "a request was not answered: the store failed with \(error)")
        }
    }

    private func remember(_ outcome: Outcome) {
        if outcome.value > 2_000_000_000_000_000 { knownIDs.append(outcome.value) }
        for effect in outcome.effects {
            if case .updated(_, let records) = effect { knownIDs.append(contentsOf: records.map(\.id)) }
        }
        if knownIDs.count > 64 { knownIDs.removeFirst(knownIDs.count - 64) }
    }

    private func checkEffects(_ effects: [Effect]) {
        for effect in effects {
            switch effect {
            case .updated(let queue, let records), .removed(let queue, let records):
                for record in records {
                    check(record.uid == queue.uid && record.app == queue.app,
                          "an effect for \(queue.uid)/\(queue.app) carries transaction \(record.id) of \(record.uid)/\(record.app)")
                    // What is announced is what the store holds.
                    if let stored = answer({ try store.transaction(id: record.id) }) {
                        check(stored?.uid == record.uid && stored?.app == record.app, "transaction \(record.id) is not stored as announced")
                    }
                }
            case .revoked, .storefrontChanged, .promoted, .priceConsent:
                break
            }
        }
    }

    private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { fatalError("invariant broken: \(message())") }
    }

    // MARK: Values the input chooses

    /// `message` through the wire codec: what decodes is what was sent, and a message with a
    /// NUL in a string is refused (nil), never decoded cut short.
    private func roundTrip(_ message: ClientMessage) -> ClientMessage? {
        let holdsNUL = Self.strings(of: message).contains { $0.utf8.contains(0) }
        do {
            let decoded = try ClientMessage.decode(message.encode())
            check(!holdsNUL, "\(message) holds a NUL and was decoded")
            check(decoded == message, "\(message) does not survive the wire")
            return decoded
        } catch {
            check(holdsNUL && error == WireError(.nulInString), "\(message) was refused by the wire: \(error)")
            return nil
        }
    }

    /// Every string a client message carries.
    static func strings(of message: ClientMessage) -> [String] {
        switch message {
        case .hello(_, let app): [app]
        case .addPayment(let payment):
            [payment.key, payment.productID] + (payment.applicationUsername.map { [$0] } ?? [])
                + (payment.discount.map { [$0.offerID, $0.keyID, $0.nonce, $0.signature] } ?? [])
        case .restore(_, let name): name.map { [$0] } ?? []
        case .products(_, let identifiers): identifiers
        case .control(_, let command, let arguments): [command] + arguments
        case .subscriptionStatus(_, let group): [group]
        case .subscribe, .unsubscribe, .finish, .unfinished, .ping, .cancelPayment, .history, .appTransaction, .receipt,
             .content, .openContent: []
        }
    }

    /// Payment keys already answered, with the transaction each answered.
    private var answeredKeys: [String: UInt64] = [:]

    /// An accepted payment is stored and signed with exactly what was sent.
    private func checkStoredAsSent(_ payment: ClientMessage.AddPayment, uid: UInt32, app: String, outcome: Outcome) {
        guard outcome.code == .ok, outcome.value != 0,
              let stored = answer({ try store.transaction(id: outcome.value) }) ?? nil else { return }
        check(stored.productID.utf8.elementsEqual(payment.productID.utf8),
              "payment for \(payment.productID.debugDescription) stored as \(stored.productID.debugDescription)")
        check(stored.applicationUsername?.utf8.elementsEqual((payment.applicationUsername ?? "").utf8) ?? (payment.applicationUsername == nil),
              "applicationUsername \(String(describing: payment.applicationUsername).debugDescription) stored as "
                  + "\(String(describing: stored.applicationUsername).debugDescription)")
        if let payload = answer({ try engine.transactionPayload(stored, environment: "Xcode", signedDate: 0) }) ?? nil {
            let text = payload.serialized()
            let token = PaymentQueueEngine.appAccountToken(payment.applicationUsername)
            check(token.map { text.contains("\"appAccountToken\":\"\($0)\"") } ?? !text.contains("appAccountToken"),
                  "the signed payload of \(stored.id) carries an appAccountToken the client did not send: \(text)")
        }
        guard !payment.key.isEmpty else { return }
        let key = "\(uid)/\(app)/\(payment.key)"
        for (other, id) in answeredKeys where id == outcome.value && other != key {
            check(false, "payment keys \(other.debugDescription) and \(key.debugDescription) answered one transaction \(id)")
        }
        answeredKeys[key] = outcome.value
    }

    /// Mostly 0…11 (the valid 1…10 and both edges), sometimes any Int32.
    private func quantity(_ input: inout FuzzInput) -> Int32 {
        input.byte() % 8 == 0 ? input.i32() : Int32(input.byte() % 12)
    }

    private func transactionID(_ input: inout FuzzInput) -> UInt64 {
        switch input.byte() % 5 {
        case 0: input.u64()
        case 1: UInt64(Int64.max) + UInt64(input.byte())
        default: input.pick(knownIDs) ?? input.u64()
        }
    }

    private func product(_ input: inout FuzzInput) -> String {
        input.byte() % 8 == 0 ? input.string(limit: input.bool() ? 300 : 24) : (input.pick(productIDs) ?? "")
    }

    private func paymentKey(_ input: inout FuzzInput) -> String {
        switch input.byte() % 6 {
        case 0: return ""
        case 1: return input.pick(knownKeys) ?? ""
        case 2: return input.string(limit: input.bool() ? 300 : 24)
        default:
            let key = UUID().uuidString
            knownKeys.append(key)
            return key
        }
    }
}

/// Reads values from the fuzzer's bytes; past the end everything reads as zero.
struct FuzzInput {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isEmpty: Bool { offset >= bytes.count }

    mutating func byte() -> UInt8 {
        defer { offset += 1 }
        return offset < bytes.count ? bytes[offset] : 0
    }

    mutating func bool() -> Bool { byte() & 1 == 1 }
    mutating func u32() -> UInt32 { (0..<4).reduce(0) { value, _ in value << 8 | UInt32(byte()) } }
    mutating func u64() -> UInt64 { (0..<8).reduce(0) { value, _ in value << 8 | UInt64(byte()) } }
    mutating func i32() -> Int32 { Int32(bitPattern: u32()) }

    /// A string of up to `limit` scalars, sometimes control characters and non-ASCII.
    mutating func string(limit: Int = 16) -> String {
        let count = Int(byte()) % (limit + 1)
        var result = ""
        for _ in 0..<count {
            let value = byte()
            result.unicodeScalars.append(value < 0x80 ? Unicode.Scalar(value) : Unicode.Scalar(0x3000 + UInt32(value)) ?? "x")
        }
        return result
    }

    mutating func pick<T>(_ choices: [T]) -> T? {
        choices.isEmpty ? nil : choices[Int(byte()) % choices.count]
    }
}
