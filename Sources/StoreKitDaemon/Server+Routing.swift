import CPosix
import StoreKitEngine
import StoreKitLedger
import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

// Turning the engine's effects into frames for the connected observers, journal entries, and
// observer-unit starts for queues nobody observes.

extension Server {
    /// Sends what a durable unit of work produced: journal entries, observer-unit starts, and
    /// frames queued on the sessions still connected.
    func release(_ output: UnitOutput) {
        for entry in output.journal { entry() }
        activateObservers(for: output.unobserved)
        var lastToken: UInt64 = 0
        var lastSession: Session?
        for (index, (token, frame)) in output.frames.enumerated() {
            if token != lastToken {
                lastToken = token
                lastSession = sessions[token]
                if let lastSession { queueForSending(lastSession) }
            }
            let tail = output.tails[index]
            lastSession?.outputInGate -= frame.count + (tail?.count ?? 0)
            lastSession?.enqueue(encodedFrame: frame, passing: output.descriptors[index])
            if let tail { lastSession?.enqueue(encodedFrame: tail) }
        }
    }

    /// Turns an effect into frames for the observers registered now, and journal entries.
    func route(_ effect: Effect, into output: inout UnitOutput) {
        let queue: QueueKey
        let message: ServerMessage
        switch effect {
        case .updated(let key, let records):
            queue = key
            message = .updated(records)
            journal(records, into: &output, id: .stateChanged) { "is \($0.state)" }
        case .removed(let key, let records):
            queue = key
            message = .removed(records)
            journal(records, into: &output, id: .finished) { _ in "was finished" }
        case .revoked(let key, let productIDs):
            queue = key
            message = .entitlementsRevoked(productIDs: productIDs)
            let logger = self.logger
            output.journal.append {
                logger.info("Uid \(key.uid) lost \(productIDs.joined(separator: ", ")) of \(key.app) (refund or Family Sharing)",
                            id: .entitlementsRevoked, fields: [("STOREKIT_APP", key.app), ("STOREKIT_UID", String(key.uid)),
                                                        ("STOREKIT_PRODUCT", productIDs.joined(separator: " "))])
            }
        case .promoted(let key, let product):
            queue = key
            message = .promotedPurchase(product)
        case .priceConsent(let key, let productID):
            // Version 3 only: older clients know no such message (they are told nothing).
            let frame = Frame.encode(body: ServerMessage.priceConsent(productID: productID).encode())
            for token in observers[key] ?? [] where (sessions[token]?.version ?? 0) >= ProtocolVersion.hostedContent {
                output.append(token, frame)
            }
            return
        case .storefrontChanged(let country, let identifier):
            let frame = Frame.encode(body: ServerMessage.storefrontChanged(countryCode: country, identifier: identifier).encode())
            for session in sessions.values where session.subscribed { output.append(session.token, frame) }
            return
        }
        guard let tokens = observers[queue], !tokens.isEmpty else {
            if case .promoted(_, let product) = effect {
                do {
                    try engine.queuePromotion(queue, productID: product.productID)
                } catch {
                    logger.error("Failed to keep the promotion of \(product.productID) for \(queue.app): \(error.message)",
                                 id: .storageFailure)
                }
            }
            output.unobserved.append(queue)
            return
        }
        var current: [UInt64] = []
        for token in tokens {
            // Versions 2 to 4 encode pushes alike (signed) but for a promoted product: one frame serves them.
            if let version = sessions[token]?.version, version < ProtocolVersion.signedData {
                routeToOlderClient(message, token: token, version: version, into: &output)
            } else {
                current.append(token)
            }
        }
        guard !current.isEmpty else { return }
        switch message {
        case .promotedPurchase:
            // Its ProductRecord has the group's display name from version 4 on: each in its own version.
            for token in current {
                output.append(token, Frame.encode(body: message.encode(version: sessions[token]?.version ?? ProtocolVersion.current)))
            }
            return
        case .updated(let records), .removed(let records):
            // Signed once the unit of work is committed, on the signer's thread (Server.signingJob).
            if records.contains(where: PaymentQueueEngine.isSignable) {
                output.appendToSign(message, to: current)
                return
            }
        default:
            break
        }
        let frame = Frame.encode(body: message.encode())
        for token in current { output.append(token, frame) }
    }

    /// A push for a client of protocol version 1 (docs/protocol.md §13), encoded in its version,
    /// unsigned (version 1 has no signed data). A fleet's announcement of another
    /// host's purchase (an `updated` record already finished) is left out: version 1 knows no
    /// such record, and its StoreKit 1 clients would take it for a purchase to deliver.
    func routeToOlderClient(_ message: ServerMessage, token: UInt64, version: UInt16, into output: inout UnitOutput) {
        var message = message
        if case .updated(let records) = message {
            let unfinished = records.filter { !$0.finished }
            guard !unfinished.isEmpty else { return }
            message = .updated(unfinished)
        }
        output.append(token, Frame.encode(body: message.encode(version: version)))
    }

    /// Starts the `ObserverUnit=` of apps whose queues got updates while no observer was connected.
    func activateObservers(for queues: [QueueKey]) {
        guard !queues.isEmpty else { return }
        let now = Monotonic.milliseconds()
        for queue in Set(queues) where observers[queue]?.isEmpty ?? true {
            guard let unit = configuration.app(queue.app)?.observerUnit else { continue }
            // Root and system accounts get no observer unit (the polkit rule would refuse it too).
            guard observerUIDs.contains(queue.uid) else { continue }
            activator.request(queue, unit: unit, now: now, interval: configuration.observerActivationInterval.milliseconds)
        }
    }

    /// One journal entry per record, written once the change is durable.
    func journal(_ records: [TransactionRecord], into output: inout UnitOutput, id: MessageID,
                         _ what: @escaping (TransactionRecord) -> String) {
        guard logger.maximumPriority >= .info else { return }
        let logger = self.logger
        output.journal.append {
            for record in records {
                logger.info("Transaction \(record.id) of \(record.app) for uid \(record.uid) \(what(record))",
                            id: id, fields: Self.fields(record))
            }
        }
    }

    static func fields(_ record: TransactionRecord) -> [(String, String)] {
        [("STOREKIT_TRANSACTION_ID", String(record.id)), ("STOREKIT_APP", record.app),
         ("STOREKIT_UID", String(record.uid)), ("STOREKIT_STATE", record.finished ? "finished" : record.state.name),
         ("STOREKIT_PRODUCT", record.productID), ("STOREKIT_SEQUENCE", String(record.sequence))]
    }
}
