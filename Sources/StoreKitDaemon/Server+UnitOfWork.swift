import CPosix
import StoreKitEngine
import StoreKitLedger
import StoreKitPosix
import StoreKitSigning
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

// Executing what was received in one turn as one unit of work (group commit), with a savepoint
// per request only when a request fails, and handing its output to the durability gate.

extension Server {
    /// What a unit of work tells the world once it is durable: frames in execution order,
    /// journal entries, and queues that got updates with no observer connected.
    struct UnitOutput {
        private(set) var frames: [(token: UInt64, frame: [UInt8])] = []
        /// Bytes of `frames` per session token.
        private(set) var bytes: [UInt64: Int] = [:]
        var subscriptions: [(QueueKey, UInt64)] = []
        var journal: [() -> Void] = []
        /// Queues that received an update with no observer connected.
        var unobserved: [QueueKey] = []

        mutating func reply(_ session: Session, _ message: ServerMessage) {
            append(session.token, Frame.encode(body: message.encode(version: session.version)))
        }

        /// Descriptors passed with frames (`openContent`), by the frame's index: each goes with
        /// its frame's first byte (SCM_RIGHTS) and is closed here once sent or dropped.
        private(set) var descriptors: [Int: PassedDescriptor] = [:]

        /// Bytes sent right after a frame's, by the frame's index: a kept receipt, shared with
        /// where it is kept rather than copied into each reply's frame.
        private(set) var tails: [Int: [UInt8]] = [:]

        /// Queues the reply `.receipt(requestID:data:)` for the session `token` without copying `data`.
        mutating func replyReceipt(_ token: UInt64, requestID: UInt32, data: [UInt8]) {
            tails[frames.count] = data
            append(token, Frame.receiptPrefix(requestID: requestID, dataCount: data.count))
            bytes[token, default: 0] += data.count
        }

        /// Queues `message` for `session` with `descriptor` attached to its first byte.
        mutating func reply(_ session: Session, _ message: ServerMessage, passing descriptor: PassedDescriptor) {
            descriptors[frames.count] = descriptor
            reply(session, message)
        }

        mutating func append(_ token: UInt64, _ frame: [UInt8]) {
            frames.append((token, frame))
            bytes[token, default: 0] += frame.count
        }

        /// Pushes whose transactions are signed once the unit of work is committed (`deliver`),
        /// mostly on the `Signer`'s thread. `frames` holds their unsigned encodings until then, at
        /// `indices`.
        private(set) var pendingSignatures: [(indices: [Int], message: ServerMessage)] = []

        /// Queues `message` (an `updated` or `removed` push) for `tokens`, to be signed later.
        mutating func appendToSign(_ message: ServerMessage, to tokens: some Sequence<UInt64>) {
            let frame = Frame.encode(body: message.encode())
            var indices: [Int] = []
            for token in tokens {
                indices.append(frames.count)
                append(token, frame)
            }
            pendingSignatures.append((indices, message))
        }

        /// The pushes and pages to sign; their frames stay unsigned until `replaceFrames`.
        mutating func takePendingSignatures() -> [(indices: [Int], message: ServerMessage)] {
            defer { pendingSignatures.removeAll() }
            return pendingSignatures
        }

        /// Receipts to sign once the unit of work is committed, on the `Signer`'s threads; their
        /// reply frames are empty in `frames` until then.
        private(set) var pendingReceipts: [Signer.Receipt] = []

        /// Queues the reply to the `receipt` request of the session `token`: `receipt`, signed later.
        mutating func appendReceiptToSign(_ token: UInt64, requestID: UInt32, _ receipt: AppReceipt,
                                          queue: QueueKey, sequence: UInt64) {
            pendingReceipts.append(Signer.Receipt(index: frames.count, requestID: requestID, receipt: receipt,
                                                  queue: queue, sequence: sequence))
            append(token, [])
        }

        mutating func takePendingReceipts() -> [Signer.Receipt] {
            defer { pendingReceipts.removeAll() }
            return pendingReceipts
        }

        /// Puts each signed frame at its indices, in place of the unsigned one; returns how many
        /// bytes each session's output grew.
        mutating func replaceFrames(_ signed: [(indices: [Int], frame: [UInt8])]) -> [UInt64: Int] {
            var growth: [UInt64: Int] = [:]
            for (indices, frame) in signed {
                for index in indices {
                    let token = frames[index].token
                    let delta = frame.count - frames[index].frame.count
                    bytes[token, default: 0] += delta
                    growth[token, default: 0] += delta
                    frames[index].frame = frame
                }
            }
            return growth
        }

        /// The parts of this output for the durability gate: one per uid (`laneOf` a frame's
        /// session; nil for a session gone), frames and pushes to sign in their order. Journal
        /// entries and observer starts go with the first part. A unit of one uid is one part.
        func parts(laneOf: (UInt64) -> UInt32?) -> [(lane: UInt32?, output: UnitOutput)] {
            let frameLanes = frames.map { laneOf($0.token) }
            guard let first = frameLanes.first else {
                return journal.isEmpty && unobserved.isEmpty ? [] : [(nil, self)]
            }
            guard frameLanes.contains(where: { $0 != first }) else { return [(first, self)] }
            var order: [UInt32?] = []
            var parts: [UInt32?: UnitOutput] = [:]
            var moved: [(lane: UInt32?, index: Int)] = []   // where each frame went
            moved.reserveCapacity(frames.count)
            for ((token, frame), lane) in zip(frames, frameLanes) {
                if parts[lane] == nil {
                    order.append(lane)
                    parts[lane] = UnitOutput()
                }
                moved.append((lane, parts[lane]!.frames.count))
                if let descriptor = descriptors[moved.count - 1] { parts[lane]!.descriptors[parts[lane]!.frames.count] = descriptor }
                if let tail = tails[moved.count - 1] {
                    parts[lane]!.tails[parts[lane]!.frames.count] = tail
                    parts[lane]!.bytes[token, default: 0] += tail.count
                }
                parts[lane]!.append(token, frame)
            }
            for (indices, message) in pendingSignatures {
                var split: [UInt32?: [Int]] = [:]
                var splitOrder: [UInt32?] = []
                for index in indices {
                    let (lane, newIndex) = moved[index]
                    if split[lane] == nil { splitOrder.append(lane) }
                    split[lane, default: []].append(newIndex)
                }
                for lane in splitOrder { parts[lane]!.pendingSignatures.append((split[lane]!, message)) }
            }
            for var receipt in pendingReceipts {
                let (lane, newIndex) = moved[receipt.index]
                receipt.index = newIndex
                parts[lane]!.pendingReceipts.append(receipt)
            }
            parts[first]!.journal = journal
            parts[first]!.unobserved = unobserved
            return order.map { ($0, parts[$0]!) }
        }

        /// Drops the frames from `index` on (a request undone in its savepoint).
        mutating func removeFrames(from index: Int) {
            for (offset, (token, frame)) in frames[index...].enumerated() {
                bytes[token, default: 0] -= frame.count + (tails[index + offset]?.count ?? 0)
            }
            tails = tails.filter { $0.key < index }
            frames.removeSubrange(index...)
            pendingSignatures.removeAll { $0.indices.contains { $0 >= index } }
            pendingReceipts.removeAll { $0.index >= index }
            descriptors = descriptors.filter { $0.key < index }
        }
    }

    /// Requests of one uid in one unit of work, at most: a uid that pipelines thousands of
    /// requests cannot fill a unit and make everyone else wait for it (the rest go in the next).
    /// Measured with the bench's noisy-neighbour figure: 64 gave the victim a median of 10× its
    /// latency alone, 16 about 4×, 8 about 3× but cost a single uid's 100 clients a fifth of
    /// their throughput (a unit per 8 requests).
    static let fairShare = 16

    /// What a request costs of its uid's share of a unit of work, where a purchase or a finish
    /// costs 1: a request whose work on the serving loop grows with the queue's data (a page of
    /// history or of unfinished transactions and its payloads, the subscription statuses and the
    /// app transaction, signed there) costs half a share, a receipt a whole one, so a unit takes
    /// at most two of the first or one receipt per uid, and a uid flooding them holds everyone
    /// else's requests back by that much a turn, not by sixteen such requests.
    static func cost(of message: ClientMessage) -> Int {
        switch message {
        case .receipt: fairShare   // up to megabytes to copy out, and its purchases read when the queue changed
        case .history, .unfinished, .subscriptionStatus, .appTransaction: fairShare / 2
        default: 1
        }
    }

    /// A receipt or a page waits while heavy signing work of its uid (a receipt, pages of many
    /// signatures) is still being done: a uid's heavy requests are signed one unit at a time, on
    /// the signers' heavy lane, and the other uids' pushes keep a thread.
    func waitsForHeavyWork(_ message: ClientMessage, of uid: UInt32) -> Bool {
        switch message {
        case .receipt, .history, .unfinished: heavyJobsPerUID[uid] != nil
        default: false
        }
    }

    /// Whether `takeFairShare` would take anything: some uid's first waiting request is not
    /// waiting for its uid's heavy signing work. (Otherwise the loop sleeps until a signer wakes it.)
    var hasRunnableRequests: Bool {
        var seen = Set<UInt32>()
        for (session, message) in received where seen.insert(session.peer.uid).inserted {
            if !waitsForHeavyWork(message, of: session.peer.uid) { return true }
        }
        return false
    }

    /// The next unit's requests: each uid's, in the order received, while they fit its share
    /// (`fairShare`, counted by `cost(of:)`; a uid's first always goes); the rest stay in
    /// `received`, in order.
    func takeFairShare() -> [(Session, ClientMessage)] {
        var taken: [UInt32: Int] = [:]
        var full = Set<UInt32>()
        var batch: [(Session, ClientMessage)] = []
        var rest: [(Session, ClientMessage)] = []
        batch.reserveCapacity(received.count)
        for entry in received {
            let uid = entry.0.peer.uid
            let cost = Self.cost(of: entry.1)
            let spent = taken[uid, default: 0]
            if !full.contains(uid), !waitsForHeavyWork(entry.1, of: uid), spent == 0 || spent + cost <= Self.fairShare {
                taken[uid] = spent + cost
                batch.append(entry)
                if entry.0.kind == .client {
                    queuedPerUID[uid, default: 0] -= 1
                    if queuedPerUID[uid] == 0 { queuedPerUID[uid] = nil }
                }
            } else {
                full.insert(uid)   // its later requests wait too: a uid's requests keep their order
                rest.append(entry)
            }
        }
        received = rest
        return batch
    }

    /// Whether `session`'s output (queued, in the gate, and made by this unit) is at
    /// `OutputHighWaterMark=`: then its next requests wait until it has read its output.
    func isOverOutputMark(_ session: Session, _ output: UnitOutput) -> Bool {
        session.queuedOutput + (output.bytes[session.token] ?? 0) >= configuration.outputHighWaterMark
    }

    func executeReceived() {
        let fireScheduled = writesStoppedReason == nil && scheduledEventDue
        let familiesDue = writesStoppedReason == nil && familiesDueAt.map { $0 <= Monotonic.milliseconds() } ?? false
        guard !received.isEmpty || fireScheduled || fleetChangesDue || familiesDue else { return }
        let fleetChangesWereDue = fleetChangesDue
        var batch = takeFairShare()
        // Every waiting request waits for its uid's heavy signing work: no unit of work now.
        guard !batch.isEmpty || fireScheduled || fleetChangesDue || familiesDue else { return }
        // Notifications that came with the unit's answers wait in libpq's buffer, where the
        // socket's readiness no longer shows them: read once the unit is over.
        defer { hearBufferedFleet() }
        // Requests of sessions over their output mark wait (in order) until the session reads.
        var held: [(Session, ClientMessage)] = []
        var heldTokens = Set<UInt64>()
        func holds(_ session: Session, _ message: ClientMessage, _ output: UnitOutput) -> Bool {
            guard heldTokens.contains(session.token) || session.heldForOutput || isOverOutputMark(session, output) else { return false }
            heldTokens.insert(session.token)
            held.append((session, message))
            return true
        }
        defer {
            // Executed requests are answered; held ones stay in flight.
            for (session, _) in batch { session.inFlight -= 1 }
            for (session, message) in held {
                session.inFlight += 1
                session.heldRequests.append(message)
                if !session.heldForOutput {
                    session.heldForOutput = true
                    updateInterest(session)
                }
            }
        }
        var output = UnitOutput()
        var restoring = Set<QueueKey>()
        let batchStart = Monotonic.microseconds()
        // Control commands (backup, integrity check, …) may read the database on another
        // connection: everything acknowledged before them is committed to SQLite first.
        let control = batch.contains(where: { if case .control = $0.1 { true } else { false } })
        if control && !ledger.save() {
            // A backup or a migration reads the database on another connection: without that
            // save it would miss acknowledged changes. Refused; the other requests (and control
            // commands, which read through this connection) go on.
            var refusals = UnitOutput()
            let refusal = "the store could not save to \(ledger.path) first (see the journal); try again"
            batch.removeAll { session, message in
                guard case .control(let id, let command, _) = message, command == "backup" || command == "migrate" else { return false }
                refusals.reply(session, .controlResult(requestID: id, code: .storageFailure, message: refusal,
                                                       json: JSONValue.object([("error", .string(refusal))]).serialized()))
                return true
            }
            deliver(refusals)
        }
        // A scheduled event that cannot be stored now is retried at the next turn.
        func fireDueEvents(into output: inout UnitOutput) {
            guard fireScheduled else { return }
            _ = isolated(&output, onFailure: { _, _ in }) { (output: inout UnitOutput) throws(LedgerError) in
                for effect in try engine.fireDueEvents() { route(effect, into: &output) }
            }
        }
        // The families' copies, once they changed: a failure tries again a second later.
        func applyFamilies(into output: inout UnitOutput) {
            guard familiesDue else { return }
            let applied = isolated(&output, onFailure: { _, _ in }) { (output: inout UnitOutput) throws(LedgerError) in
                guard let effects = try engine.applyFamilies() else { return }
                for effect in effects { route(effect, into: &output) }
                let shared = effects.reduce(0) { if case .updated(_, let records) = $1 { $0 + records.count } else { $0 } }
                let revoked = Set(effects.compactMap { if case .revoked(let queue, _) = $0 { queue } else { nil } }).count
                let families = engine.families.groups.count
                let logger = self.logger
                output.journal.append {
                    logger.notice("Families applied (\(families) famil\(families == 1 ? "y" : "ies")): \(shared) purchases shared, "
                                  + "\(revoked) queues lost shared purchases", id: .reloaded)
                }
            }
            familiesDueAt = applied ? nil : Monotonic.milliseconds() + 1000
        }
        let plan = ledger.readsAhead ? readAhead(for: batch) : ReadAhead()
        do throws(LedgerError) {
            try ledger.begin(readingAhead: plan)
            applyFamilies(into: &output)
            fireDueEvents(into: &output)
            readChangesElsewhere(into: &output)
            // Optimistically without a savepoint per request (two statements each): a failure
            // is rare (a full disk), and then the batch is undone and run again, each request in
            // its own savepoint, so that only the failing one is refused. Control commands may
            // act outside the store, so a batch with one never runs twice.
            var optimistic = !control
            var committed = false
            // Hand the fsync to the sync thread only when there is other work to do meanwhile
            // (requests waiting, earlier units of work still syncing, or pushes to sign: the
            // signer signs while the disk syncs).
            func commit() throws(LedgerError) {
                try ledger.commit(deferSync: !output.pendingSignatures.isEmpty || !gate.isEmpty || epoll.hasReadyEvents())
            }
            if optimistic {
                var commitFailure: LedgerError?
                do throws(LedgerError) {
                    for (session, message) in batch where sessions[session.token] != nil {
                        if holds(session, message, output) { continue }
                        try execute(message, for: session, into: &output, restoring: &restoring)
                    }
                    if ledger.readsAhead {
                        // The deferred writes go with the COMMIT, in one round trip: one that
                        // fails there leaves the unit uncommitted, and it runs again below; a
                        // COMMIT that failed itself (or a lost connection) is the unit's failure.
                        do {
                            try commit()
                        } catch {
                            if !error.beforeCommit { commitFailure = error }
                            throw error
                        }
                        committed = true
                    } else {
                        try ledger.flushWrites()
                    }
                } catch {
                    if let commitFailure { throw commitFailure }
                    logger.debug("A request of a batch failed (\(error.message)); running each in a savepoint")
                    ledger.rollback()
                    undoSubscriptions(output.subscriptions)
                    output = UnitOutput()
                    restoring.removeAll()
                    held.removeAll()
                    heldTokens.removeAll()
                    fleetChangesDue = fleetChangesWereDue
                    try ledger.begin(readingAhead: plan)
                    optimistic = false
                    if familiesDue { familiesDueAt = 0 }
                    applyFamilies(into: &output)
                    fireDueEvents(into: &output)
                    readChangesElsewhere(into: &output)
                }
            }
            for (session, message) in batch where !optimistic && sessions[session.token] != nil {
                if holds(session, message, output) { continue }
                // Each request in its own savepoint: one that fails (e.g. a full disk refusing a new
                // row) is answered with its error; the others in the batch still commit.
                _ = isolated(&output, onFailure: { error, output in
                    output.reply(session, .result(message.requestID ?? 0, ledger.resultCode(for: error),
                                                  "the store could not record this: \(error.message)"))
                }) { (output: inout UnitOutput) throws(LedgerError) in
                    try execute(message, for: session, into: &output, restoring: &restoring)
                }
            }
            let executed = Monotonic.microseconds()
            if !committed { try commit() }
            statusStale = true
            if logger.maximumPriority >= .debug {
                let now = Monotonic.microseconds()
                logger.debug("Committed \(batch.count) requests: executed in \(executed - batchStart) µs, committed in \(now - executed) µs")
            }
        } catch {
            ledger.rollback()
            undoSubscriptions(output.subscriptions)
            fleetChangesDue = fleetChangesWereDue && ledger.unreachable == nil
            if familiesDue { familiesDueAt = Monotonic.milliseconds() + 1000 }
            statusStale = true   // STATUS= may now say the database is unreachable
            let code = ledger.resultCode(for: error)
            if ledger.isPartOfOutage(error) {
                logger.debug("Refused \(batch.count) requests: \(ledger.path) is unreachable")
            } else {
                logger.error("Failed to commit \(batch.count) requests to \(ledger.path): \(error.message)",
                             id: .storageFailure)
            }
            var refusals = UnitOutput()
            for (session, message) in batch where sessions[session.token] != nil && !heldTokens.contains(session.token) {
                refusals.reply(session, .result(message.requestID ?? 0, code, "the store could not record this: \(error.message)"))
            }
            deliver(refusals)
            return
        }
        deliver(output)
    }

    /// What the batch's payments and finishes will read, for a ledger that reads it in one round
    /// trip with the unit's `BEGIN` (PostgreSQL's).
    func readAhead(for batch: [(Session, ClientMessage)]) -> ReadAhead {
        var plan = ReadAhead()
        for (session, message) in batch where session.kind == .client {
            let queue = QueueKey(uid: session.peer.uid, app: session.app ?? "")
            switch message {
            case .addPayment(let payment): plan.payments.append(.init(queue: queue, key: payment.key.isEmpty ? nil : payment.key))
            case .finish(_, let transactionID): plan.finishes.append(.init(queue: queue, transactionID: transactionID))
            default: break
            }
        }
        return plan
    }

    /// Forgets observer registrations made by requests that were undone.
    func undoSubscriptions(_ subscriptions: some Sequence<(QueueKey, UInt64)>) {
        for (key, token) in subscriptions {
            observers[key]?.remove(token)
            sessions[token]?.subscribed = false
        }
    }

    /// Hands a unit of work's output to the durability gate, one part per uid: a part reaches
    /// clients now if the commit log is already synced past it and it has nothing to sign, else
    /// when the sync thread and the signer get there. Each uid's pushes are signed apart, so
    /// one uid's many signatures do not hold back another's answers in the same unit.
    func deliver(_ output: UnitOutput) {
        gate.beginUnit()
        for (lane, part) in output.parts(laneOf: { sessions[$0]?.peer.uid }) {
            var part = part
            var ticket: UInt64?
            if let job = signingJob(for: &part) {
                if !job.isHeavy && job.signatureCount <= Self.signedOnTheLoop {
                    // A few signatures cost less here than waking the signer's thread (the disk
                    // syncs meanwhile, on its own thread).
                    apply(Signer.sign(job), to: &part)
                } else {
                    signer.submit(job)
                    ticket = job.ticket
                    if job.isHeavy {
                        // The uid's next requests wait for it (`takeFairShare`), not everyone's.
                        heavyJobs[job.ticket] = lane
                        if let lane { heavyJobsPerUID[lane, default: 0] += 1 }
                    } else {
                        signingJobs += 1
                    }
                }
            }
            for (token, count) in part.bytes { sessions[token]?.outputInGate += count }
            for ready in gate.enter(part, lane: lane, lsn: ledger.committedLSN, durable: ledger.durableLSN, signing: ticket) {
                release(ready)
            }
        }
    }

    /// Releases the outputs whose units of work the sync thread made durable.
    func releaseDurable() {
        guard fatalFailure == nil, !gate.isEmpty else { return }
        for ready in gate.release(durable: ledger.durableLSN) { release(ready) }
    }

    /// Runs `body` in a savepoint. On a store error its changes, frames, journal entries and
    /// observer registrations are undone and `onFailure` answers for it; true when it succeeded.
    func isolated(
        _ output: inout UnitOutput, onFailure: (LedgerError, inout UnitOutput) -> Void,
        _ body: (inout UnitOutput) throws(LedgerError) -> Void
    ) -> Bool {
        let marks = (output.frames.count, output.subscriptions.count, output.journal.count, output.unobserved.count)
        do {
            try ledger.savepoint()
            try body(&output)
            try ledger.releaseSavepoint()
            return true
        } catch {
            ledger.rollbackToSavepoint()
            undoSubscriptions(output.subscriptions[marks.1...])
            output.removeFrames(from: marks.0)
            output.subscriptions.removeSubrange(marks.1...)
            output.journal.removeSubrange(marks.2...)
            output.unobserved.removeSubrange(marks.3...)
            if ledger.isPartOfOutage(error) {
                logger.debug("Refused a request: \(ledger.path) is unreachable")
            } else {
                logger.error("Failed to record a request in \(ledger.path): \(error.message)", id: .storageFailure)
            }
            onFailure(error, &output)
            return false
        }
    }

    var mutatingRefusal: String? { writesStoppedReason.map { "writes are stopped: \($0)" } }

    /// False, after answering `storageFailure`, when the integrity check has stopped writes.
    func writesAllowed(_ requestID: UInt32, _ session: Session, _ output: inout UnitOutput) -> Bool {
        guard let refusal = mutatingRefusal else { return true }
        output.reply(session, .result(requestID, .storageFailure, refusal))
        return false
    }
}
