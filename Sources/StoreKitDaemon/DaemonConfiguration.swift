// The daemon's settings from storekitd.conf, its drop-ins and apps.d, as plain values.
//
// Loading and path resolution are in DaemonConfiguration+Loading.swift. Catalogue paths are only
// resolved here; reading the catalogues is the caller's job (errors via AppRegistration.catalogError).
import StoreKitEngine
import StoreKitPostgres
#if canImport(Glibc)
import Glibc
#endif

/// Everything storekitd.conf can set, with the built-in defaults for what it does not.
public struct DaemonConfiguration: Sendable, Equatable {
    // [Daemon]
    /// `RuntimeDirectory=`: absolute path for the sockets; nil = environment or built-in default.
    public var runtimeDirectory: String?
    /// `StateDirectory=`: absolute path for the database; nil = environment or built-in default.
    public var stateDirectory: String?
    /// `AdminGroup=`: group name or numeric gid whose members may use the control socket
    /// (root always may); nil = root only. Checked to resolve when loaded; see `adminGroupID()`.
    public var adminGroup: String?
    /// `LogLevel=`: debug | info | notice | warning | err.
    public var logLevel: LogLevel
    /// `Storefront=`: 3-letter storefront code (upper-cased) overriding the catalogue's; nil = catalogue.
    public var storefront: String?

    // [Store]
    /// `Database=`: a libpq connection string (`postgresql://…` or `key=value …`) for a
    /// PostgreSQL ledger; nil = the embedded SQLite file in the state directory (the default).
    public var database: String?
    /// `HostName=`: this host's name in a fleet sharing the PostgreSQL ledger; nil = the machine id.
    public var hostName: String?
    /// `AccountFrom=`: how a local uid becomes the fleet account its purchases belong to.
    public var accountFrom: FleetMember.AccountSource
    /// This host in the fleet: `HostName=` (else the machine id) and `AccountFrom=`.
    public var fleetMember: FleetMember { FleetMember(host: hostName ?? FleetMember.defaultHost, accountFrom: accountFrom) }

    // [Limits]
    /// `MaxFrameSize=`: largest frame body in bytes (K/M/G suffixes, 1024-based).
    public var maxFrameSize: Int
    /// `MaxConnections=`: client connections in total.
    public var maxConnections: Int
    /// `MaxConnectionsPerUID=`: client connections of one uid.
    public var maxConnectionsPerUID: Int
    /// `MaxObserversPerConnection=`: observer registrations on one connection.
    public var maxObserversPerConnection: Int
    /// `MaxRequestsInFlight=`: unanswered requests of one connection.
    public var maxRequestsInFlight: Int
    /// `PartialFrameTimeoutSec=`: how long a started frame may stay incomplete.
    public var partialFrameTimeout: TimeSpan
    /// `OutputHighWaterMark=`: bytes queued for one client: past it, its requests wait (and it is
    /// not read) until it has read its output; still past it after a write, it is disconnected.
    public var outputHighWaterMark: Int
    /// `OutputBudget=`: bytes queued for all clients together; past it, the clients holding the
    /// most unread output are disconnected until the total is under it again.
    public var outputBudget: Int
    /// `SendTimeoutSec=`: how long queued output may make no progress before the client is disconnected.
    public var sendTimeout: TimeSpan
    /// `MaxControlConnections=`: control-socket connections, counted apart from client connections.
    public var maxControlConnections: Int
    /// `HelloTimeoutSec=`: how long a new connection may take to say hello.
    public var helloTimeout: TimeSpan
    /// `MaxApplicationUsernameLength=`: bytes of a payment's applicationUsername.
    public var maxApplicationUsernameLength: Int
    /// `MaxRequestsPerUIDPerSecond=`: client requests of one uid per second (0: no limit); a
    /// burst of twice as many is allowed.
    public var maxRequestsPerUIDPerSecond: Int
    /// `MaxUnfinishedPerQueue=`: unfinished transactions of one (uid, app); more payments are refused.
    public var maxUnfinishedPerQueue: Int

    // [Observers]
    /// `ActivationIntervalSec=`: minimum interval between starts of one app's `ObserverUnit=`.
    public var observerActivationInterval: TimeSpan
    /// `UIDs=`: the uids observer units may be started for; nil: UID_MIN…UID_MAX of /etc/login.defs.
    public var observerUIDRange: ClosedRange<UInt32>?

    /// The uids observer units may be started for (`UIDs=`, else /etc/login.defs).
    public func observerUIDs(loginDefinitions: String = PersonUIDs.loginDefinitionsPath) -> PersonUIDs {
        if let observerUIDRange { return PersonUIDs(range: observerUIDRange, source: "[Observers] UIDs=") }
        return PersonUIDs.fromLoginDefinitions(path: loginDefinitions)
    }

    // [Family], each section one family (they add up across storekitd.conf and its drop-ins)
    public var families: [Family]
    /// The families' uids, checked: no buyer in two of them.
    public var familyGroups: FamilyGroups

    /// App registrations from apps.d, sorted by id.
    public var apps: [AppRegistration]

    /// Every file read, in the order read.
    public var sourceFiles: [String]

    /// The built-in defaults: what the daemon runs with when no config file exists.
    public init() {
        runtimeDirectory = nil
        stateDirectory = nil
        adminGroup = nil
        logLevel = .info
        storefront = nil
        database = nil
        hostName = nil
        accountFrom = .userName
        maxFrameSize = 1 << 20
        maxConnections = 16384
        maxConnectionsPerUID = 4096
        maxObserversPerConnection = 64
        maxRequestsInFlight = 256
        partialFrameTimeout = TimeSpan(seconds: 10)
        outputHighWaterMark = 8 << 20
        outputBudget = 256 << 20
        sendTimeout = TimeSpan(seconds: 30)
        maxControlConnections = 64
        helloTimeout = TimeSpan(seconds: 10)
        maxApplicationUsernameLength = 256
        maxRequestsPerUIDPerSecond = 2_000
        maxUnfinishedPerQueue = 10_000
        observerActivationInterval = TimeSpan(seconds: 30)
        observerUIDRange = nil
        families = []
        familyGroups = FamilyGroups()
        apps = []
        sourceFiles = []
    }

    public static let defaults = DaemonConfiguration()

    /// The registration of app `id`, or nil when apps.d does not declare it.
    public func app(_ id: String) -> AppRegistration? {
        apps.first { $0.id == id }
    }

    /// The numeric gid of `adminGroup` (a number is taken as is, a name is looked up now),
    /// or nil when none is configured or the group no longer exists.
    public func adminGroupID() -> UInt32? {
        adminGroup.flatMap(Self.groupID(named:))
    }

    static func groupID(named name: String) -> UInt32? {
        if let number = UInt32(name) { return number == UInt32.max ? nil : number }
        var size = 4096
        while size <= 1 << 20 {
            var entry = group()
            var result: UnsafeMutablePointer<group>?
            var buffer = [CChar](repeating: 0, count: size)
            let status = getgrnam_r(name, &entry, &buffer, buffer.count, &result)
            if status == ERANGE { size *= 4; continue }
            guard status == 0, let result else { return nil }
            return result.pointee.gr_gid
        }
        return nil
    }
}

/// Log verbosity, with syslog/journald priorities as raw values. Ordered by priority, so the
/// more severe level is the smaller one: `.err < .warning < .notice < .info < .debug`; a message
/// is logged when `message <= configured`.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    case err = 3
    case warning = 4
    case notice = 5
    case info = 6
    case debug = 7

    /// Accepts the names used by systemd's LogLevel= (debug, info, notice, warning, err), the
    /// aliases "error" and "warn", and the numbers 3…7.
    public init?(name: String) {
        switch name.lowercased() {
        case "err", "error", "3": self = .err
        case "warning", "warn", "4": self = .warning
        case "notice", "5": self = .notice
        case "info", "6": self = .info
        case "debug", "7": self = .debug
        default: return nil
        }
    }

    public var name: String {
        switch self {
        case .err: "err"
        case .warning: "warning"
        case .notice: "notice"
        case .info: "info"
        case .debug: "debug"
        }
    }

    public var description: String { name }

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}
