import CPosix
import StoreKitEngine
import StoreKitLedger
import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

// Accepting connections under the limits, closing them, the FD store, and sending queued output.

extension Server {
    /// Adopts a connection kept in the FD store across a restart: same app, same observing state,
    /// no new snapshot (the client already has it), so nothing is delivered twice.
    func resume(_ socket: consuming Socket, name: String) {
        guard let (observing, app) = SessionStoreName.parse(name), let peer = try? socket.peerCredentials(),
              engine.isRegistered(app: app) else {
            logger.warning("Dropping stored session '\(name)': unknown app or peer gone")
            notifier.removeStoredFileDescriptor(name: name)
            try? socket.close()   // a peer that is gone: what close says of it does not matter
            return
        }
        let fd = socket.rawValue
        let session = Session(token: nextToken, socket: socket, kind: .client, peer: peer, maximumFrameSize: configuration.maxFrameSize,
                              account: outputAccount)
        nextToken += 1
        session.app = app
        session.storeName = name
        sessions[session.token] = session
        count(session, +1)
        do {
            try epoll.add(fd, events: [.readable, .peerClosed], token: session.token)
        } catch {
            close(session)
            return
        }
        if observing {
            session.subscribed = true
            observers[QueueKey(uid: peer.uid, app: app), default: []].insert(session.token)
        }
        logger.info("Resumed \(observing ? "observer" : "connection") of \(app) for uid \(peer.uid) from the FD store",
                    id: .recovery, fields: [("STOREKIT_APP", app), ("STOREKIT_UID", String(peer.uid))])
        // Bytes that arrived while the daemon was down are waiting in the socket.
        readAvailable(session)
    }

    /// Puts (or re-puts, under a name with the current observing state) a client session in the FD store.
    func keepInFDStore(_ session: Session) {
        guard session.kind == .client, let app = session.app, notifier.enabled else { return }
        if let old = session.storeName { notifier.removeStoredFileDescriptor(name: old) }
        session.storeName = SessionStoreName.make(unique: "\(storeRun)-\(session.token)", observing: session.subscribed, app: app)
        if let name = session.storeName { notifier.storeFileDescriptor(session.fd, name: name) }
    }


    func acceptAll(_ listener: Listener) {
        while true {
            let socket: Socket
            do {
                guard let accepted = try listener.accept() else { return }
                socket = accepted
            } catch {
                logger.warning("Failed to accept on the \(listener.kind.rawValue) socket: \(error)")
                return
            }
            guard let peer = try? socket.peerCredentials() else {
                try? socket.close()   // the peer left before it could be identified
                continue
            }
            let session = Session(token: nextToken, socket: socket, kind: listener.kind, peer: peer,
                                  maximumFrameSize: configuration.maxFrameSize, account: outputAccount)
            nextToken += 1
            sessions[session.token] = session
            count(session, +1)
            statusStale = true
            do {
                try epoll.add(session.fd, events: [.readable, .peerClosed], token: session.token)
            } catch {
                logger.warning("Failed to watch connection: \(error)")
                close(session)
                continue
            }
            // Control connections have capacity of their own: clients filling theirs cannot lock
            // administrators out. Who may control is checked before anything is counted against it.
            switch listener.kind {
            case .control:
                if !access.mayControl(peer) {
                    refuse(session, .permissionDenied, "uid \(peer.uid) may not use the control socket")
                } else if controlConnections > configuration.maxControlConnections {
                    refuse(session, .limitExceeded, "too many control connections (\(configuration.maxControlConnections))")
                }
            case .client:
                if clientConnections > configuration.maxConnections {
                    refuse(session, .limitExceeded, "too many connections (\(configuration.maxConnections))")
                } else if connectionsPerUID[peer.uid, default: 0] > configuration.maxConnectionsPerUID {
                    refuse(session, .limitExceeded, "too many connections for uid \(peer.uid) (\(configuration.maxConnectionsPerUID))")
                }
            }
        }
    }

    /// Sends a final error, logs the refusal and closes the connection once the error is written.
    func refuse(_ session: Session, _ code: ResultCode, _ message: String, requestID: UInt32 = 0,
                        id: MessageID = .refused) {
        guard !session.closeAfterSending else { return }
        if sayRefusal(of: session.peer.uid) {
            logger.warning("Refused \(session.kind.rawValue) peer pid \(session.peer.pid) uid \(session.peer.uid): \(message)",
                           id: id, fields: [("STOREKIT_UID", String(session.peer.uid)), ("STOREKIT_APP", session.app ?? ""),
                                            ("STOREKIT_REFUSAL", code.name)])
        }
        session.enqueue(ServerMessage.result(requestID, code, message))
        session.closeAfterSending = true
        queueForSending(session)
    }

    /// Whether a refusal concerning `uid` is written (at most `WarningRateLimit.burst` per uid in
    /// 10 s); the first one written after a window with left-out ones says how many.
    func sayRefusal(of uid: UInt32) -> Bool {
        switch refusalLog.admit(uid: uid, now: Monotonic.milliseconds()) {
        case .suppress:
            return false
        case .say(let suppressed):
            if suppressed > 0 { saySuppressed(uid: uid, count: suppressed) }
            return true
        }
    }

    func saySuppressed(uid: UInt32, count: Int) {
        logger.warning("Left out \(count) refusals of uid \(uid) in \(refusalLog.window / 1000) s (at most \(refusalLog.burst) are written)",
                       id: .refused, fields: [("STOREKIT_UID", String(uid))])
    }

    func close(_ session: Session, keepStored: Bool = false) {
        guard sessions.removeValue(forKey: session.token) != nil else { return }
        statusStale = true
        if let name = session.storeName, !keepStored { notifier.removeStoredFileDescriptor(name: name) }
        epoll.remove(session.fd)
        if let error = session.closeSocket() {
            logger.warning("Closing the connection of uid \(session.peer.uid) (pid \(session.peer.pid)) failed: \(error)")
        }
        session.discardOutput()
        count(session, -1)
        if session.subscribed, let app = session.app {
            let key = QueueKey(uid: session.peer.uid, app: app)
            observers[key]?.remove(session.token)
            if observers[key]?.isEmpty == true { observers[key] = nil }
            logger.info("Observer of \(app) for uid \(session.peer.uid) disconnected", id: .observerDisconnected,
                        fields: [("STOREKIT_APP", app), ("STOREKIT_UID", String(session.peer.uid))])
        }
    }

    /// Connections are counted per socket, and client connections per uid.
    func count(_ session: Session, _ delta: Int) {
        switch session.kind {
        case .control:
            controlConnections += delta
        case .client:
            clientConnections += delta
            let count = connectionsPerUID[session.peer.uid, default: 0] + delta
            connectionsPerUID[session.peer.uid] = count > 0 ? count : nil
        }
    }

    func queueForSending(_ session: Session) {
        sessionsToSend.append(session)
    }

    /// What epoll watches for a session: input unless it is held back (`MaxRequestsInFlight=`
    /// or `OutputHighWaterMark=`), output while some is queued, and the peer closing.
    func updateInterest(_ session: Session) {
        var events: Epoll.Events = [.peerClosed]
        if !session.backlogged && !session.heldForOutput && session.pacedUntil == nil { events.insert(.readable) }
        if session.pollingWritable { events.insert(.writable) }
        try? epoll.modify(session.fd, events: events, token: session.token)
    }

    /// Writes what is queued for the sessions that got output. A session that read enough of its
    /// output gets its held requests back; one that holds twice `OutputHighWaterMark=` unread is
    /// cut off; while all sessions together hold more than `OutputBudget=`, the ones holding the
    /// most are cut off.
    func sendQueuedOutput() {
        let queued = sessionsToSend
        sessionsToSend.removeAll(keepingCapacity: true)
        let mark = configuration.outputHighWaterMark
        for session in queued where sessions[session.token] != nil {
            guard session.send() else {
                close(session)
                continue
            }
            if session.heldForOutput && session.queuedOutput < mark / 2 { releaseHeldRequests(of: session) }
            if session.pendingOutput == 0 {
                if session.closeAfterSending {
                    close(session)
                } else if session.pollingWritable {
                    session.pollingWritable = false
                    updateInterest(session)
                }
            } else if session.pendingOutput > 2 * mark {
                cutOff(session, "it stopped reading (\(session.pendingOutput) bytes unread, OutputHighWaterMark= is \(mark))")
            } else if !session.pollingWritable {
                session.pollingWritable = true
                updateInterest(session)
            }
        }
        if outputAccount.queued > configuration.outputBudget { keepOutputBudget() }
    }

    /// Gives a session whose output drained the requests held back for it, first in line.
    func releaseHeldRequests(of session: Session) {
        session.heldForOutput = false
        received.insert(contentsOf: session.heldRequests.map { (session, $0) }, at: 0)
        if session.kind == .client { queuedPerUID[session.peer.uid, default: 0] += session.heldRequests.count }
        session.heldRequests.removeAll()
        updateInterest(session)
    }

    /// Cuts off sessions until all together hold less than `OutputBudget=`: those of the uid that
    /// holds the most unread output first (its largest first), then the next uid's. Counted by
    /// uid, not by connection, so that a uid spreading its unread output over many small
    /// connections cannot get another uid's one slow reader cut in its place.
    func keepOutputBudget() {
        let budget = configuration.outputBudget
        var byUID: [UInt32: (held: Int, sessions: [Session])] = [:]
        for session in sessions.values where session.pendingOutput > 0 {
            byUID[session.peer.uid, default: (0, [])].held += session.pendingOutput
            byUID[session.peer.uid, default: (0, [])].sessions.append(session)
        }
        let heaviestFirst = byUID.sorted { $0.value.held != $1.value.held ? $0.value.held > $1.value.held : $0.key < $1.key }
        for (uid, holding) in heaviestFirst {
            for session in holding.sessions.sorted(by: { $0.pendingOutput > $1.pendingOutput }) {
                guard outputAccount.queued > budget else { return }
                cutOff(session, "the daemon's queued output (\(outputAccount.queued) bytes) is over OutputBudget= (\(budget)); "
                       + "uid \(uid) held the most unread (\(holding.held) bytes over \(holding.sessions.count) connections), "
                       + "this connection \(session.pendingOutput) bytes")
            }
        }
    }

    /// Closes a session that does not read, and says so (rate-limited per uid).
    func cutOff(_ session: Session, _ reason: String) {
        if sayRefusal(of: session.peer.uid) {
            logger.warning("Cut off pid \(session.peer.pid) uid \(session.peer.uid): \(reason)", id: .refused,
                           fields: [("STOREKIT_UID", String(session.peer.uid)), ("STOREKIT_REFUSAL", ResultCode.limitExceeded.name)])
        }
        close(session)
    }
}
