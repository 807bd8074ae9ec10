import CPosix
import StoreKitEngine
import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

// Reading and decoding frames, back-pressure (MaxRequestsInFlight=), and the first checks of a
// decoded request before it joins the next unit of work.

extension Server {
    func readAvailable(_ session: Session) {
        var budget = 16
        let inFlightBefore = session.inFlight
        while budget > 0 && !session.closeAfterSending && !session.backlogged && !session.heldForOutput && session.pacedUntil == nil {
            budget -= 1
            let result = readBuffer.withUnsafeMutableBytes { raw in
                Result { () throws(Errno) -> IOResult in try session.read(into: raw) }
            }
            switch result {
            case .success(.transferred(let count)):
                readBuffer.withUnsafeBytes { session.decoder.append(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
                decodeFrames(session)
                // A short read emptied the socket: epoll (level-triggered) reports what comes
                // next, so no second read just to hear EAGAIN.
                if count < readBuffer.count { budget = 0 }
            case .success(.wouldBlock):
                budget = 0
            case .success(.endOfFile), .failure:
                close(session)
                return
            }
        }
        // The deadline is for a client that stalls inside a frame: it restarts whenever a whole
        // frame arrived, and does not run while the session is held back with complete frames.
        if session.decoder.bufferedByteCount == 0 || session.backlogged || session.pacedUntil != nil || session.inFlight > inFlightBefore {
            restartPartialFrameDeadline(session)
        } else if session.partialSince == nil {
            session.partialSince = Monotonic.milliseconds()
        }
    }

    /// After whole frames were taken: a deadline runs only for a frame left half sent, and not
    /// while the session is held back (backlogged or paced) with complete frames buffered.
    func restartPartialFrameDeadline(_ session: Session) {
        let waitsForClient = session.decoder.bufferedByteCount > 0 && !session.backlogged && session.pacedUntil == nil
        session.partialSince = waitsForClient ? Monotonic.milliseconds() : nil
    }

    func decodeFrames(_ session: Session) {
        var ratePassed = false
        do {
            while !session.closeAfterSending {
                // Backpressure: with MaxRequestsInFlight= requests waiting, stop decoding and stop
                // reading (the kernel's socket buffer then holds the client back).
                guard session.inFlight < configuration.maxRequestsInFlight else {
                    pauseReading(session)
                    return
                }
                // Pacing: a uid that used up its requests per second is not read until its bucket
                // refills; the kernel's socket buffer holds it back meanwhile, at no cost here.
                // Checked before the first frame of a pass only: what a client pipelined in one go
                // beyond its bucket is decoded and refused (`rateLimited`), as documented.
                if !ratePassed, session.kind == .client, session.app != nil, session.decoder.bufferedByteCount > 0 {
                    ratePassed = true
                    let now = Monotonic.milliseconds()
                    let rate = configuration.maxRequestsPerUIDPerSecond
                    let left = requestRates.available(uid: session.peer.uid, now: now, perSecond: rate)
                        - Double(queuedPerUID[session.peer.uid] ?? 0)
                    if left < 1 {
                        pace(session, until: RequestRateLimit.resumesAt(left: left, now: now, perSecond: rate))
                        return
                    }
                }
                guard let body = try session.decoder.next() else { return }
                dispatch(session, try ClientMessage.decode(body, version: session.version))
            }
        } catch {
            refuse(session, .malformedRequest, "protocol error: \(error)", id: .protocolError)
        }
    }

    func pace(_ session: Session, until: Int64) {
        guard session.pacedUntil == nil else { return }
        // Not read meanwhile: its frames wait in the kernel's socket buffer.
        session.pacedUntil = until
        paced.append(session)
        updateInterest(session)
    }

    /// Reads paced sessions again, longest paced first, as many of each uid as its bucket has
    /// requests for: a flood is read a quantum of its rate at a time (`RequestRateLimit.resumesAt`,
    /// 5 ms), into one unit of work, neither a request per unit nor bursts that would fill units
    /// of work ahead of everyone else.
    func resumePaced(now: Int64) {
        guard let first = nextPacedResume, first <= now else { return }
        let waiting = paced
        paced.removeAll(keepingCapacity: true)
        let rate = configuration.maxRequestsPerUIDPerSecond
        var granted: [UInt32: Double] = [:]
        for session in waiting where sessions[session.token] != nil && session.pacedUntil != nil {
            let uid = session.peer.uid
            let left = requestRates.available(uid: uid, now: now, perSecond: rate) - granted[uid, default: 0]
                - Double(queuedPerUID[uid] ?? 0)
            guard left >= 1 else {
                session.pacedUntil = RequestRateLimit.resumesAt(left: left, now: now, perSecond: rate)
                paced.append(session)
                continue
            }
            granted[uid, default: 0] += 1
            session.pacedUntil = nil
            decodeFrames(session)
            restartPartialFrameDeadline(session)
            if session.pacedUntil == nil && !session.backlogged { updateInterest(session) }
        }
    }

    /// When the first paced session may be read again.
    var nextPacedResume: Int64? { paced.lazy.compactMap(\.pacedUntil).min() }

    func pauseReading(_ session: Session) {
        guard !session.backlogged else { return }
        session.backlogged = true
        backlog.append(session)
        updateInterest(session)
    }

    /// After a batch is answered, paused sessions decode what they already buffered and read again.
    func resumeBacklog() {
        guard !backlog.isEmpty else { return }
        let paused = backlog
        backlog.removeAll(keepingCapacity: true)
        for session in paused where sessions[session.token] != nil {
            session.backlogged = false
            decodeFrames(session)
            restartPartialFrameDeadline(session)
            if !session.backlogged { updateInterest(session) }
        }
    }

    func dispatch(_ session: Session, _ message: ClientMessage) {
        if case .hello(let version, let app) = message {
            hello(session, version: version, app: app)
            return
        }
        guard session.app != nil else {
            refuse(session, .malformedRequest, "the first message must be hello", requestID: message.requestID ?? 0,
                   id: .protocolError)
            return
        }
        if case .control = message, session.kind != .control {
            refuse(session, .permissionDenied, "control commands are accepted on the control socket only",
                   requestID: message.requestID ?? 0)
            return
        }
        if session.kind == .control, !isControlMessage(message) {
            refuse(session, .permissionDenied, "the control socket takes control commands only",
                   requestID: message.requestID ?? 0)
            return
        }
        if answeredAtOnce(session, message) { return }
        session.inFlight += 1
        received.append((session, message))
        if session.kind == .client { queuedPerUID[session.peer.uid, default: 0] += 1 }
    }

    /// Answers a cheap request (`ping`, `products`) at once, outside any unit of work, when its
    /// session has nothing before it still to answer (so its replies keep their order): it waits
    /// neither behind other uids' work nor on the ledger (products come from the catalogue, so a
    /// PostgreSQL outage does not make them unknown). It still counts against the uid's request
    /// rate. Returns false for every other request, which a unit of work runs.
    func answeredAtOnce(_ session: Session, _ message: ClientMessage) -> Bool {
        guard session.inFlight == 0, session.outputInGate == 0, !session.heldForOutput else { return false }
        let reply: ServerMessage
        switch message {
        case .ping(let id):
            reply = .result(id, .ok)
        case .products(let id, let identifiers) where session.kind == .client:
            let (products, invalid) = engine.products(app: session.app ?? "", identifiers: identifiers)
            reply = .products(requestID: id, products: products, invalidIdentifiers: invalid)
        default:
            return false
        }
        if session.kind == .client,
           !requestRates.admit(uid: session.peer.uid, now: Monotonic.milliseconds(), perSecond: configuration.maxRequestsPerUIDPerSecond) {
            return false   // over its rate: the unit of work refuses it, as any other request
        }
        session.enqueue(reply)
        // Written now, not after the unit of work this turn may still run.
        // What the socket does not take now (or a peer gone) is for the usual sending pass.
        _ = session.send()
        if session.pendingOutput > 0 { queueForSending(session) }
        return true
    }

    func isControlMessage(_ message: ClientMessage) -> Bool {
        switch message {
        case .control, .ping: true
        default: false
        }
    }
}
