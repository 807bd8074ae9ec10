import CPosix
import StoreKitLedger
import Synchronization
import StoreKitEngine
import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

/// The serving loop: one thread, epoll over the listeners, the sessions, a signalfd and a
/// wake-up event.
///
/// Group commit falls out of the loop's shape: every request read in one turn is executed in one
/// unit of work, committed to the commit log together, and its replies and pushes pass the
/// `DurabilityGate` only once the log's sync has made them durable. Requests that arrive
/// meanwhile wait in the socket buffers for the next turn. docs/architecture.md has the picture.
///
/// One reason to change per file:
/// - `Server.swift`: the loop, its timers, STATUS= and the watchdog, shutdown;
/// - `Server+Signals.swift`: SIGTERM/SIGHUP, reload, background results;
/// - `Server+Connections.swift`: accepting under the limits, the FD store, sending, closing;
/// - `Server+Reading.swift`: reading, decoding, back-pressure, first checks of a request;
/// - `Server+Hello.swift`: the hello exchange and who a client may act as;
/// - `Server+UnitOfWork.swift`: one unit of work per turn, savepoints when a request fails;
/// - `Server+Requests.swift`: what each request does;
/// - `Server+Routing.swift`: effects to frames, journal entries and observer-unit starts;
/// - `LedgerDriver.swift` (the ledger as the loop sees it) and `DurabilityGate.swift`.
public final class Server {
    /// A listening socket and the kind of connections it takes; it owns the socket.
    public final class Listener {
        public let kind: SocketKind
        /// Nil once closed (at shutdown).
        private(set) var socket: Socket?
        /// The socket's number, for epoll: valid until `close()`.
        public let fd: Int32

        public init(_ socket: consuming Socket, kind: SocketKind) {
            self.kind = kind
            fd = socket.rawValue
            self.socket = Optional(consume socket)
        }

        /// Closes the socket (once) and returns what `close(2)` said.
        func close() -> Errno? { Socket.close(&socket) }

        /// Accepts one pending connection; nil when none is (or the socket is closed).
        func accept() throws(Errno) -> Socket? {
            try socket?.accept() ?? nil
        }
    }

    /// What the server asks of its owner when SIGHUP arrives: a new configuration and catalogues,
    /// or a message saying why the old ones stay.
    /// Loads the configuration again; it is given the running one (hosted content whose files
    /// did not change keeps its digests).
    public typealias Reloader = (DaemonConfiguration) -> Result<(DaemonConfiguration, [String: Catalog]), ReloadFailure>

    public struct ReloadFailure: Error {
        public let message: String
        public init(_ message: String) { self.message = message }
    }

    /// Why `run()` ended in failure: the daemon exits non-zero after a clean shutdown of what
    /// may still be shut down cleanly.
    public struct Stopped: Error, CustomStringConvertible {
        public let description: String
    }

    enum Token {
        static let signals: UInt64 = 1
        static let wakeup: UInt64 = 2
        static let fleet: UInt64 = 3
        static let firstListener: UInt64 = 4
        static let firstSession: UInt64 = 16
    }

    let engine: PaymentQueueEngine
    let ledger: LedgerDriver
    /// Signs what leaves the daemon (JWS, receipts).
    let proof: ProofOfPurchase
    /// Signs pushes off the serving thread; `nextSigningTicket` numbers its jobs.
    let signer: Signer
    var nextSigningTicket: UInt64 = 0
    /// Jobs handed to the signer and not yet collected.
    var signingJobs = 0
    /// Heavy signing jobs (receipts) in flight, by ticket with their lane, and per uid: they do
    /// not count in `signingJobs`, which stops every uid's units; a uid with one waits for it
    /// before its next receipt.
    var heavyJobs: [UInt64: UInt32?] = [:]
    var heavyJobsPerUID: [UInt32: Int] = [:]
    var configuration: DaemonConfiguration
    /// The uids observer units are started for (`[Observers] UIDs=` or /etc/login.defs), read at
    /// start and at each reload.
    var observerUIDs: PersonUIDs
    let logger: Logger
    let notifier: ServiceNotifier
    /// Who may use the control socket; rebuilt when a reload changes `AdminGroup=`.
    var access: AccessPolicy
    let epoll: Epoll
    let signals: SignalFD
    public let wakeup: WakeupEvent
    var listeners: [UInt64: Listener] = [:]
    /// The fleet's wake-ups (PostgreSQL's `LISTEN`), when the ledger is shared.
    let fleet: (any LedgerChangeFeed)?
    /// Another daemon of the fleet changed something: read it in the next unit of work.
    var fleetChangesDue = false
    /// The fleet's connection is in the epoll set (until it is lost or the ledger reconnected).
    var fleetWatched = false
    /// Notifications were read from libpq's buffer after the last wait: the next one does not wait.
    var fleetHeardLate = false
    /// When the families of the configuration are next brought into the ledger (monotonic ms;
    /// nil: they are in it). Due at start and after a reload; a failure tries again a second later.
    var familiesDueAt: Int64? = 0
    var sessions: [UInt64: Session] = [:]
    var observers: [QueueKey: Set<UInt64>] = [:]
    var connectionsPerUID: [UInt32: Int] = [:]
    var nextToken = Token.firstSession
    /// Requests decoded this turn, waiting for the next unit of work.
    var received: [(Session, ClientMessage)] = []
    /// Sessions that stopped reading at `MaxRequestsInFlight=`, resumed after the unit of work.
    var backlog: [Session] = []
    /// Sessions not read until their uid's request rate allows (`Session.pacedUntil`).
    var paced: [Session] = []
    /// Client requests per uid in `received`: decoded, not yet executed, so not yet counted by
    /// the uid's rate (a paced uid is read again only for what its bucket holds beyond them).
    var queuedPerUID: [UInt32: Int] = [:]
    /// Sessions with output queued since the last send.
    var sessionsToSend: [Session] = []
    var running = true
    /// Set when the loop must stop because something it depends on failed (the exit status is 1).
    var fatalFailure: String?
    var readBuffer = [UInt8](repeating: 0, count: 65_536)
    var lastWatchdog: Int64 = 0
    var lastStatus = ""
    /// Connections or the store changed since STATUS= was last computed.
    var statusStale = true
    var lastHousekeeping: Int64 = 0
    /// Outputs of units of work, held until the commit log's sync has made them durable and
    /// their pushes are signed; in lanes by uid.
    var gate = DurabilityGate<UInt32?, UnitOutput>()
    let reloader: Reloader?
    /// Set when the background integrity check failed: mutating requests are refused.
    var writesStoppedReason: String?
    /// Refusals written per uid (a hostile client can cause one per frame).
    var refusalLog = WarningRateLimit()
    /// Client requests per uid (`MaxRequestsPerUIDPerSecond=`).
    var requestRates = RequestRateLimit()
    /// Bytes queued for all sessions (`OutputBudget=`).
    let outputAccount = OutputAccount()
    var clientConnections = 0
    var controlConnections = 0
    let backgroundResults = BackgroundResults()
    let activator: ObserverActivator
    #if STOREKIT_TEST_HOOKS
    /// `--enable-test-hooks` (debug builds only): the `debug-*` control commands (TestHooks.swift).
    let testHooks: TestHooks?
    #endif

    /// Unique part of FD-store names for this run.
    let storeRun = String(UInt64(Monotonic.milliseconds()), radix: 36)

    public init(
        engine: PaymentQueueEngine, proof: ProofOfPurchase, configuration: DaemonConfiguration, listeners: [Listener],
        resumedSessions: [(fd: Int32, name: String)] = [], fleet: (any LedgerChangeFeed)? = nil,
        logger: Logger, notifier: ServiceNotifier, reloader: Reloader? = nil, testHooks: Bool = false
    ) throws(Errno) {
        #if STOREKIT_TEST_HOOKS
        self.testHooks = testHooks ? TestHooks() : nil
        #else
        precondition(!testHooks, "test hooks are compiled into debug builds only")
        #endif
        self.activator = ObserverActivator(logger: logger)
        self.engine = engine
        self.proof = proof
        self.ledger = LedgerDriver(store: engine.store, logger: logger)
        engine.limits = Self.engineLimits(configuration)
        engine.families = configuration.familyGroups
        self.configuration = configuration
        self.observerUIDs = configuration.observerUIDs()
        self.logger = logger
        self.notifier = notifier
        self.reloader = reloader
        self.access = AccessPolicy(adminGroup: configuration.adminGroup)
        epoll = try Epoll()
        signals = try SignalFD()
        wakeup = try WakeupEvent()
        try epoll.add(signals.rawValue, events: .readable, token: Token.signals)
        try epoll.add(wakeup.fd, events: .readable, token: Token.wakeup)
        for (index, listener) in listeners.enumerated() {
            let token = Token.firstListener + UInt64(index)
            self.listeners[token] = listener
            try epoll.add(listener.fd, events: .readable, token: token)
        }
        self.fleet = fleet
        if let fleet, fleet.isConnected {
            try epoll.add(fleet.socket, events: .readable, token: Token.fleet)
            fleetWatched = true
            fleetChangesDue = true
        }
        // Last: nothing after it throws, so its thread is never left behind by a failed init.
        let wakeup = self.wakeup
        signer = Signer(logger: logger, onDone: { wakeup.signal() })
        for (fd, name) in resumedSessions { resume(Socket(adopting: fd), name: name) }
    }


    /// What the engine enforces of `[Limits]`.
    static func engineLimits(_ configuration: DaemonConfiguration) -> PaymentQueueEngine.Limits {
        var limits = PaymentQueueEngine.Limits()
        limits.applicationUsernameBytes = configuration.maxApplicationUsernameLength
        limits.unfinishedPerQueue = configuration.maxUnfinishedPerQueue
        return limits
    }

    public static func blockSignals() {
        _ = storekit_block_signals()
    }

    // MARK: The loop

    /// Serves until SIGTERM/SIGINT, then drains and returns; throws `Stopped` when the loop had
    /// to stop because something it depends on failed (after the same shutdown).
    public func run() throws {
        // The signers' threads live as long as the loop: stopped once, here, whether the loop
        // returns after its shutdown or throws.
        signer.start()
        defer { signer.stop() }
        notifier.ready(status: statusLine())
        while running {
            // Units of work waiting in the SQLite transaction are saved once the loop has been
            // idle for `idleSaveDelay` ms, or once the transaction is old (`LedgerDriver.saveIsDue`).
            // After a failed save, the next one is tried `LedgerDriver.saveRetryDelay` ms later.
            let waitsForSave = received.isEmpty && ledger.hasUnsavedChanges
            let saveWait = Int32(clamping: max(Int64(Self.idleSaveDelay), ledger.saveRetryAt - Monotonic.milliseconds()))
            let canExecute = !received.isEmpty && signerHasRoom && hasRunnableRequests
            var timeout = canExecute ? 0 : (waitsForSave ? min(nextTimeout(), saveWait) : nextTimeout())
            // The statements just run (the schedule's next due time) may have brought notifications.
            hearBufferedFleet()
            if fleetHeardLate { timeout = 0 }
            var events = 0
            let waitStarted = Monotonic.milliseconds()
            try epoll.wait(timeout: timeout) {
                token, flags in
                events += 1
                handle(token: token, events: flags)
            }
            fleetHeardLate = false
            guard running else { break }
            // Idle for the whole delay, not woken sooner by a timer of its own (a paced uid's
            // next read, the watchdog): a flood paced every millisecond is not idleness.
            let idle = events == 0 && Monotonic.milliseconds() - waitStarted >= Int64(saveWait)
            if waitsForSave && idle && received.isEmpty { ledger.save(retrying: true) }
            if signerHasRoom { executeReceived() }
            resumeBacklog()
            resumePaced(now: Monotonic.milliseconds())
            sendQueuedOutput()
            let now = Monotonic.milliseconds()
            ledger.writeHeldRows(now: now)
            if ledger.saveIsDue(now: now) { ledger.save(retrying: true) }
            housekeeping()
        }
        shutdown()
        if let fatalFailure { throw Stopped(description: fatalFailure) }
    }

    /// Signing jobs that may wait for the signer before the loop runs no further units of work:
    /// requests wait where they are chosen fairly (`takeFairShare`), not in the signer's queue
    /// behind one uid's pushes.
    static let signingDepth = 2

    var signerHasRoom: Bool { signingJobs < Self.signingDepth }

    /// How long the loop must have had nothing to do before it saves the SQLite transaction
    /// (ms). Not at once: at a steady trickle of requests, many share one save.
    static let idleSaveDelay: Int32 = 2

    func nextTimeout() -> Int32 {
        var timeout: Int64 = 1000
        if let interval = notifier.watchdogPingInterval { timeout = min(timeout, interval) }
        if let resume = nextPacedResume { timeout = min(timeout, max(resume - Monotonic.milliseconds(), 0)) }
        if writesStoppedReason == nil, signerHasRoom, let due = familiesDueAt { timeout = min(timeout, max(due - Monotonic.milliseconds(), 0)) }
        // A due event waits for room at the signer like any unit of work: its wake-up ends the wait.
        if writesStoppedReason == nil, signerHasRoom, let due = try? engine.millisecondsUntilNextEvent() {
            timeout = min(timeout, max(due, 0))
        }
        return Int32(timeout)
    }

    /// Whether a scheduled store event (renewal, expiry, …) is due now.
    var scheduledEventDue: Bool {
        guard let due = try? engine.millisecondsUntilNextEvent() else { return false }
        return due <= 0
    }

    func handle(token: UInt64, events: Epoll.Events) {
        switch token {
        case Token.signals:
            handleSignals()
        case Token.wakeup:
            wakeup.drain()
            ledger.collectSave()
            handleBackgroundResults()
            collectSignatures()
            releaseDurable()
        case Token.fleet:
            hearFleet()
        default:
            if let listener = listeners[token] {
                acceptAll(listener)
            } else if let session = sessions[token] {
                // A paced session is not read, so its peer's hang-up would be reported at every
                // wait (level-triggered): the peer is gone, close it now.
                if session.pacedUntil != nil, !events.intersection([.hangup, .error, .peerClosed]).isEmpty {
                    close(session)
                    return
                }
                if events.contains(.readable) || events.contains(.hangup) || events.contains(.error) {
                    readAvailable(session)
                }
                if events.contains(.writable), sessions[token] != nil {
                    queueForSending(session)
                }
            }
        }
    }

    func housekeeping() {
        hearBufferedFleet()
        let now = Monotonic.milliseconds()
        if let interval = notifier.watchdogPingInterval, now - lastWatchdog >= interval {
            // Pinged from the loop itself: a loop stuck in a request stops the pings.
            notifier.watchdog()
            lastWatchdog = now
        }
        guard now - lastHousekeeping >= 1000 else { return }
        lastHousekeeping = now
        reconnectFleet(now: now)
        activator.retryDue(now: now, interval: configuration.observerActivationInterval.milliseconds)
        for (uid, count) in refusalLog.expire(now: now) { saySuppressed(uid: uid, count: count) }
        requestRates.expire(now: now)
        let deadline = configuration.partialFrameTimeout.milliseconds
        let helloDeadline = configuration.helloTimeout.milliseconds
        let sendDeadline = configuration.sendTimeout.milliseconds
        for session in Array(sessions.values) {
            if session.app == nil, now - session.acceptedAt > helloDeadline, !session.closeAfterSending {
                refuse(session, .limitExceeded, "no hello within \(helloDeadline) ms (HelloTimeoutSec=)", id: .protocolError)
            } else if let since = session.partialSince, now - since > deadline {
                refuse(session, .limitExceeded, "partial frame not completed within \(deadline) ms", id: .protocolError)
            }
            if session.pendingOutput > 0, now - session.lastSendProgress > sendDeadline {
                cutOff(session, "it read none of its \(session.pendingOutput) queued bytes for \(sendDeadline) ms (SendTimeoutSec=)")
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
        func counted(_ count: Int, _ noun: String) -> String { "\(count) \(noun)\(count == 1 ? "" : "s")" }
        let unfinished = ledger.unfinishedCount().map { counted($0, "unfinished transaction") } ?? "unfinished transactions unknown"
        var line = "Serving \(counted(sessions.count, "connection")), \(counted(observerCount, "observer")), \(unfinished)"
        if let writesStoppedReason { line += "; WRITES STOPPED: \(writesStoppedReason)" }
        if let low = ledger.lowSpaceReason { line += "; LOW DISK SPACE: \(low)" }
        if let unreachable = ledger.unreachable { line += "; DATABASE UNREACHABLE: \(unreachable)" }
        if fleet != nil, !fleetWatched { line += "; NOT HEARING THE FLEET (reconnecting)" }
        return LedgerDriver.oneLine(line)
    }

    // MARK: Introspection for the control plane

    var connectionCount: Int { sessions.count }
    var observerCount: Int { sessions.values.reduce(0) { $0 + ($1.subscribed ? 1 : 0) } }

    // MARK: Shutdown

    /// The one way out of the loop: STOPPING=1, no new connections (they wait in the listening
    /// sockets, which the service manager keeps); then, unless the loop stopped on a failure
    /// that forbids it, what clients sent is read once more and every request read is executed and answered,
    /// the database is saved and output is drained for a bounded time. Client connections stay
    /// in the service manager's FD store, so a restarted daemon resumes them.
    func shutdown() {
        notifier.stopping()
        for listener in listeners.values {
            epoll.remove(listener.fd)
            if let error = listener.close() { logger.warning("Closing the \(listener.kind.rawValue) socket failed: \(error)") }
        }
        listeners.removeAll()
        if fatalFailure == nil {
            // What clients sent before the listeners closed is read once more, so that a request
            // in flight as the daemon is restarted (an upgrade) is answered, not dropped with the
            // connection: a client whose request was not read sees ECONNRESET and may send it
            // again (storekitctl does, once).
            for session in Array(sessions.values) { readAvailable(session) }
            // Every request read is answered: a unit takes at most `fairShare` per uid.
            repeat {
                executeReceived()
                // What waits for its uid's heavy signing work waits for the signers here.
                if !received.isEmpty && !hasRunnableRequests {
                    signer.waitUntilIdle()
                    collectSignatures()
                }
            } while !received.isEmpty && fatalFailure == nil
            ledger.save()
            if let summary = ledger.offLoopSaveSummary { logger.info(summary) }
            ledger.waitUntilDurable()
            // A job signed again (its leaf revoked meanwhile) is waited for too.
            repeat { signer.waitUntilIdle() } while collectSignatures()
            releaseDurable()
            for session in sessions.values { queueForSending(session) }
            let deadline = Monotonic.milliseconds() + 2000
            sendQueuedOutput()
            while sessions.values.contains(where: { $0.pendingOutput > 0 }) && Monotonic.milliseconds() < deadline {
                try? epoll.wait(timeout: 50) { _, _ in }
                for session in sessions.values where session.pendingOutput > 0 { queueForSending(session) }
                sendQueuedOutput()
            }
        }
        for session in Array(sessions.values) { close(session, keepStored: true) }
        if let fatalFailure {
            logger.error("Stopped: \(fatalFailure)", id: .stopped)
        } else {
            logger.notice("Stopped", id: .stopped)
        }
    }
}
