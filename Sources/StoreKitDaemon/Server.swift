import CPosix
import Foundation
import Synchronization
import StoreKitEngine
import StoreKitPosix
import StoreKitStore
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

/// The serving loop: one thread, epoll over the listeners, the sessions and a signalfd.
///
/// Group commit falls out of the loop's shape: every request read in one turn is executed in one
/// store unit of work, committed with one fsync, and only then are replies and pushes written.
/// Requests that arrive while a commit is in progress wait in the socket buffers for the next turn.
public final class Server {
    public struct Listener {
        public let fd: Int32
        public let kind: SocketKind
        public init(fd: Int32, kind: SocketKind) {
            self.fd = fd
            self.kind = kind
        }
    }

    /// What the server asks of its owner when SIGHUP arrives: a new configuration and catalogues,
    /// or a message saying why the old ones stay.
    public typealias Reloader = () -> Result<(DaemonConfiguration, [String: Catalog]), ReloadFailure>

    public struct ReloadFailure: Error {
        public let message: String
        public init(_ message: String) { self.message = message }
    }

    private enum Token {
        static let signals: UInt64 = 1
        static let wakeup: UInt64 = 2
        static let firstListener: UInt64 = 3
        static let firstSession: UInt64 = 16
    }

    let engine: PaymentQueueEngine
    private(set) var configuration: DaemonConfiguration
    let logger: Logger
    let notifier: ServiceNotifier
    let access: AccessPolicy
    private let epoll: Epoll
    private let signalFD: Int32
    public let wakeup: WakeupEvent
    private var listeners: [UInt64: Listener] = [:]
    private var sessions: [UInt64: Session] = [:]
    private var observers: [QueueKey: Set<UInt64>] = [:]
    private var connectionsPerUID: [UInt32: Int] = [:]
    private var nextToken = Token.firstSession
    private var pending: [(Session, ClientMessage)] = []
    private var backlog: [Session] = []
    private var dirty: [Session] = []
    private var running = true
    private var readBuffer = [UInt8](repeating: 0, count: 65_536)
    private var lastWatchdog: Int64 = 0
    private var lastStatus = ""
    /// Connections or the store changed since STATUS= was last computed.
    private var statusStale = true
    private var lastHousekeeping: Int64 = 0
    /// Outputs of units of work whose log records are written but not yet synced, in LSN order.
    private var awaitingSync: [(lsn: UInt64, output: BatchOutput)] = []
    private let reloader: Reloader?
    /// Set when the background integrity check failed: mutating requests are refused.
    private var writesStoppedReason: String?
    private let backgroundResults = BackgroundResults()
    private let activator: ObserverActivator
    /// `--enable-test-hooks`: accept `debug-stall` (blocks the loop, to prove the watchdog stops)
    /// and `debug-fail-flushes MS` (the SQLite commits fail for MS ms, to prove what depends on them).
    private let testHooks: Bool

    /// Unique part of FD-store names for this run.
    private let storeRun = String(UInt64(ServiceNotifier.monotonicMilliseconds()), radix: 36)

    public init(
        engine: PaymentQueueEngine, configuration: DaemonConfiguration, listeners: [Listener],
        resumedSessions: [(fd: Int32, name: String)] = [],
        logger: Logger, notifier: ServiceNotifier, reloader: Reloader? = nil, testHooks: Bool = false
    ) throws(Errno) {
        self.testHooks = testHooks
        self.activator = ObserverActivator(logger: logger)
        self.engine = engine
        self.configuration = configuration
        self.logger = logger
        self.notifier = notifier
        self.reloader = reloader
        self.access = AccessPolicy(adminGroup: configuration.adminGroup)
        epoll = try Epoll()
        signalFD = try retryingSyscall { storekit_signalfd() }
        wakeup = try WakeupEvent()
        try epoll.add(signalFD, events: .readable, token: Token.signals)
        try epoll.add(wakeup.fd, events: .readable, token: Token.wakeup)
        for (index, listener) in listeners.enumerated() {
            let token = Token.firstListener + UInt64(index)
            self.listeners[token] = listener
            try epoll.add(listener.fd, events: .readable, token: token)
        }
        for (fd, name) in resumedSessions { resume(fd: fd, name: name) }
    }

    /// Adopts a connection kept in the FD store across a restart: same app, same observing state,
    /// no new snapshot (the client already has it), so nothing is delivered twice.
    private func resume(fd: Int32, name: String) {
        guard let (observing, app) = SessionStoreName.parse(name), let peer = try? PeerCredentials.of(fd),
              engine.isRegistered(app: app) else {
            logger.warning("Dropping stored session '\(name)': unknown app or peer gone")
            notifier.removeStoredFileDescriptor(name: name)
            UnixSocket.close(fd)
            return
        }
        let session = Session(token: nextToken, fd: fd, kind: .client, peer: peer, maximumFrameSize: configuration.maxFrameSize)
        nextToken += 1
        session.app = app
        session.storeName = name
        sessions[session.token] = session
        connectionsPerUID[peer.uid, default: 0] += 1
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
    private func storeInFDStore(_ session: Session) {
        guard session.kind == .client, let app = session.app, notifier.enabled else { return }
        if let old = session.storeName { notifier.removeStoredFileDescriptor(name: old) }
        session.storeName = SessionStoreName.make(unique: "\(storeRun)-\(session.token)", observing: session.subscribed, app: app)
        if let name = session.storeName { notifier.storeFileDescriptor(session.fd, name: name) }
    }

    /// Blocks the signals the loop reads from its signalfd; call before starting any thread.
    public static func blockSignals() {
        _ = storekit_block_signals()
    }

    // MARK: The loop

    /// Serves until SIGTERM/SIGINT, then drains and returns.
    public func run() throws(Errno) {
        notifier.ready(status: statusLine())
        while running {
            // Units of work waiting in the SQLite transaction are committed once the loop has been
            // idle for `idleFlushDelay` ms, or once the transaction is `flushInterval` old.
            // After a failed commit, the next one is tried `flushRetryDelay` ms later (unless the
            // store committed meanwhile by itself, or SQLite dropped the transaction).
            let waitsForFlush = pending.isEmpty && engine.store.hasUnflushedChanges
            if !engine.store.hasUnflushedChanges { flushRetryAt = 0 }
            let flushWait = Int32(clamping: max(Int64(Self.idleFlushDelay), flushRetryAt - ServiceNotifier.monotonicMilliseconds()))
            var events = 0
            try epoll.wait(timeout: pending.isEmpty ? (waitsForFlush ? min(nextTimeout(), flushWait) : nextTimeout()) : 0) {
                token, flags in
                events += 1
                handle(token: token, events: flags)
            }
            if waitsForFlush && events == 0 && pending.isEmpty { flushStore(retrying: true) }
            executePending()
            resumeBacklog()
            flushDirty()
            writeHeldRows()
            if engine.store.flushIsDue(now: ServiceNotifier.monotonicMilliseconds()) { flushStore(retrying: true) }
            housekeeping()
        }
        shutdown()
    }

    /// How long the loop must have had nothing to do before it commits the SQLite transaction
    /// (ms). Not at once: at a steady trickle of requests, many share one SQLite commit.
    static let idleFlushDelay: Int32 = 2

    /// Commits the SQLite transaction (no fsync: its units of work are durable in the commit log).
    /// `retrying`: a commit the loop makes by itself, which waits `flushRetryDelay` ms after a
    /// failed one instead of being tried at every turn. A failure is said when its reason changes
    /// and at most every 10 s otherwise; the first commit after failures is said too.
    @discardableResult
    private func flushStore(retrying: Bool = false) -> Bool {
        let now = ServiceNotifier.monotonicMilliseconds()
        if retrying && now < flushRetryAt { return false }
        do throws(StoreError) {
            if now < flushesFailUntil {
                throw StoreError(.io, path: engine.store.path, message: "commits fail on purpose (debug-fail-flushes)")
            }
            try engine.store.flush()
            flushRetryAt = 0
            if lastFlushFailure != nil {
                lastFlushFailure = nil
                logger.notice("Committed to \(engine.store.path) again")
            }
            return true
        } catch {
            flushRetryAt = now + Self.flushRetryDelay
            if let last = lastFlushFailure, last.message == error.message, now - last.time < 10_000 { return false }
            lastFlushFailure = (now, error.message)
            let retry = "tried again in \(Self.flushRetryDelay) ms, said again in 10 s"
            logger.error("Failed to commit to \(engine.store.path) (the commit log keeps the changes; \(retry)): \(error.message)",
                         id: .storageFailure)
            return false
        }
    }

    /// How long the loop waits after a failed commit before it tries again by itself (ms).
    static let flushRetryDelay: Int64 = 1000
    private var flushRetryAt: Int64 = 0
    /// When the last failure was said, and its reason; nil while commits succeed.
    private var lastFlushFailure: (time: Int64, message: String)?
    /// `debug-fail-flushes MS` (test hooks): every commit of the SQLite transaction fails until then.
    private var flushesFailUntil: Int64 = .min

    /// New rows wait in memory for their finish this long (ms) before they go into the SQLite
    /// transaction (TransactionStore.writeRows), a few at every turn.
    static let heldRowAge: Int64 = 25

    private func writeHeldRows() {
        let now = ServiceNotifier.monotonicMilliseconds()
        do {
            try engine.store.writeRows(heldLongerThan: Self.heldRowAge, now: now)
        } catch {
            // Tried at every turn: said at most every 10 s, not at every turn.
            guard now - lastRowWriteFailure >= 10_000 else { return }
            lastRowWriteFailure = now
            logger.error("Failed to write new transactions into \(engine.store.path) (the commit log keeps them; "
                         + "tried again at every turn, said again in 10 s): \(error.message)", id: .storageFailure)
        }
    }

    private var lastRowWriteFailure: Int64 = .min / 2

    private func nextTimeout() -> Int32 {
        var timeout: Int64 = 1000
        if let interval = notifier.watchdogPingInterval { timeout = min(timeout, interval) }
        if writesStoppedReason == nil, let due = try? engine.millisecondsUntilNextEvent() {
            timeout = min(timeout, max(due, 0))
        }
        return Int32(timeout)
    }

    /// Whether a scheduled store event (renewal, expiry, …) is due now.
    private var scheduledEventDue: Bool {
        guard let due = try? engine.millisecondsUntilNextEvent() else { return false }
        return due <= 0
    }

    private func handle(token: UInt64, events: Epoll.Events) {
        switch token {
        case Token.signals:
            handleSignals()
        case Token.wakeup:
            wakeup.drain()
            releaseSynced()
            handleBackgroundResults()
        default:
            if let listener = listeners[token] {
                acceptAll(listener)
            } else if let session = sessions[token] {
                if events.contains(.readable) || events.contains(.hangup) || events.contains(.error) {
                    readAvailable(session)
                }
                if events.contains(.writable), sessions[token] != nil {
                    markDirty(session)
                }
            }
        }
    }

    private func housekeeping() {
        let now = ServiceNotifier.monotonicMilliseconds()
        if let interval = notifier.watchdogPingInterval, now - lastWatchdog >= interval {
            // Pinged from the loop itself: a loop stuck in a request stops the pings.
            notifier.watchdog()
            lastWatchdog = now
        }
        guard now - lastHousekeeping >= 1000 else { return }
        lastHousekeeping = now
        activator.retryDue(now: now, interval: configuration.observerActivationInterval.milliseconds)
        let deadline = configuration.partialFrameTimeout.milliseconds
        for session in sessions.values {
            if let since = session.partialSince, now - since > deadline {
                refuse(session, .limitExceeded, "partial frame not completed within \(deadline) ms", id: .protocolError)
            }
        }
        // STATUS= counts unfinished transactions with a query: only when someone listens and
        // something changed since the last one.
        guard notifier.enabled, statusStale else { return }
        statusStale = false
        let status = statusLine()
        if status != lastStatus {
            notifier.status(status)
            lastStatus = status
        }
    }

    func statusLine() -> String {
        let observerCount = sessions.values.reduce(0) { $0 + ($1.subscribed ? 1 : 0) }
        let unfinished = (try? engine.store.unfinishedCount()) ?? -1
        var line = "Serving \(sessions.count) connections, \(observerCount) observers, \(unfinished) unfinished transactions"
        if let writesStoppedReason { line += "; WRITES STOPPED: \(writesStoppedReason)" }
        if let low = engine.store.space.lowSpaceReason { line += "; LOW DISK SPACE: \(low)" }
        return line
    }

    // MARK: Signals and background results

    private func handleSignals() {
        while true {
            let signal = storekit_read_signal(signalFD)
            if signal == 0 { return }
            switch signal {
            case SIGTERM, SIGINT:
                logger.notice("Received \(signal == SIGTERM ? "SIGTERM" : "SIGINT"), shutting down")
                running = false
            case SIGHUP:
                reload()
            default:
                break
            }
        }
    }

    private func reload() {
        guard let reloader else { return }
        notifier.reloading()
        switch reloader() {
        case .success(let (newConfiguration, catalogs)):
            configuration = newConfiguration
            engine.replaceCatalogs(catalogs)
            logger.notice("Reloaded configuration: \(catalogs.count) apps", id: .reloaded)
            notifier.ready(status: statusLine())
        case .failure(let failure):
            logger.error("Reload failed, keeping the running configuration: \(failure.message)", id: .reloaded)
            notifier.ready(status: "Reload failed, running the old configuration: \(failure.message)")
        }
    }

    /// Reports from background threads (the integrity check), handed over under a lock.
    final class BackgroundResults: Sendable {
        private let integrityFailure = Mutex<String??>(nil)

        func setIntegrity(_ failure: String?) {
            integrityFailure.withLock { $0 = .some(failure) }
        }

        func takeIntegrity() -> String?? {
            integrityFailure.withLock { value in
                defer { value = nil }
                return value
            }
        }
    }

    /// Runs `PRAGMA integrity_check` on a background thread; a failure stops new writes, loudly.
    public func startIntegrityCheck() {
        let path = engine.store.path
        let results = backgroundResults
        let wakeup = self.wakeup
        Thread.detachNewThread {
            let failure: String?
            do {
                failure = try IntegrityCheck.run(path: path)
            } catch {
                failure = "\(error)"
            }
            results.setIntegrity(failure)
            wakeup.signal()
        }
    }

    private func handleBackgroundResults() {
        if let failure = engine.store.commitLog.syncer?.failure {
            // The kernel may have dropped the pages it could not write: nothing written since the
            // last good sync may be acknowledged, and a retry could report success falsely.
            // Starting over re-reads the log from the disk.
            logger.error("Stopping: \(failure) (\(engine.store.commitLog.databasePath)); \(awaitingSync.count) units of work "
                         + "are not acknowledged", id: .storageFailure)
            exit(EXIT_FAILURE)
        }
        guard let result = backgroundResults.takeIntegrity() else { return }
        if let failure = result {
            writesStoppedReason = "integrity check failed"
            logger.error("Database \(engine.store.path) failed its integrity check, new writes are stopped: \(failure)",
                         id: .integrityFailure)
            notifier.status(statusLine())
        } else {
            logger.info("Integrity check of \(engine.store.path) passed", id: .recovery)
        }
    }

    // MARK: Connections

    private func acceptAll(_ listener: Listener) {
        while true {
            let fd: Int32
            do {
                guard let accepted = try UnixSocket.accept(listener.fd) else { return }
                fd = accepted
            } catch {
                logger.warning("Failed to accept on the \(listener.kind.rawValue) socket: \(error)")
                return
            }
            guard let peer = try? PeerCredentials.of(fd) else {
                UnixSocket.close(fd)
                continue
            }
            let session = Session(token: nextToken, fd: fd, kind: listener.kind, peer: peer,
                                  maximumFrameSize: configuration.maxFrameSize)
            nextToken += 1
            sessions[session.token] = session
            connectionsPerUID[peer.uid, default: 0] += 1
            statusStale = true
            do {
                try epoll.add(fd, events: [.readable, .peerClosed], token: session.token)
            } catch {
                logger.warning("Failed to watch connection: \(error)")
                close(session)
                continue
            }
            if sessions.count > configuration.maxConnections {
                refuse(session, .limitExceeded, "too many connections (\(configuration.maxConnections))")
            } else if connectionsPerUID[peer.uid, default: 0] > configuration.maxConnectionsPerUID {
                refuse(session, .limitExceeded, "too many connections for uid \(peer.uid) (\(configuration.maxConnectionsPerUID))")
            } else if listener.kind == .control && !access.mayControl(peer) {
                refuse(session, .permissionDenied, "uid \(peer.uid) may not use the control socket")
            }
        }
    }

    /// Sends a final error, logs the refusal and closes the connection once the error is written.
    private func refuse(_ session: Session, _ code: ResultCode, _ message: String, requestID: UInt32 = 0,
                        id: MessageID = .refused) {
        guard !session.closeAfterFlush else { return }
        logger.warning("Refused \(session.kind.rawValue) peer pid \(session.peer.pid) uid \(session.peer.uid): \(message)",
                       id: id, fields: [("STOREKIT_UID", String(session.peer.uid)), ("STOREKIT_APP", session.app ?? ""),
                                        ("STOREKIT_REFUSAL", code.name)])
        session.enqueue(ServerMessage.result(requestID, code, message))
        session.closeAfterFlush = true
        markDirty(session)
    }

    private func close(_ session: Session, keepStored: Bool = false) {
        guard sessions.removeValue(forKey: session.token) != nil else { return }
        statusStale = true
        if let name = session.storeName, !keepStored { notifier.removeStoredFileDescriptor(name: name) }
        epoll.remove(session.fd)
        UnixSocket.close(session.fd)
        if let count = connectionsPerUID[session.peer.uid] {
            connectionsPerUID[session.peer.uid] = count > 1 ? count - 1 : nil
        }
        if session.subscribed, let app = session.app {
            let key = QueueKey(uid: session.peer.uid, app: app)
            observers[key]?.remove(session.token)
            if observers[key]?.isEmpty == true { observers[key] = nil }
            logger.info("Observer of \(app) for uid \(session.peer.uid) disconnected", id: .observerDisconnected,
                        fields: [("STOREKIT_APP", app), ("STOREKIT_UID", String(session.peer.uid))])
        }
    }

    private func markDirty(_ session: Session) {
        dirty.append(session)
    }

    private func flushDirty() {
        let sessionsToFlush = dirty
        dirty.removeAll(keepingCapacity: true)
        for session in sessionsToFlush where sessions[session.token] != nil {
            guard session.flush() else {
                close(session)
                continue
            }
            if session.pendingOutput == 0 {
                if session.closeAfterFlush {
                    close(session)
                } else if session.pollingWritable {
                    session.pollingWritable = false
                    try? epoll.modify(session.fd, events: session.backlogged ? [.peerClosed] : [.readable, .peerClosed],
                                      token: session.token)
                }
            } else {
                if session.pendingOutput > configuration.outputHighWaterMark {
                    logger.warning("Cut off pid \(session.peer.pid) uid \(session.peer.uid): it stopped reading "
                                   + "(\(session.pendingOutput) bytes unread)", id: .refused,
                                   fields: [("STOREKIT_UID", String(session.peer.uid))])
                    close(session)
                } else if !session.pollingWritable {
                    session.pollingWritable = true
                    try? epoll.modify(session.fd, events: session.backlogged ? [.writable, .peerClosed]
                                        : [.readable, .writable, .peerClosed], token: session.token)
                }
            }
        }
    }

    // MARK: Reading and decoding

    private func readAvailable(_ session: Session) {
        var budget = 16
        let inFlightBefore = session.inFlight
        while budget > 0 && !session.closeAfterFlush && !session.backlogged {
            budget -= 1
            let result = readBuffer.withUnsafeMutableBytes { raw in
                Result { () throws(Errno) -> IOResult in try UnixSocket.read(session.fd, into: raw) }
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
        if session.decoder.bufferedByteCount == 0 || session.backlogged || session.inFlight > inFlightBefore {
            session.partialSince = session.decoder.bufferedByteCount > 0 && !session.backlogged
                ? ServiceNotifier.monotonicMilliseconds() : nil
        } else if session.partialSince == nil {
            session.partialSince = ServiceNotifier.monotonicMilliseconds()
        }
    }

    private func decodeFrames(_ session: Session) {
        do {
            while !session.closeAfterFlush {
                // Backpressure: with MaxRequestsInFlight= requests waiting, stop decoding and stop
                // reading (the kernel's socket buffer then holds the client back).
                guard session.inFlight < configuration.maxRequestsInFlight else {
                    pauseReading(session)
                    return
                }
                guard let body = try session.decoder.next() else { return }
                dispatch(session, try ClientMessage.decode(body))
            }
        } catch {
            refuse(session, .malformedRequest, "protocol error: \(error)", id: .protocolError)
        }
    }

    private func pauseReading(_ session: Session) {
        guard !session.backlogged else { return }
        session.backlogged = true
        backlog.append(session)
        try? epoll.modify(session.fd, events: session.pollingWritable ? [.writable, .peerClosed] : [.peerClosed],
                          token: session.token)
    }

    /// After a batch is answered, paused sessions decode what they already buffered and read again.
    private func resumeBacklog() {
        guard !backlog.isEmpty else { return }
        let paused = backlog
        backlog.removeAll(keepingCapacity: true)
        for session in paused where sessions[session.token] != nil {
            session.backlogged = false
            decodeFrames(session)
            if !session.backlogged {
                try? epoll.modify(session.fd, events: session.pollingWritable ? [.readable, .writable, .peerClosed]
                                    : [.readable, .peerClosed], token: session.token)
            }
        }
    }

    private func dispatch(_ session: Session, _ message: ClientMessage) {
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
        session.inFlight += 1
        pending.append((session, message))
    }

    private func isControlMessage(_ message: ClientMessage) -> Bool {
        switch message {
        case .control, .ping: true
        default: false
        }
    }

    private func hello(_ session: Session, version: UInt16, app: String) {
        guard session.app == nil else {
            refuse(session, .malformedRequest, "hello sent twice", id: .protocolError)
            return
        }
        guard version == ProtocolVersion.current else {
            refuse(session, .unsupportedVersion,
                   "protocol version \(version) is not supported (server speaks \(ProtocolVersion.current))",
                   id: .protocolError)
            return
        }
        switch session.kind {
        case .control:
            session.app = ""
        case .client:
            guard let registration = configuration.app(app), engine.isRegistered(app: app) else {
                refuse(session, .unknownApp, "app \(app) is not registered")
                return
            }
            if let executable = registration.executable {
                let actual = verifiedExecutable(of: session.peer.pid, socket: session.fd)
                guard actual == executable else {
                    refuse(session, .permissionDenied,
                           "pid \(session.peer.pid) runs \(actual ?? "an unknown executable"), not \(executable), so it may not act as \(app)")
                    return
                }
            }
            session.app = app
            storeInFDStore(session)
        }
        session.enqueue(.welcome(version: ProtocolVersion.current, uid: session.peer.uid,
                                 storefrontCountryCode: engine.storefront,
                                 storefrontID: Storefronts.identifier(for: engine.storefront)))
        markDirty(session)
    }

    // MARK: Executing a batch (group commit)

    /// Frames to write once the batch is durable, in execution order.
    struct BatchOutput {
        var frames: [(token: UInt64, frame: [UInt8])] = []
        var subscriptions: [(QueueKey, UInt64)] = []
        var journal: [() -> Void] = []
        /// Queues that received an update with no observer connected.
        var unobserved: [QueueKey] = []

        mutating func reply(_ session: Session, _ message: ServerMessage) {
            frames.append((session.token, Frame.encode(body: message.encode())))
        }
    }

    private func executePending() {
        let fireScheduled = writesStoppedReason == nil && scheduledEventDue
        guard !pending.isEmpty || fireScheduled else { return }
        let received = pending
        pending.removeAll(keepingCapacity: true)
        defer { for (session, _) in received { session.inFlight = 0 } }
        var batch = received
        var output = BatchOutput()
        var restoring = Set<QueueKey>()
        let batchStart = ServiceNotifier.monotonicMicroseconds()
        // Control commands (backup, integrity check, …) may read the database on another
        // connection: everything acknowledged before them is committed to SQLite first.
        let control = batch.contains(where: { if case .control = $0.1 { true } else { false } })
        if control && !flushStore() {
            // A backup reads the database on another connection: without that commit it would
            // miss acknowledged changes. Refused; the other requests (and control commands, which
            // read through this connection) go on.
            var refusals = BatchOutput()
            batch.removeAll { session, message in
                guard case .control(let id, "backup", _) = message else { return false }
                refusals.reply(session, .controlResult(requestID: id, code: .storageFailure, message:
                    "the store could not commit to \(engine.store.path) first (see the journal); try again", json: "null"))
                return true
            }
            deliver(refusals)
        }
        // A scheduled event that cannot be stored now is retried at the next turn.
        func fireDueEvents(into output: inout BatchOutput) {
            guard fireScheduled else { return }
            _ = isolated(&output, onFailure: { _, _ in }) { (output: inout BatchOutput) throws(StoreError) in
                for effect in try engine.fireDueEvents() { route(effect, into: &output) }
            }
        }
        do {
            try engine.store.begin()
            fireDueEvents(into: &output)
            // Optimistically without a savepoint per request (two statements each): a failure
            // is rare (a full disk), and then the batch is undone and run again, each request in
            // its own savepoint, so that only the failing one is refused. Control commands may
            // act outside the store, so a batch with one never runs twice.
            var optimistic = !control
            if optimistic {
                do throws(StoreError) {
                    for (session, message) in batch where sessions[session.token] != nil {
                        try execute(message, for: session, into: &output, restoring: &restoring)
                    }
                } catch {
                    logger.debug("A request of a batch failed (\(error.message)); running each in a savepoint")
                    engine.store.rollback()
                    undoSubscriptions(output.subscriptions)
                    output = BatchOutput()
                    restoring.removeAll()
                    try engine.store.begin()
                    optimistic = false
                    fireDueEvents(into: &output)
                }
            }
            for (session, message) in batch where !optimistic && sessions[session.token] != nil {
                // Each request in its own savepoint: one that fails (e.g. a full disk refusing a new
                // row) is answered with its error; the others in the batch still commit.
                _ = isolated(&output, onFailure: { error, output in
                    output.reply(session, .result(message.requestID ?? 0, error.code == .full ? .storageFull : .storageFailure,
                                                  "the store could not record this: \(error.message)"))
                }) { (output: inout BatchOutput) throws(StoreError) in
                    try execute(message, for: session, into: &output, restoring: &restoring)
                }
            }
            let executed = ServiceNotifier.monotonicMicroseconds()
            // Hand the fsync to the sync thread only when there is other work to do meanwhile
            // (requests waiting, or earlier units of work still syncing).
            engine.store.commitLog.deferSync = !awaitingSync.isEmpty || epoll.hasReadyEvents()
            try engine.store.commit()
            statusStale = true
            if logger.maximumPriority >= .debug {
                let now = ServiceNotifier.monotonicMicroseconds()
                logger.debug("Committed \(batch.count) requests: executed in \(executed - batchStart) µs, committed in \(now - executed) µs")
            }
        } catch {
            engine.store.rollback()
            undoSubscriptions(output.subscriptions)
            let code: ResultCode = error.code == .full ? .storageFull : .storageFailure
            logger.error("Failed to commit \(batch.count) requests to \(engine.store.path): \(error.message)",
                         id: .storageFailure)
            var refusals = BatchOutput()
            for (session, message) in batch where sessions[session.token] != nil {
                refusals.reply(session, .result(message.requestID ?? 0, code, "the store could not record this: \(error.message)"))
            }
            deliver(refusals)
            return
        }
        deliver(output)
    }

    /// Forgets observer registrations made by requests that were undone.
    private func undoSubscriptions(_ subscriptions: some Sequence<(QueueKey, UInt64)>) {
        for (key, token) in subscriptions {
            observers[key]?.remove(token)
            sessions[token]?.subscribed = false
        }
    }

    /// Tells clients what a unit of work did once it is on disk: now, or when the sync thread
    /// reaches its log record (`releaseSynced()`). Outputs leave in the order they were made.
    private func deliver(_ output: BatchOutput) {
        let log = engine.store.commitLog
        let lsn = log.nextLSN - 1
        if awaitingSync.isEmpty && log.syncedLSN >= lsn {
            release(output)
        } else {
            awaitingSync.append((lsn, output))
        }
    }

    /// Releases the outputs whose log records the sync thread made durable.
    private func releaseSynced() {
        guard !awaitingSync.isEmpty else { return }
        let synced = engine.store.commitLog.syncedLSN
        let ready = awaitingSync.prefix { $0.lsn <= synced }.count
        guard ready > 0 else { return }
        for item in awaitingSync[..<ready] { release(item.output) }
        awaitingSync.removeFirst(ready)
    }

    private func release(_ output: BatchOutput) {
        for entry in output.journal { entry() }
        activateObservers(for: output.unobserved)
        var lastToken: UInt64 = 0
        var lastSession: Session?
        for (token, frame) in output.frames {
            if token != lastToken {
                lastToken = token
                lastSession = sessions[token]
                if let lastSession { markDirty(lastSession) }
            }
            lastSession?.enqueue(encodedFrame: frame)
        }
    }

    /// Runs `body` in a savepoint. On a store error its changes, frames, journal entries and
    /// observer registrations are undone and `onFailure` answers for it; true when it succeeded.
    private func isolated(
        _ output: inout BatchOutput, onFailure: (StoreError, inout BatchOutput) -> Void,
        _ body: (inout BatchOutput) throws(StoreError) -> Void
    ) -> Bool {
        let marks = (output.frames.count, output.subscriptions.count, output.journal.count, output.unobserved.count)
        do {
            try engine.store.savepoint()
            try body(&output)
            try engine.store.releaseSavepoint()
            return true
        } catch {
            engine.store.rollbackToSavepoint()
            undoSubscriptions(output.subscriptions[marks.1...])
            output.frames.removeSubrange(marks.0...)
            output.subscriptions.removeSubrange(marks.1...)
            output.journal.removeSubrange(marks.2...)
            output.unobserved.removeSubrange(marks.3...)
            logger.error("Failed to record a request in \(engine.store.path): \(error.message)", id: .storageFailure)
            onFailure(error, &output)
            return false
        }
    }

    private var mutatingRefusal: String? { writesStoppedReason.map { "writes are stopped: \($0)" } }

    /// False, after answering `storageFailure`, when the integrity check has stopped writes.
    private func writesAllowed(_ requestID: UInt32, _ session: Session, _ output: inout BatchOutput) -> Bool {
        guard let refusal = mutatingRefusal else { return true }
        output.reply(session, .result(requestID, .storageFailure, refusal))
        return false
    }

    private func execute(
        _ message: ClientMessage, for session: Session, into output: inout BatchOutput, restoring: inout Set<QueueKey>
    ) throws(StoreError) {
        let uid = session.peer.uid
        let app = session.app ?? ""
        let queue = QueueKey(uid: uid, app: app)
        switch message {
        case .hello:
            preconditionFailure("hello is handled when decoded")
        case .ping(let id):
            output.reply(session, .result(id, .ok))
        case .subscribe(let id):
            if !session.subscribed {
                session.subscribed = true
                observers[queue, default: []].insert(session.token)
                output.subscriptions.append((queue, session.token))
                storeInFDStore(session)
                activator.observerConnected(queue)
                let logger = self.logger
                let pid = session.peer.pid
                output.journal.append {
                    logger.info("Observer of \(app) for uid \(uid) connected (pid \(pid))", id: .observerConnected,
                                fields: [("STOREKIT_APP", app), ("STOREKIT_UID", String(uid))])
                }
            }
            // Every registration gets every unfinished transaction, in frames of bounded size.
            let unfinished = try engine.unfinished(uid: uid, app: app)
            var start = 0
            while start < unfinished.count {
                let end = min(start + 2000, unfinished.count)
                output.reply(session, .updated(Array(unfinished[start..<end])))
                start = end
            }
            // Promotions offered while nobody observed are offered now, once.
            for product in try engine.takePromotions(queue) { output.reply(session, .promotedPurchase(product)) }
            output.reply(session, .result(id, .ok, value: UInt64(unfinished.count)))
        case .unsubscribe(let id):
            if session.subscribed {
                session.subscribed = false
                observers[queue]?.remove(session.token)
                storeInFDStore(session)
            }
            output.reply(session, .result(id, .ok))
        case .addPayment(let payment):
            guard writesAllowed(payment.requestID, session, &output) else { return }
            let outcome = try engine.addPayment(uid: uid, app: app, payment: payment)
            apply(outcome, requestID: payment.requestID, session: session, into: &output)
        case .finish(let id, let transactionID):
            guard writesAllowed(id, session, &output) else { return }
            let outcome = try engine.finish(uid: uid, app: app, transactionID: transactionID)
            apply(outcome, requestID: id, session: session, into: &output)
        case .restore(let id, let username):
            guard writesAllowed(id, session, &output) else { return }
            // Single-flight: a second restore of the same queue in this unit of work joins the first.
            if restoring.contains(queue) {
                output.reply(session, .result(id, .ok))
                return
            }
            restoring.insert(queue)
            let outcome = try engine.restore(uid: uid, app: app, applicationUsername: username)
            apply(outcome, requestID: id, session: session, into: &output)
        case .cancelPayment(let id, let transactionID):
            guard writesAllowed(id, session, &output) else { return }
            let outcome = try engine.cancelDeferred(uid: uid, app: app, transactionID: transactionID)
            apply(outcome, requestID: id, session: session, into: &output)
        case .products(let id, let identifiers):
            let (products, invalid) = engine.products(app: app, identifiers: identifiers)
            output.reply(session, .products(requestID: id, products: products, invalidIdentifiers: invalid))
        case .unfinished(let id):
            output.reply(session, .transactions(requestID: id, transactions: try engine.unfinished(uid: uid, app: app)))
        case .control(let id, "debug-stall", let arguments) where testHooks:
            let milliseconds = arguments.first.flatMap { UInt32($0) } ?? 1000
            usleep(milliseconds * 1000)
            output.reply(session, .controlResult(requestID: id, code: .ok, message: "", json: "null"))
        case .control(let id, "debug-fail-flushes", let arguments) where testHooks:
            guard arguments.count == 1, let milliseconds = Int64(arguments[0]), milliseconds >= 0 else {
                output.reply(session, .controlResult(requestID: id, code: .invalidArgument,
                                                     message: "usage: debug-fail-flushes MILLISECONDS", json: "null"))
                return
            }
            flushesFailUntil = ServiceNotifier.monotonicMilliseconds() + milliseconds
            output.reply(session, .controlResult(requestID: id, code: .ok, message: "", json: "null"))
        case .control(let id, let command, let arguments):
            let controller = ControlCommands(engine: engine, configuration: configuration, server: self)
            let result = try controller.execute(command: command, arguments: arguments, writesStopped: mutatingRefusal)
            for effect in result.effects { route(effect, into: &output) }
            output.reply(session, .controlResult(requestID: id, code: result.code, message: result.message,
                                                 json: result.json.serialized()))
        }
    }

    private func apply(_ outcome: Outcome, requestID: UInt32, session: Session, into output: inout BatchOutput) {
        if outcome.code != .ok {
            let logger = self.logger
            let uid = session.peer.uid
            let app = session.app ?? ""
            output.journal.append {
                logger.info("Refused request of uid \(uid) for \(app): \(outcome.message)", id: .refused,
                            fields: [("STOREKIT_APP", app), ("STOREKIT_UID", String(uid)),
                                     ("STOREKIT_REFUSAL", outcome.code.name)])
            }
        }
        for effect in outcome.effects { route(effect, into: &output) }
        output.reply(session, .result(requestID: requestID, code: outcome.code, detail: outcome.detail,
                                      value: outcome.value, message: outcome.message))
    }

    /// Turns an effect into frames for the observers registered now, and journal entries.
    func route(_ effect: Effect, into output: inout BatchOutput) {
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
        case .promoted(let key, let product):
            queue = key
            message = .promotedPurchase(product)
        case .storefrontChanged(let country, let identifier):
            let frame = Frame.encode(body: ServerMessage.storefrontChanged(countryCode: country, identifier: identifier).encode())
            for session in sessions.values where session.subscribed { output.frames.append((session.token, frame)) }
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
        let frame = Frame.encode(body: message.encode())
        for token in tokens { output.frames.append((token, frame)) }
    }

    /// Starts the `ObserverUnit=` of apps whose queues got updates while no observer was connected.
    private func activateObservers(for queues: [QueueKey]) {
        guard !queues.isEmpty else { return }
        let now = ServiceNotifier.monotonicMilliseconds()
        for queue in Set(queues) where observers[queue]?.isEmpty ?? true {
            guard let unit = configuration.app(queue.app)?.observerUnit else { continue }
            activator.request(queue, unit: unit, now: now, interval: configuration.observerActivationInterval.milliseconds)
        }
    }

    /// One journal entry per record, written once the change is durable.
    private func journal(_ records: [TransactionRecord], into output: inout BatchOutput, id: MessageID,
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

    // MARK: Introspection for the control plane

    var connectionCount: Int { sessions.count }
    var observerCount: Int { sessions.values.reduce(0) { $0 + ($1.subscribed ? 1 : 0) } }

    // MARK: Shutdown

    private func shutdown() {
        notifier.stopping()
        for listener in listeners.values {
            epoll.remove(listener.fd)
            UnixSocket.close(listener.fd)
        }
        listeners.removeAll()
        // Requests already read are finished (committed and answered); then output is drained for
        // a bounded time so that clients hear what was made durable for them.
        executePending()
        flushStore()
        engine.store.commitLog.waitForSync()
        releaseSynced()
        for session in sessions.values { markDirty(session) }
        let deadline = ServiceNotifier.monotonicMilliseconds() + 2000
        flushDirty()
        while sessions.values.contains(where: { $0.pendingOutput > 0 }) && ServiceNotifier.monotonicMilliseconds() < deadline {
            try? epoll.wait(timeout: 50) { _, _ in }
            for session in sessions.values where session.pendingOutput > 0 { markDirty(session) }
            flushDirty()
        }
        // Stored sessions stay in the service manager's FD store: a restarted daemon resumes them.
        for session in Array(sessions.values) { close(session, keepStored: true) }
        logger.notice("Stopped", id: .stopped)
    }
}
