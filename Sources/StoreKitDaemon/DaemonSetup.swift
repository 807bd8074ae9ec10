import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import StoreKitConnection
import StoreKitEngine
import StoreKitLedger
import StoreKitPosix
import StoreKitWire

/// What `Daemon.main` sets up between a loaded configuration and the serving loop, in order —
/// directories and the runtime lock, the ledger, the engine, the signing identity, the listening
/// sockets, the server — each step's resources released in reverse by `tearDown()`, whether the
/// setup failed part way or the loop ended. `prepare()` throws one typed failure: the message
/// and the journal's message id `main` logs before exiting 1.
final class DaemonSetup {
    struct Failure: Error {
        let message: String
        var id: MessageID?
    }

    private let options: Daemon.Options
    private let configuration: DaemonConfiguration
    private let catalogs: [String: Catalog]
    private let configFile: (path: String, required: Bool)
    private let environment: [String: String]
    private let logger: Logger
    private let uid = UInt32(getuid())
    private let runtimeDirectory: String
    private let stateDirectory: String

    // What `prepare()` acquired, released by `tearDown()` in reverse.
    private var runtimeLock: RuntimeDirectoryLock?
    private var opened: OpenedLedger?
    private var bound: [String] = []
    private var server: Server?

    init(options: Daemon.Options, configuration: DaemonConfiguration, catalogs: [String: Catalog],
         configFile: (path: String, required: Bool), environment: [String: String], logger: Logger) {
        self.options = options
        self.configuration = configuration
        self.catalogs = catalogs
        self.configFile = configFile
        self.environment = environment
        self.logger = logger
        runtimeDirectory = configuration.resolveRuntimeDirectory(explicit: options.runtimeDirectory, environment: environment, uid: uid)
        stateDirectory = configuration.resolveStateDirectory(explicit: options.stateDirectory, environment: environment, uid: uid)
    }

    func prepare() throws(Failure) {
        // Sockets passed by systemd live in a directory the socket units own: it is not touched.
        let activation = SocketActivation.receive(logger: logger)
        let ownsRuntimeDirectory = activation.listeners[.client] == nil || activation.listeners[.control] == nil
        do {
            // Root's state directory is readable by all for root-certificate.pem (the database and
            // keys in it are 0600 and 0700); a user's own daemon keeps its to itself.
            try PrivateDirectory.prepare(stateDirectory, mode: uid == 0 ? 0o755 : 0o700, uid: uid)
            if ownsRuntimeDirectory {
                // Apps of every user reach a system daemon's client socket; a user's own daemon serves that user.
                try PrivateDirectory.prepare(runtimeDirectory, mode: uid == 0 ? 0o755 : 0o700, uid: uid)
                runtimeLock = try RuntimeDirectoryLock.take(in: runtimeDirectory, stateDirectory: stateDirectory)
            }
        } catch {
            throw Failure(message: "Refusing to start: \(error)")
        }
        // Said of the directory, not left to SQLite's "attempt to write a readonly database".
        if access(stateDirectory, W_OK) != 0 {
            let reason = errno == EROFS ? "it is on a read-only file system" : "uid \(uid) may not write into it (\(Errno.current))"
            throw Failure(message: "Refusing to start: the state directory \(stateDirectory) is not writable: \(reason); "
                          + "the database and its commit log are written there")
        }

        // The ledger: the SQLite file in the state directory, or PostgreSQL (`[Store] Database=`).
        let opened: OpenedLedger
        do {
            opened = try OpenedLedger.open(configuration: configuration, databasePath: stateDirectory + "/storekitd.sqlite", logger: logger)
        } catch {
            throw Failure(message: "Failed to open database \(error.path): \(error.message)", id: .storageFailure)
        }
        self.opened = opened
        let engine = makeEngine(store: opened.storage)

        let proof: ProofOfPurchase
        do {
            proof = try ProofOfPurchase.open(stateDirectory: stateDirectory,
                                             runtimeDirectory: ownsRuntimeDirectory ? runtimeDirectory : nil, logger: logger)
        } catch {
            throw Failure(message: "Refusing to start: \(error)", id: .signingKey)
        }

        let listeners: [Server.Listener]
        do {
            listeners = try Daemon.openListeners(activation: activation, runtimeDirectory: runtimeDirectory,
                                                 configuration: configuration, logger: logger, bound: &bound)
        } catch {
            throw Failure(message: "Failed to listen in \(runtimeDirectory): \(error)")
        }

        let configFile = configFile
        let reloader: Server.Reloader = { running in
            do {
                var reloaded = try DaemonConfiguration.load(configFile: configFile.path, required: configFile.required)
                let catalogs = try Daemon.loadCatalogs(&reloaded, previous: running)
                return .success((reloaded, catalogs))
            } catch {
                return .failure(Server.ReloadFailure("\(error)"))
            }
        }
        do {
            server = try Server(engine: engine, proof: proof, configuration: configuration, listeners: listeners,
                                resumedSessions: activation.sessions, fleet: opened.changeFeed, logger: logger,
                                notifier: ServiceNotifier(environment: environment), reloader: reloader,
                                testHooks: options.testHooks)
        } catch {
            throw Failure(message: "Serving loop failed: \(error)")
        }
    }

    /// The engine over `store`, with the configured storefront and the store clock's offset.
    private func makeEngine(store: any Ledger) -> PaymentQueueEngine {
        let engine = PaymentQueueEngine(store: store, catalogs: catalogs)
        // In a fleet, the other hosts of the account see its purchases of everything but consumables.
        store.shareAcrossHosts { [unowned engine] app, productID in
            engine.product(app: app, id: productID).map { $0.kind != .consumable } ?? true
        }
        if let storefront = configuration.storefront ?? catalogs.values.first?.settings.storefront {
            engine.storefront = storefront
        }
        if let offset = try? store.setting("clock.offset").flatMap({ Int64($0) }) {
            engine.clock.offsetMilliseconds = offset
        }
        return engine
    }

    /// Runs the serving loop until it stops: 0 for a clean stop, 1 otherwise. The daemon's threads
    /// start here in this order and stop in the reverse: the ledger's own (SQLite: the commit
    /// log's fdatasync, saves' COMMIT, checkpoints), the signers (with the loop, in `run()`), the
    /// one-off integrity check.
    func serve() -> Int32 {
        guard let server, let opened else { return 1 }
        let wakeup = server.wakeup
        opened.storage.startBackgroundWork { wakeup.signal() }
        defer { opened.storage.stopBackgroundWork() }
        logger.notice("Serving \(catalogs.count) app\(catalogs.count == 1 ? "" : "s") on \(runtimeDirectory), database \(opened.storage.path); "
                      + Daemon.howClientsFindIt(runtimeDirectory: runtimeDirectory, uid: uid, environment: environment),
                      id: .started)
        server.logHostedContent()
        server.startIntegrityCheck()
        do {
            try server.run()
        } catch is Server.Stopped {
            return 1   // said by the server's shutdown
        } catch {
            logger.error("Serving loop failed: \(error)")
            return 1
        }
        return 0
    }

    /// Releases what `prepare()` acquired, in reverse: the server, the socket files this daemon
    /// bound, the ledger, the runtime directory's lock.
    func tearDown() {
        server = nil
        for path in bound { unlink(path) }
        bound = []
        opened?.close()
        opened = nil
        runtimeLock.take()?.release()
    }
}
