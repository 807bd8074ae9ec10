import Foundation
import StoreKitConnection
import StoreKitSigning
import StoreKitWire
import Synchronization

/// The app's one connection to storekitd.
///
/// A dedicated thread connects (on first use), says hello, subscribes while observers exist,
/// re-sends every request still unanswered, and reads. When the daemon goes away it reconnects
/// with jittered exponential backoff; requests made meanwhile wait in `pending` — callers never
/// block. Requests are safe to re-send: payments carry an idempotency key, finishing is idempotent
/// and a restore creates nothing twice.
final class StoreConnection: Sendable {
    static let shared = StoreConnection()

    /// What the rest of the library hears from the daemon.
    struct Handlers: Sendable {
        var updated: @Sendable ([TransactionRecord]) -> Void = { _ in }
        var removed: @Sendable ([TransactionRecord]) -> Void = { _ in }
        var storefrontChanged: @Sendable (String, String) -> Void = { _, _ in }
        var revoked: @Sendable ([String]) -> Void = { _ in }
        var promoted: @Sendable (ProductRecord) -> Void = { _ in }
        var priceConsent: @Sendable (String) -> Void = { _ in }
        var connected: @Sendable (String, String) -> Void = { _, _ in }
    }

    /// The parts of the library that hear pushes: StoreKit 1's payment queue and StoreKit 2's
    /// feeds. The connection is subscribed while any of them observes.
    enum Listener: Hashable, Sendable {
        case paymentQueue
        case transactionFeed
        /// `Storefront.updates` and `Product.SubscriptionInfo.Status.updates`.
        case storefrontFeed
        case statusFeed
        /// `PurchaseOption.onStorefrontChange` of purchases still waiting.
        case pendingPurchases
    }

    typealias Completion = @Sendable (Result<ServerMessage, SKError>) -> Void

    private struct Pending {
        let message: ClientMessage
        let completion: Completion?
        var sentAt = Date()
        let createdAt = Date()
        /// Written to a connected daemon at least once (and so re-sent, not failed, when it is unreachable).
        var delivered = false
    }

    /// A request that could not be delivered for this long, because storekitd cannot be reached,
    /// fails with `SKError.Code.cloudServiceNetworkConnectionFailed`, as StoreKit fails a purchase
    /// made offline. `STOREKIT_CONNECT_TIMEOUT` (seconds) overrides it.
    static let unreachableTimeout: TimeInterval = {
        if let text = ProcessInfo.processInfo.environment["STOREKIT_CONNECT_TIMEOUT"], let value = TimeInterval(text), value > 0 {
            return value
        }
        return 10
    }()

    /// A request unanswered this long is sent again on the same connection: after a daemon
    /// restart that kept the connection (FD store), a request it had read but not answered is
    /// gone. Every request is safe to repeat (idempotency keys, idempotent finish and restore).
    static let resendAfter: TimeInterval = 5

    private struct State {
        var started = false
        var socket: WireConnection.Box?
        var nextRequestID: UInt32 = 1
        var pending: [UInt32: Pending] = [:]
        var order: [UInt32] = []
        var observers: Set<Listener> = []
        var handlers: [Listener: Handlers] = [:]
        var appIdentifier: String?
        var socketPath: String?
        /// The storefront (country code, storefront id) of the last welcome or storefront change.
        var storefront: (countryCode: String, identifier: String)?
        /// The last reason the daemon could not be reached that was written to stderr.
        var reportedProblem: String?
        /// The app's products with hosted content, as the last welcome listed them.
        var hostedContent: [String: HostedContentRecord] = [:]
    }

    private let state = Mutex(State())
    /// Serialises writes to the socket; the reader thread never writes.
    private let writeLock = Mutex(())

    init() {}

    // MARK: Configuration

    func setHandlers(_ handlers: Handlers, for listener: Listener = .paymentQueue) {
        state.withLock { $0.handlers[listener] = handlers }
    }

    /// The app identifier this connection says hello with.
    var resolvedAppIdentifier: String {
        state.withLock { $0.appIdentifier } ?? Self.defaultAppIdentifier()
    }

    /// The socket this connection connects to.
    var resolvedSocketPath: String {
        state.withLock { $0.socketPath } ?? SocketLocation.clientSocket(environment: ProcessInfo.processInfo.environment)
    }

    func configure(appIdentifier: String?, socketPath: String?) {
        state.withLock {
            $0.appIdentifier = appIdentifier
            $0.socketPath = socketPath
        }
    }

    /// Drops the current connection, if any: the connection thread connects again, to the socket
    /// configured now, and re-sends what is unanswered.
    func reconnect() {
        // Under the lock: the connection thread closes the socket only after it has taken it out
        // of the state, so the number shut down here is never one reused for another file.
        state.withLock { state in
            if let socket = state.socket { _ = shutdown(socket.fd, Int32(SHUT_RDWR)) }
        }
    }

    /// The hosted content of `productID`, as the daemon's last welcome listed it (nil before
    /// the first welcome, or when the product has none).
    func hostedContent(for productID: String) -> HostedContentRecord? {
        state.withLock { $0.hostedContent[productID] }
    }

    /// The storefront the daemon announced last (country code, storefront id); nil before the first welcome.
    var storefront: (countryCode: String, identifier: String)? { state.withLock { $0.storefront } }

    // MARK: Requests

    /// Queues a request and sends it when connected; `completion` runs on the reader thread.
    func request(_ make: (UInt32) -> ClientMessage, completion: Completion?) {
        let (message, socket) = state.withLock { state -> (ClientMessage, WireConnection.Box?) in
            let id = state.nextRequestID
            state.nextRequestID &+= 1
            if state.nextRequestID == 0 { state.nextRequestID = 1 }
            let message = make(id)
            state.pending[id] = Pending(message: message, completion: completion)
            state.order.append(id)
            if state.socket != nil { state.pending[id]?.delivered = true }
            return (message, state.socket)
        }
        startIfNeeded()
        if let socket { send(message, on: socket) }
    }

    /// Starts (or keeps) observing for `listener`: the daemon sends every unfinished transaction,
    /// then changes. The connection stays subscribed while any listener observes.
    func observe(_ on: Bool, for listener: Listener = .paymentQueue) {
        let (changed, socket) = state.withLock { state -> (Bool, WireConnection.Box?) in
            let before = !state.observers.isEmpty
            if on { state.observers.insert(listener) } else { state.observers.remove(listener) }
            return (before != !state.observers.isEmpty, state.socket)
        }
        startIfNeeded()
        guard changed, let socket else { return }
        let id = state.withLock { state -> UInt32 in
            defer { state.nextRequestID &+= 1 }
            return state.nextRequestID
        }
        send(on ? .subscribe(requestID: id) : .unsubscribe(requestID: id), on: socket)
    }

    func fetchProducts(
        _ identifiers: [String],
        completion: @escaping @Sendable (Result<(products: [ProductRecord], invalid: [String]), SKError>) -> Void
    ) {
        request({ .products(requestID: $0, identifiers: identifiers) }) { result in
            switch result {
            case .success(.products(_, let products, let invalid)): completion(.success((products, invalid)))
            case .success: completion(.failure(SKError(.unknown)))
            case .failure(let error): completion(.failure(error))
            }
        }
    }

    private func send(_ message: ClientMessage, on socket: WireConnection.Box) {
        // An older daemon (a version below this library's) would not read all of it: the request
        // fails, saying so, rather than going out without what it asked for.
        guard message.requiredVersion <= socket.connection.version else {
            if let id = message.requestID { failTooNew(id, needs: message.requiredVersion, speaks: socket.connection.version) }
            return
        }
        writeLock.withLock { _ in
            // A failed write is not reported here: the reader sees the broken connection,
            // reconnects and re-sends everything still pending.
            try? socket.connection.send(message)
        }
    }

    // MARK: The connection thread

    private func startIfNeeded() {
        let start = state.withLock { state -> Bool in
            defer { state.started = true }
            return !state.started
        }
        guard start else { return }
        CryptoLibrary.keepUntilExit()
        let thread = Thread { [self] in run() }
        thread.name = "OpenStoreKit.connection"
        thread.start()
    }

    /// The oldest protocol version the library falls back to with an older daemon: StoreKit 2
    /// needs signed data.
    static let oldestVersion = ProtocolVersion.signedData

    private func run() {
        var backoff = 0.05
        // Each connection starts with this library's version and steps down while an older
        // daemon refuses it (requests that need more then fail, `send`).
        var version = ProtocolVersion.current
        while true {
            let (app, path) = state.withLock { state in
                (state.appIdentifier ?? Self.defaultAppIdentifier(),
                 state.socketPath ?? SocketLocation.clientSocket(environment: ProcessInfo.processInfo.environment))
            }
            // A request made after the path was read is not this attempt's to fail: a test
            // session may bind, and ask, between the read and the attempt's failure.
            let attemptStarted = Date()
            do {
                let connection = try WireConnection(path: path)
                let welcome = try connection.hello(app: app, version: version)
                version = ProtocolVersion.current
                backoff = 0.05
                reportReached(path)
                serve(WireConnection.Box(connection), welcome: welcome)
            } catch {
                if case .refused(.unsupportedVersion, _) = error.code, version > Self.oldestVersion {
                    version -= 1
                    continue
                }
                version = ProtocolVersion.current
                // Pointed at another daemon meanwhile (a test session bound while this attempt was
                // on its way to the one before): that one's failure is not the requests' to pay.
                if resolvedSocketPath != path { continue }
                let problem = Self.problem(error, app: app)
                // A refusal came from the daemon, which was reached: not "cannot reach".
                if case .refused = error.code { report(problem) } else { report("cannot reach storekitd: " + problem) }
                if case .refused(let code, let message) = error.code {
                    failAll(SKError(.clientInvalid, userInfo: [NSLocalizedDescriptionKey: "storekitd refused \(app): \(message) (\(code.name))"]))
                } else if case .connect(let errno) = error.code, errno.rawValue == ENOENT {
                    // No socket file anywhere: no daemon to wait for (a socket-activated or running
                    // one has its file in place), so what waits fails now, saying where it looked.
                    failUndelivered(olderThan: 0, madeBefore: attemptStarted, problem: problem)
                } else {
                    failUndelivered(olderThan: Self.unreachableTimeout, madeBefore: attemptStarted, problem: problem)
                }
            }
            // Jittered exponential backoff: many apps restarting together do not reconnect in lockstep.
            Thread.sleep(forTimeInterval: backoff * Double.random(in: 0.5...1.5))
            backoff = min(backoff * 2, 5)
        }
    }

    /// Why the daemon cannot be reached, in words an app's user can act on.
    static func problem(_ error: ConnectionError, app: String) -> String {
        switch error.code {
        case .connect(let errno) where errno.rawValue == ENOENT:
            "no storekitd socket: tried " + SocketLocation.clientSocketsTried(environment: ProcessInfo.processInfo.environment)
                .joined(separator: ", ") + " (start storekitd: `make run` for your own, `systemctl start storekitd.socket` "
                + "for the system's; or set STOREKITD_SOCKET)"
        case .connect(let errno) where errno.rawValue == EACCES || errno.rawValue == EPERM:
            "permission denied on \(error.path): this user may not reach storekitd there (check the socket's and its directory's modes)"
        case .connect(let errno) where errno.rawValue == ECONNREFUSED:
            "nothing listens on \(error.path): storekitd is not running and its socket is not active"
        case .refused(let code, let message):
            "storekitd refused \(app): \(message) (\(code.name))"
        default:
            error.description
        }
    }

    /// Writes a problem reaching or using the daemon to stderr once (again only when it changes).
    private func report(_ problem: String) {
        let isNew = state.withLock { state -> Bool in
            defer { state.reportedProblem = problem }
            return state.reportedProblem != problem
        }
        if isNew { FileHandle.standardError.write(Data("OpenStoreKit: \(problem)\n".utf8)) }
    }

    private func reportReached(_ path: String) {
        let hadProblem = state.withLock { state -> Bool in
            defer { state.reportedProblem = nil }
            return state.reportedProblem != nil
        }
        if hadProblem { FileHandle.standardError.write(Data("OpenStoreKit: connected to storekitd at \(path)\n".utf8)) }
    }

    /// Fails requests that never reached a daemon and have waited `timeout`: a payment made while
    /// the store is unreachable fails as a purchase made offline does.
    /// Only requests made before `madeBefore` (the failed attempt's start) fail.
    private func failUndelivered(olderThan timeout: TimeInterval, madeBefore: Date, problem: String) {
        let now = Date()
        let expired = state.withLock { state -> [Pending] in
            let ids = state.order.filter { id in
                guard let pending = state.pending[id] else { return false }
                return !pending.delivered && pending.createdAt < madeBefore && now.timeIntervalSince(pending.createdAt) >= timeout
            }
            for id in ids { state.order.removeAll { $0 == id } }
            return ids.compactMap { state.pending.removeValue(forKey: $0) }
        }
        let error = SKError(.cloudServiceNetworkConnectionFailed,
                            userInfo: [NSLocalizedDescriptionKey: "Cannot connect to the store: \(problem)"])
        for entry in expired { entry.completion?(.failure(error)) }
    }

    private func serve(_ socket: WireConnection.Box, welcome: (uid: UInt32, storefront: String, storefrontID: String)) {
        let (resend, observing, handlers) = state.withLock { state -> ([ClientMessage], Bool, [Handlers]) in
            state.socket = socket
            state.storefront = (welcome.storefront, welcome.storefrontID)
            state.hostedContent = Dictionary(socket.connection.hostedContent.map { ($0.productID, $0) }, uniquingKeysWith: { first, _ in first })
            for id in state.order {
                state.pending[id]?.sentAt = Date()
                state.pending[id]?.delivered = true
            }
            return (state.order.compactMap { state.pending[$0]?.message }, !state.observers.isEmpty, Array(state.handlers.values))
        }
        for handler in handlers { handler.connected(welcome.storefront, welcome.storefrontID) }
        if observing { send(.subscribe(requestID: 0), on: socket) }
        for message in resend { send(message, on: socket) }
        socket.connection.setReceiveTimeout(1)
        while true {
            let message: ServerMessage
            do {
                message = try socket.connection.receive()
            } catch {
                if error.code == .timedOut {
                    resendStale(on: socket)
                    continue
                }
                break
            }
            handle(message)
        }
        state.withLock { $0.socket = nil }
        socket.connection.close()
    }

    private func resendStale(on socket: WireConnection.Box) {
        let now = Date()
        let stale = state.withLock { state -> [ClientMessage] in
            var messages: [ClientMessage] = []
            for id in state.order {
                guard let pending = state.pending[id], now.timeIntervalSince(pending.sentAt) >= Self.resendAfter else { continue }
                state.pending[id]?.sentAt = now
                messages.append(pending.message)
            }
            return messages
        }
        for message in stale { send(message, on: socket) }
    }

    private func handle(_ message: ServerMessage) {
        let handlers = state.withLock { Array($0.handlers.values) }
        switch message {
        case .updated(let records):
            for handler in handlers { handler.updated(records) }
        case .removed(let records):
            for handler in handlers { handler.removed(records) }
        case .storefrontChanged(let country, let identifier):
            state.withLock { $0.storefront = (country, identifier) }
            for handler in handlers { handler.storefrontChanged(country, identifier) }
        case .entitlementsRevoked(let productIDs):
            for handler in handlers { handler.revoked(productIDs) }
        case .promotedPurchase(let product):
            for handler in handlers { handler.promoted(product) }
        case .priceConsent(let productID):
            for handler in handlers { handler.priceConsent(productID) }
        case .result(let id, _, _, _, _), .products(let id, _, _), .transactions(let id, _), .controlResult(let id, _, _, _),
             .subscriptionStatus(let id, _), .signed(let id, _), .receipt(let id, _), .content(let id, _),
             .contentFile(let id, _, _):
            complete(id, with: message)
        case .welcome:
            break
        }
    }

    private func complete(_ id: UInt32, with message: ServerMessage) {
        let pending = state.withLock { state -> Pending? in
            guard let pending = state.pending.removeValue(forKey: id) else { return nil }
            state.order.removeAll { $0 == id }
            return pending
        }
        guard let completion = pending?.completion else { return }
        if case .result(_, let code, let detail, _, let text) = message, code != .ok {
            completion(.failure(Self.error(code: code, detail: detail, message: text)))
        } else {
            completion(.success(message))
        }
    }

    private func failTooNew(_ id: UInt32, needs required: UInt16, speaks version: UInt16) {
        let pending = state.withLock { state -> Pending? in
            guard let pending = state.pending.removeValue(forKey: id) else { return nil }
            state.order.removeAll { $0 == id }
            return pending
        }
        let text = "this storekitd speaks protocol version \(version); the request needs version \(required) (a newer storekitd)"
        pending?.completion?(.failure(SKError(.unknown, userInfo: [NSLocalizedDescriptionKey: text, "StoreKitDaemonResult": "unsupportedVersion"])))
    }

    private func failAll(_ error: SKError) {
        let pending = state.withLock { state -> [Pending] in
            defer {
                state.pending.removeAll()
                state.order.removeAll()
            }
            return state.order.compactMap { state.pending[$0] }
        }
        for entry in pending { entry.completion?(.failure(error)) }
    }

    /// Maps a daemon refusal to the `SKError` an app expects.
    static func error(code: ResultCode, detail: Int32, message: String) -> SKError {
        let skCode: SKError.Code
        switch code {
        case .storeKit: skCode = SKError.Code(rawValue: Int(detail)) ?? .unknown
        case .unknownApp, .permissionDenied: skCode = .clientInvalid
        case .storageFull, .storageFailure, .storeUnreachable, .shuttingDown: skCode = .cloudServiceNetworkConnectionFailed
        default: skCode = .unknown
        }
        return SKError(skCode, userInfo: [NSLocalizedDescriptionKey: message, "StoreKitDaemonResult": code.name])
    }

    /// The app identifier when the app set none: `$STOREKIT_APP_ID`, the bundle identifier, or the
    /// executable's name.
    static func defaultAppIdentifier() -> String {
        if let id = ProcessInfo.processInfo.environment["STOREKIT_APP_ID"], !id.isEmpty { return id }
        if let id = Bundle.main.bundleIdentifier, !id.isEmpty { return id }
        return ProcessInfo.processInfo.processName
    }
}

extension WireConnection {
    /// Shares one connection between the reader thread (receives) and writers (send under a lock).
    final class Box: @unchecked Sendable {
        let connection: WireConnection
        /// The socket's number, read once: `reconnect()` shuts it down from another thread,
        /// under the state lock, while the box is the current socket (closed only after).
        let fd: Int32
        init(_ connection: WireConnection) {
            self.connection = connection
            fd = connection.fd
        }
    }
}
