import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import StoreKitConnection
import StoreKitEngine
import StoreKitPosix
import StoreKitWire

/// storekitd from arguments to exit status: parse → set up → run → one exit path.
public enum Daemon {
    public static let version = "0.1.0"

    public struct Options {
        public var configFile: String?
        public var runtimeDirectory: String?
        public var stateDirectory: String?
        public var logTarget: String?
        public var logLevel: LogLevel?
        public var checkConfig = false
        public var verifyObserverUnit: String?
        public var testHooks = false
    }

    #if STOREKIT_TEST_HOOKS
    static let testHooksUsage = "--enable-test-hooks  accept debug control commands (debug builds, for the test suite only)\n  "
    #else
    static let testHooksUsage = ""
    #endif

    static let usage = """
        Usage: storekitd [OPTIONS]

        The StoreKit payment queue daemon.

        Options:
          --config FILE        configuration file (default: $CONFIGURATION_DIRECTORY/storekitd.conf,
                               else /etc/storekitd/storekitd.conf; built-in defaults when absent)
          --runtime-dir DIR    directory for storekitd.sock and control.sock
          --state-dir DIR      directory for the database (storekitd.sqlite)
          --log-target T       journal or stderr (default: journal when stderr is the journal)
          --log-level L        debug, info, notice, warning or err
          --check-config       load configuration and catalogues, report, and exit
          --verify-observer-unit UNIT
                               exit 0 when UNIT is an instance of a registered ObserverUnit=
                               template for a person's uid (UID_MIN-UID_MAX of /etc/login.defs,
                               or [Observers] UIDs=; used by the polkit rule), else 1
          \(testHooksUsage)-h, --help           show this help
          --version            show the version

        """

    /// Exit codes: 0 clean stop, 1 failure (config, database, sockets), 64 usage.
    public static func main(_ arguments: [String]) -> Int32 {
        // Before any thread exists: SIGTERM, SIGINT and SIGHUP are read from a signalfd by the
        // serving loop, so no thread (checkpointer, integrity check, D-Bus calls) may take them.
        Server.blockSignals()
        // Everything the daemon creates (database, commit log, backups, directories) is its own.
        umask(0o077)
        let options: Options
        switch parse(Array(arguments.dropFirst())) {
        case .success(let parsed): options = parsed
        case .failure(let exit): return exit.code
        }
        let environment = ProcessInfo.processInfo.environment
        raiseFileLimit()
        var logger = Logger(target: LogTarget.detect(requested: options.logTarget, environment: environment))

        let located = DaemonConfiguration.locateConfigFile(explicit: options.configFile, environment: environment)
        var configuration: DaemonConfiguration
        let catalogs: [String: Catalog]
        do {
            configuration = try DaemonConfiguration.load(configFile: located.path, required: located.required)
            catalogs = options.verifyObserverUnit == nil ? try loadCatalogs(&configuration) : [:]
        } catch {
            logger.error("Failed to load configuration: \(error)")
            return 1
        }
        logger.maximumPriority = LogPriority(rawValue: (options.logLevel ?? configuration.logLevel).rawValue) ?? .info
        if let unit = options.verifyObserverUnit { return verifyObserverUnit(unit, configuration: configuration) }
        if options.checkConfig {
            print("Configuration OK: \(configuration.sourceFiles.joined(separator: ", ")); \(catalogs.count) apps")
            return 0
        }

        let setup = DaemonSetup(options: options, configuration: configuration, catalogs: catalogs, configFile: located,
                                environment: environment, logger: logger)
        defer { setup.tearDown() }
        do throws(DaemonSetup.Failure) {
            try setup.prepare()
        } catch {
            logger.error(error.message, id: error.id)
            return 1
        }
        return setup.serve()
    }

    /// `--verify-observer-unit UNIT` (the polkit rule's question): 0 when UNIT is an instance of
    /// a registered template for a person's uid, else 1, saying why.
    static func verifyObserverUnit(_ unit: String, configuration: DaemonConfiguration) -> Int32 {
        guard let (app, uid) = configuration.apps.lazy
            .compactMap({ app in ObserverActivator.instanceUID(unit, of: app.observerUnit).map { (app, $0) } }).first else {
            writeToStandardError("storekitd: \(unit) is not an instance of a registered ObserverUnit=\n")
            return 1
        }
        let people = configuration.observerUIDs()
        guard people.contains(uid) else {
            writeToStandardError("storekitd: \(unit) would run as uid \(uid), which is not a person's: observer units "
                                 + "run only for uids \(people)\n")
            return 1
        }
        print("\(unit) is the observer of \(app.id)")
        return 0
    }

    /// Every connection is an fd: lift the soft limit to the hard one (systemd's LimitNOFILE= sets both).
    static func raiseFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    /// Reads every app's catalogue, and lists and hashes the hosted content of its products
    /// (into `configuration`): content is only for a non-consumable product of the catalogue.
    /// At a reload, `previous` (the running configuration) gives the digests of files that did
    /// not change, which are not read again.
    static func loadCatalogs(_ configuration: inout DaemonConfiguration, previous: DaemonConfiguration? = nil) throws
        -> [String: Catalog]
    {
        var known: [String: (HostedContent.FileStamp, [UInt8])] = [:]
        for content in previous?.apps.flatMap(\.hostedContent) ?? [] {
            known.merge(content.digests) { first, _ in first }
        }
        var catalogs: [String: Catalog] = [:]
        for index in configuration.apps.indices {
            let app = configuration.apps[index]
            let catalog: Catalog
            do {
                catalog = try Catalog.load(path: app.catalogPath)
            } catch {
                throw app.catalogError("\(error)")
            }
            catalogs[app.id] = catalog
            for contentIndex in app.hostedContent.indices {
                let content = app.hostedContent[contentIndex]
                guard let product = catalog.product(content.productID) else {
                    throw ConfigError(file: content.file, line: content.line,
                                      message: "[HostedContent] names \(content.productID), which \(app.catalogPath) does not have")
                }
                guard product.kind == .nonConsumable else {
                    throw ConfigError(file: content.file, line: content.line,
                                      message: "[HostedContent] of \(content.productID): content is for non-consumable products "
                                          + "(as on the App Store), and it is \(product.kind.name)")
                }
                try configuration.apps[index].hostedContent[contentIndex].scan(reusing: known)
            }
        }
        return catalogs
    }

    /// How a client reaches the sockets in `runtimeDirectory`, for the start line: found by
    /// itself (the lookup order of `SocketLocation`), or with `STOREKITD_SOCKET`.
    static func howClientsFindIt(runtimeDirectory: String, uid: UInt32, environment: [String: String]) -> String {
        let socket = runtimeDirectory + "/storekitd.sock"
        if runtimeDirectory == SocketLocation.systemDirectory { return "clients of every user find it there" }
        if SocketLocation.userDirectories(environment: environment, uid: uid).contains(runtimeDirectory) {
            return "clients of uid \(uid) find it there by themselves; others need STOREKITD_SOCKET=\(socket)"
        }
        return "clients need STOREKITD_SOCKET=\(socket) (and storekitctl STOREKITD_CONTROL_SOCKET=\(runtimeDirectory)/control.sock)"
    }

    static func openListeners(activation: SocketActivation, runtimeDirectory: String, configuration: DaemonConfiguration,
                              logger: Logger, bound: inout [String]) throws -> [Server.Listener] {
        var listeners: [Server.Listener] = []
        for kind in [SocketKind.client, .control] {
            if let fd = activation.listeners[kind] {
                logger.info("Using the passed \(kind.rawValue) socket (fd \(fd))")
                listeners.append(.init(Socket(adopting: fd), kind: kind))
                continue
            }
            let path = runtimeDirectory + (kind == .client ? "/storekitd.sock" : "/control.sock")
            // Apps of every user connect to the client socket; the control socket is for admins,
            // and the daemon checks the peer again on every connection whatever the mode says.
            let mode: mode_t = kind == .client ? 0o666 : (configuration.adminGroupID() != nil ? 0o660 : 0o600)
            let socket = try Socket.listen(path: path, mode: mode)
            if kind == .control, let gid = configuration.adminGroupID() {
                _ = chown(path, UInt32.max, gid)
            }
            bound.append(path)
            listeners.append(.init(socket, kind: kind))
        }
        return listeners
    }

    enum ParseExit: Error {
        case exit(Int32)
        var code: Int32 { if case .exit(let code) = self { return code }; return 1 }
    }

    static func parse(_ arguments: [String]) -> Result<Options, ParseExit> {
        var options = Options()
        var index = 0
        func value(_ name: String) -> String? {
            index += 1
            return index < arguments.count ? arguments[index] : nil
        }
        func fail(_ message: String) -> Result<Options, ParseExit> {
            writeToStandardError("storekitd: \(message)\n\(usage)")
            return .failure(.exit(64))
        }
        while index < arguments.count {
            var argument = arguments[index]
            var inline: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                inline = String(argument[argument.index(after: equals)...])
                argument = String(argument[..<equals])
            }
            func take() -> String? { inline ?? value(argument) }
            switch argument {
            case "-h", "--help":
                print(usage, terminator: "")
                return .failure(.exit(0))
            case "--version":
                print("storekitd \(version)")
                return .failure(.exit(0))
            case "--config":
                guard let path = take() else { return fail("--config needs a FILE") }
                options.configFile = path
            case "--runtime-dir":
                guard let path = take() else { return fail("--runtime-dir needs a DIR") }
                options.runtimeDirectory = path
            case "--state-dir":
                guard let path = take() else { return fail("--state-dir needs a DIR") }
                options.stateDirectory = path
            case "--log-target":
                guard let target = take(), ["journal", "stderr", "console"].contains(target) else {
                    return fail("--log-target must be journal or stderr")
                }
                options.logTarget = target
            case "--log-level":
                guard let name = take(), let level = LogLevel(name: name) else {
                    return fail("--log-level must be debug, info, notice, warning or err")
                }
                options.logLevel = level
            case "--check-config":
                options.checkConfig = true
            case "--verify-observer-unit":
                guard let unit = take() else { return fail("--verify-observer-unit needs a UNIT") }
                options.verifyObserverUnit = unit
            #if STOREKIT_TEST_HOOKS
            case "--enable-test-hooks":
                options.testHooks = true
            #endif
            default:
                return fail("unknown option '\(arguments[index])'")
            }
            index += 1
        }
        return .success(options)
    }
}

/// Writes `text` to standard error, unbuffered (usage and command-line errors).
func writeToStandardError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
}
