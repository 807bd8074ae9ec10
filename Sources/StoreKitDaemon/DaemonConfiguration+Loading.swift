// Reading storekitd.conf, its drop-ins and apps.d into a DaemonConfiguration, and deciding which
// files and directories to use from command line, environment and config (DESIGN.md, "Sockets,
// paths, environment"). Every rejected line is reported as FILE:LINE: message.
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import StoreKitConnection
import StoreKitPosix
import StoreKitPostgres
import StoreKitSigning

extension DaemonConfiguration {
    /// Loads `configFile` (if nil or missing when `required == false`: built-in defaults), then
    /// `<file>.d/*.conf` in lexical order (i.e. storekitd.conf.d/ beside it), then `apps.d/*.conf`
    /// beside it (each file one [App] section).
    ///
    /// Drop-ins and apps.d are read even when the main file itself is missing. Later files override
    /// earlier ones key by key; an empty value (`Key=`) resets a key to its built-in default.
    /// Drop-ins that are symlinks to /dev/null are masked (skipped), as in systemd.
    public static func load(configFile: String?, required: Bool) throws(ConfigError) -> DaemonConfiguration {
        var config = DaemonConfiguration()
        guard let configFile, !configFile.isEmpty else { return config }

        if required || FileManager.default.fileExists(atPath: configFile) {
            try config.apply(ConfigFile.read(path: configFile))
            config.sourceFiles.append(configFile)
        }
        for path in try dropIns(in: configFile + ".d") {
            try config.apply(ConfigFile.read(path: path))
            config.sourceFiles.append(path)
        }

        let directory = parentDirectory(of: configFile)
        let absoluteDirectory = absolutePath(directory.isEmpty ? "." : directory)
        var apps: [String: AppRegistration] = [:]
        for path in try dropIns(in: joinPath(directory, "apps.d")) {
            let app = try AppRegistration(parsing: ConfigFile.read(path: path), configDirectory: absoluteDirectory)
            config.sourceFiles.append(path)
            if let first = apps[app.id] {
                throw ConfigError(file: app.file, line: app.line,
                                  message: "duplicate app ID '\(app.id)' (already declared at \(first.file):\(first.line))")
            }
            apps[app.id] = app
        }
        config.apps = apps.values.sorted { $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) }
        return config
    }

    /// Which config file to use: explicit `--config` path > $CONFIGURATION_DIRECTORY/storekitd.conf >
    /// /etc/storekitd/storekitd.conf; returns (path, required) where required is true only for an
    /// explicit path.
    public static func locateConfigFile(explicit: String?, environment: [String: String]) -> (path: String, required: Bool) {
        if let explicit, !explicit.isEmpty { return (explicit, true) }
        if let directory = firstPath(environment["CONFIGURATION_DIRECTORY"]) {
            return (joinPath(directory, "storekitd.conf"), false)
        }
        return ("/etc/storekitd/storekitd.conf", false)
    }

    /// Runtime dir: explicit > $RUNTIME_DIRECTORY (first of a colon-separated list) > config
    /// RuntimeDirectory= > /run/storekitd when uid == 0, else $XDG_RUNTIME_DIR/storekitd
    /// (fallback /tmp/storekitd-<uid> if XDG_RUNTIME_DIR is unset or not absolute).
    public func resolveRuntimeDirectory(explicit: String?, environment: [String: String], uid: UInt32) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromSystemd = Self.firstPath(environment["RUNTIME_DIRECTORY"]) { return fromSystemd }
        if let runtimeDirectory { return runtimeDirectory }
        if uid == 0 { return SocketLocation.systemDirectory }
        // The first of the directories clients look in (SocketLocation: one order for both).
        if let xdg = Self.absoluteVariable(environment["XDG_RUNTIME_DIR"]) { return Self.joinPath(xdg, "storekitd") }
        return SocketLocation.temporaryDirectory(uid: uid)
    }

    /// State dir: explicit > $STATE_DIRECTORY (first of a colon-separated list) > config
    /// StateDirectory= > /var/lib/storekitd as root, else $XDG_STATE_HOME/storekitd, else
    /// $HOME/.local/state/storekitd (HOME from the environment, else the password database;
    /// last resort /var/tmp/storekitd-<uid>).
    public func resolveStateDirectory(explicit: String?, environment: [String: String], uid: UInt32) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromSystemd = Self.firstPath(environment["STATE_DIRECTORY"]) { return fromSystemd }
        if let stateDirectory { return stateDirectory }
        if uid == 0 { return "/var/lib/storekitd" }
        if let xdg = Self.absoluteVariable(environment["XDG_STATE_HOME"]) { return Self.joinPath(xdg, "storekitd") }
        if let home = Self.absoluteVariable(environment["HOME"]) ?? Self.passwordHome(uid: uid) {
            return Self.joinPath(home, ".local/state/storekitd")
        }
        return "/var/tmp/storekitd-\(uid)"
    }
}

// MARK: - Applying storekitd.conf and its drop-ins

extension DaemonConfiguration {
    mutating func apply(_ file: ConfigFile) throws(ConfigError) {
        for section in file.sections {
            switch section.name {
            case "Daemon", "Store", "Limits", "Observers":
                for entry in section.entries {
                    try apply(entry, section: section.name, file: file.path)
                }
            case "Family":
                families.append(try Family(parsing: section, file: file.path))
                familyGroups = try Family.groups(families)
            case "App":
                throw ConfigError(file: file.path, line: section.line,
                                  message: "unknown section [App] (app registrations belong in apps.d/*.conf)")
            default:
                throw ConfigError(file: file.path, line: section.line, message: "unknown section [\(section.name)]")
            }
        }
    }

    private mutating func apply(_ entry: ConfigFile.Entry, section: String, file: String) throws(ConfigError) {
        let value = ValueParser(file: file, entry: entry)
        let defaults = DaemonConfiguration.defaults
        switch (section, entry.key) {
        case ("Daemon", "RuntimeDirectory"):
            runtimeDirectory = try value.isEmpty ? nil : value.absolutePath()
        case ("Daemon", "StateDirectory"):
            stateDirectory = try value.isEmpty ? nil : value.absolutePath()
        case ("Daemon", "AdminGroup"):
            adminGroup = try value.isEmpty ? nil : value.group()
        case ("Daemon", "LogLevel"):
            logLevel = try value.isEmpty ? defaults.logLevel : value.logLevel()
        case ("Daemon", "Storefront"):
            storefront = try value.isEmpty ? nil : value.storefront()
        case ("Store", "Database"):
            database = try value.isEmpty ? nil : value.connectionString()
        case ("Store", "HostName"):
            hostName = try value.isEmpty ? nil : value.hostName()
        case ("Store", "AccountFrom"):
            accountFrom = try value.isEmpty ? defaults.accountFrom : value.accountSource()
        case ("Limits", "MaxFrameSize"):
            maxFrameSize = try value.isEmpty ? defaults.maxFrameSize : value.size(in: 256...(1 << 30))
        case ("Limits", "MaxConnections"):
            maxConnections = try value.isEmpty ? defaults.maxConnections : value.count(in: 1...Int(Int32.max))
        case ("Limits", "MaxConnectionsPerUID"):
            maxConnectionsPerUID = try value.isEmpty ? defaults.maxConnectionsPerUID : value.count(in: 1...Int(Int32.max))
        case ("Limits", "MaxObserversPerConnection"):
            maxObserversPerConnection = try value.isEmpty ? defaults.maxObserversPerConnection : value.count(in: 1...Int(Int32.max))
        case ("Limits", "MaxRequestsInFlight"):
            maxRequestsInFlight = try value.isEmpty ? defaults.maxRequestsInFlight : value.count(in: 1...Int(Int32.max))
        case ("Limits", "PartialFrameTimeoutSec"):
            partialFrameTimeout = try value.isEmpty ? defaults.partialFrameTimeout : value.timeSpan(allowZero: false)
        case ("Limits", "OutputHighWaterMark"):
            outputHighWaterMark = try value.isEmpty ? defaults.outputHighWaterMark : value.size(in: 1...Int(Int64.max))
        case ("Limits", "OutputBudget"):
            outputBudget = try value.isEmpty ? defaults.outputBudget : value.size(in: 1...Int(Int64.max))
        case ("Limits", "SendTimeoutSec"):
            sendTimeout = try value.isEmpty ? defaults.sendTimeout : value.timeSpan(allowZero: false)
        case ("Limits", "MaxControlConnections"):
            maxControlConnections = try value.isEmpty ? defaults.maxControlConnections : value.count(in: 1...Int(Int32.max))
        case ("Limits", "HelloTimeoutSec"):
            helloTimeout = try value.isEmpty ? defaults.helloTimeout : value.timeSpan(allowZero: false)
        case ("Limits", "MaxApplicationUsernameLength"):
            maxApplicationUsernameLength = try value.isEmpty ? defaults.maxApplicationUsernameLength : value.size(in: 0...(1 << 20))
        case ("Limits", "MaxRequestsPerUIDPerSecond"):
            maxRequestsPerUIDPerSecond = try value.isEmpty ? defaults.maxRequestsPerUIDPerSecond : value.count(in: 0...Int(Int32.max))
        case ("Limits", "MaxUnfinishedPerQueue"):
            maxUnfinishedPerQueue = try value.isEmpty ? defaults.maxUnfinishedPerQueue : value.count(in: 1...Int(Int32.max))
        case ("Observers", "ActivationIntervalSec"):
            observerActivationInterval = try value.isEmpty ? defaults.observerActivationInterval : value.timeSpan(allowZero: true)
        case ("Observers", "UIDs"):
            observerUIDRange = try value.isEmpty ? nil : value.uidRange()
        default:
            throw ConfigError(file: file, line: entry.line, message: "unknown key '\(entry.key)' in section [\(section)]")
        }
    }
}

// MARK: - apps.d

extension AppRegistration {
    /// Builds the registration from one apps.d file, which holds exactly one [App] section.
    init(parsing file: ConfigFile, configDirectory: String) throws(ConfigError) {
        var header: ConfigFile.Section?
        var content: [HostedContent] = []
        var offerKeys: [String: OfferKey] = [:]
        for section in file.sections {
            if section.name == "OfferKey" {
                let key = try OfferKey(parsing: section, file: file.path, configDirectory: configDirectory)
                if let first = offerKeys[key.id] {
                    throw ConfigError(file: file.path, line: section.line,
                                      message: "second [OfferKey] with ID=\(key.id) (the first is at line \(first.line))")
                }
                offerKeys[key.id] = key
                continue
            }
            if section.name == "HostedContent" {
                let parsed = try HostedContent(parsing: section, file: file.path, configDirectory: configDirectory)
                if let first = content.first(where: { $0.productID == parsed.productID }) {
                    throw ConfigError(file: file.path, line: section.line,
                                      message: "second [HostedContent] of \(parsed.productID) (the first is at line \(first.line)); a product has one content")
                }
                content.append(parsed)
                continue
            }
            guard section.name == "App" else {
                let hint = ["Daemon", "Store", "Limits", "Observers", "Family"].contains(section.name) ? " (it belongs in storekitd.conf)" : ""
                throw ConfigError(file: file.path, line: section.line, message: "unknown section [\(section.name)]\(hint)")
            }
            if let first = header {
                throw ConfigError(file: file.path, line: section.line,
                                  message: "second [App] section (the first is at line \(first.line)); each file in apps.d declares one app")
            }
            header = section
        }
        guard let header else {
            throw ConfigError(file: file.path, line: nil, message: "no [App] section")
        }

        var id: (value: String, line: Int)?
        var catalog: (value: String, line: Int)?
        var executable: String?
        var observerUnit: String?
        var environment = SigningEnvironment.xcode
        var version = "1.0"
        for entry in header.entries {
            let value = ValueParser(file: file.path, entry: entry)
            switch entry.key {
            case "ID":
                guard AppRegistration.isValidID(entry.value) else {
                    throw value.invalid("expected a reverse-DNS name of letters, digits, '.', '-' and '_' (at most 255 bytes)")
                }
                id = (entry.value, entry.line)
            case "Catalog":
                guard !value.isEmpty else { throw value.invalid("expected the path of a .storekit file") }
                let path = entry.value.hasPrefix("/") ? entry.value : configDirectory + "/" + entry.value
                catalog = (DaemonConfiguration.normalizedPath(path), entry.line)
            case "Executable":
                executable = try value.isEmpty ? nil : value.absolutePath()
            case "ObserverUnit":
                guard value.isEmpty || (entry.value.hasSuffix("@.service") && AppRegistration.isValidServiceName(entry.value)) else {
                    throw value.invalid("expected a template unit name ending in @.service (its instance is the buyer's uid)")
                }
                observerUnit = value.isEmpty ? nil : entry.value
            case "Environment":
                guard let chosen = SigningEnvironment(rawValue: entry.value) else {
                    throw value.invalid("expected Xcode or Sandbox")
                }
                environment = chosen
            case "Version":
                version = try value.versionString()
            default:
                throw ConfigError(file: file.path, line: entry.line, message: "unknown key '\(entry.key)' in section [App]")
            }
        }
        guard let id else {
            throw ConfigError(file: file.path, line: header.line, message: "missing required key ID= in section [App]")
        }
        guard let catalog else {
            throw ConfigError(file: file.path, line: header.line, message: "missing required key Catalog= in section [App]")
        }
        self.init(id: id.value, catalogPath: catalog.value, executable: executable, observerUnit: observerUnit,
                  environment: environment, version: version, file: file.path, line: id.line, catalogLine: catalog.line)
        hostedContent = content
        self.offerKeys = offerKeys
    }
}

extension OfferKey {
    /// Reads one `[OfferKey]` section and its key file.
    init(parsing section: ConfigFile.Section, file: String, configDirectory: String) throws(ConfigError) {
        var id: String?
        var path: (value: String, line: Int)?
        for entry in section.entries {
            let value = ValueParser(file: file, entry: entry)
            switch entry.key {
            case "ID":
                guard !entry.value.isEmpty, entry.value.utf8.count <= 255 else { throw value.invalid("expected the key's identifier") }
                id = entry.value
            case "Key":
                guard !entry.value.isEmpty else { throw value.invalid("expected a PEM file, relative to the config dir or absolute") }
                path = (DaemonConfiguration.normalizedPath(entry.value.hasPrefix("/") ? entry.value : configDirectory + "/" + entry.value),
                        entry.line)
            default:
                throw ConfigError(file: file, line: entry.line, message: "unknown key '\(entry.key)' in section [OfferKey]")
            }
        }
        guard let id else { throw ConfigError(file: file, line: section.line, message: "missing required key ID= in section [OfferKey]") }
        guard let path else { throw ConfigError(file: file, line: section.line, message: "missing required key Key= in section [OfferKey]") }
        guard let data = FileManager.default.contents(atPath: path.value) else {
            throw ConfigError(file: file, line: path.line,
                              message: "cannot read the offer key \(path.value) (missing, or not readable by storekitd's user)")
        }
        let bytes = Array(data)
        let key: OfferVerificationKey
        do {
            key = try OfferVerificationKey(pem: bytes)
        } catch {
            throw ConfigError(file: file, line: path.line, message: "\(path.value) is not a P-256 key in PEM: \(error)")
        }
        if key.heldPrivateKey, let mode = try? FileSystem.status(of: path.value).st_mode, mode & 0o077 != 0 {
            throw ConfigError(file: file, line: path.line, message: "\(path.value) holds the private key, and other users may read it "
                              + "(mode \(String(mode & 0o7777, radix: 8))): make it 0600 (owned by storekitd's user), or give the "
                              + "public key only (openssl ec -in KEY.p8 -pubout)")
        }
        self.init(id: id, path: path.value, key: key, file: file, line: section.line)
    }
}

extension HostedContent {
    /// Reads one `[HostedContent]` section: `Product=` and `Path=` required, `Version=` (default
    /// 1.0). The folder is listed and hashed later (`scan()`), once the catalogue says the
    /// product may have content.
    init(parsing section: ConfigFile.Section, file: String, configDirectory: String) throws(ConfigError) {
        var product: String?
        var path: String?
        var version = "1.0"
        for entry in section.entries {
            let value = ValueParser(file: file, entry: entry)
            switch entry.key {
            case "Product":
                guard !entry.value.isEmpty, entry.value.utf8.count <= 255 else { throw value.invalid("expected a product identifier") }
                product = entry.value
            case "Path":
                guard !entry.value.isEmpty else { throw value.invalid("expected a folder, relative to the config dir or absolute") }
                path = DaemonConfiguration.normalizedPath(entry.value.hasPrefix("/") ? entry.value : configDirectory + "/" + entry.value)
            case "Version":
                version = try value.versionString()
            default:
                throw ConfigError(file: file, line: entry.line, message: "unknown key '\(entry.key)' in section [HostedContent]")
            }
        }
        guard let product else {
            throw ConfigError(file: file, line: section.line, message: "missing required key Product= in section [HostedContent]")
        }
        guard let path else {
            throw ConfigError(file: file, line: section.line, message: "missing required key Path= in section [HostedContent]")
        }
        self.init(productID: product, directory: path, version: version, file: file, line: section.line)
    }
}

// MARK: - Values

/// Parses one `Key=Value`, producing errors that point at its line.
struct ValueParser {
    let file: String
    let entry: ConfigFile.Entry

    var isEmpty: Bool { entry.value.isEmpty }

    func invalid(_ expectation: String) -> ConfigError {
        ConfigError(file: file, line: entry.line, message: "invalid value '\(entry.value)' for \(entry.key)=: \(expectation)")
    }

    /// A version such as `1.0`: 1–64 printable ASCII characters, no space.
    func versionString() throws(ConfigError) -> String {
        guard !entry.value.isEmpty, entry.value.utf8.count <= 64,
              entry.value.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value < 0x7F }) else {
            throw invalid("expected a version string such as 1.0 (at most 64 printable characters)")
        }
        return entry.value
    }

    func absolutePath() throws(ConfigError) -> String {
        guard entry.value.hasPrefix("/") else { throw invalid("must be an absolute path") }
        return DaemonConfiguration.normalizedPath(entry.value)
    }

    func logLevel() throws(ConfigError) -> LogLevel {
        guard let level = LogLevel(name: entry.value) else {
            throw invalid("expected one of debug, info, notice, warning, err")
        }
        return level
    }

    /// A libpq connection string; the value is not repeated in the error, and libpq's words about
    /// it are redacted (it may hold a password). A password is taken only from a file other users
    /// cannot read; a password file (`passfile=`, `PGPASSFILE`) only when libpq would use it.
    func connectionString(environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigError) -> String {
        if let missing = PostgresLedger.libraryProblem {
            throw ConfigError(file: file, line: entry.line, message: "\(entry.key)= names a PostgreSQL database, but \(missing)")
        }
        if let problem = PostgresLedger.problem(with: entry.value) {
            throw ConfigError(file: file, line: entry.line, message: "invalid value for \(entry.key)=: expected a PostgreSQL "
                              + "connection string (postgresql://… or key=value …), or nothing for the SQLite file: \(problem)")
        }
        if ConnectionSecrets.holdsPassword(entry.value), let mode = try? FileSystem.status(of: file).st_mode, mode & 0o004 != 0 {
            throw ConfigError(file: file, line: entry.line, message: "\(entry.key)= holds a password, and every user may read "
                              + "this file (mode \(String(mode & 0o7777, radix: 8))): keep the password in a password file "
                              + "(passfile= or PGPASSFILE, 0600, owned by storekitd's user; docs/fleet.md), not here")
        }
        if let passFile = PostgresLedger.passwordFile(of: entry.value, environment: environment),
           let problem = PostgresLedger.passwordFileProblem(passFile) {
            throw ConfigError(file: file, line: entry.line, message: "the password file of \(entry.key)= \(problem)")
        }
        if let problem = PostgresLedger.serviceFileProblem(of: entry.value, environment: environment) {
            throw ConfigError(file: file, line: entry.line, message: "\(entry.key)= names \(problem)")
        }
        return entry.value
    }

    func hostName() throws(ConfigError) -> String {
        if let problem = FleetMember.problem(withHostName: entry.value) { throw invalid(problem) }
        return entry.value
    }

    func uidRange() throws(ConfigError) -> ClosedRange<UInt32> {
        guard let range = PersonUIDs.parse(entry.value) else {
            throw invalid("expected a range of uids MIN-MAX with 1 <= MIN <= MAX, such as 1000-60000 (uid 0 is never a person's)")
        }
        return range
    }

    func accountSource() throws(ConfigError) -> FleetMember.AccountSource {
        guard let source = FleetMember.AccountSource(rawValue: entry.value) else {
            throw invalid("expected user-name or uid")
        }
        return source
    }

    func storefront() throws(ConfigError) -> String {
        let value = entry.value
        guard value.utf8.count == 3, value.unicodeScalars.allSatisfy({ $0.isASCII && $0.properties.isAlphabetic }) else {
            throw invalid("expected a 3-letter storefront code such as USA")
        }
        return value.uppercased()
    }

    /// A group name (as useradd accepts) or a numeric gid, which must exist now.
    func group() throws(ConfigError) -> String {
        let value = entry.value
        let validName = value.utf8.count <= 32 && value.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
        } && value.utf8.first != UInt8(ascii: "-")
        guard validName else { throw invalid("expected a group name or numeric gid") }
        guard DaemonConfiguration.groupID(named: value) != nil else { throw invalid("no such group") }
        return value
    }

    func count(in range: ClosedRange<Int>) throws(ConfigError) -> Int {
        guard entry.value.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              let number = Int(entry.value), range.contains(number) else {
            throw invalid("expected a whole number between \(range.lowerBound) and \(range.upperBound)")
        }
        return number
    }

    /// Bytes with an optional 1024-based suffix: K, M, G (also KiB, MiB, GiB; B for bytes).
    func size(in range: ClosedRange<Int>) throws(ConfigError) -> Int {
        let value = entry.value
        let digits = value.prefix { $0.isASCII && $0.isNumber }
        let suffix = value.dropFirst(digits.count).trimmingWhitespace()
        let scales: [String: Int] = ["": 1, "B": 1, "K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20,
                                     "G": 1 << 30, "GiB": 1 << 30]
        let scale = scales[suffix] ?? scales[suffix.uppercased()]
        guard !digits.isEmpty, let number = Int(digits), let scale else {
            throw invalid("expected a size in bytes with an optional K, M or G suffix")
        }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: scale)
        guard !overflow, range.contains(bytes) else {
            throw invalid("expected a size between \(Self.formatSize(range.lowerBound)) and \(Self.formatSize(range.upperBound))")
        }
        return bytes
    }

    func timeSpan(allowZero: Bool) throws(ConfigError) -> TimeSpan {
        guard let span = TimeSpan(parsing: entry.value) else {
            throw invalid("expected a time span such as 30, 10s, 500ms, 5min, 1h")
        }
        guard allowZero || span.milliseconds > 0 else { throw invalid("must be greater than zero") }
        return span
    }

    private static func formatSize(_ bytes: Int) -> String {
        for (scale, suffix) in [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")] where bytes >= scale && bytes % scale == 0 {
            return "\(bytes / scale)\(suffix)"
        }
        return "\(bytes)"
    }
}

// MARK: - Paths

extension DaemonConfiguration {
    /// The `*.conf` files of `directory` in lexical (byte) order; none when it does not exist.
    static func dropIns(in directory: String) throws(ConfigError) -> [String] {
        // Absent, or not to be looked at (a parent the daemon's user may not search): no drop-ins,
        // as for the main file beside it.
        guard let info = try? FileSystem.status(of: directory) else { return [] }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw ConfigError(file: directory, line: nil, message: "not a directory") }
        let names: [String]
        do throws(Errno) {
            names = try FileSystem.names(inDirectory: directory)
        } catch {
            throw ConfigError(file: directory, line: nil, message: "cannot read directory: \(error)")
        }
        return names
            .filter { $0.hasSuffix(".conf") && !$0.hasPrefix(".") }
            .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            .map { joinPath(directory, $0) }
            .filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: $0)) != "/dev/null" }
    }

    static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }

    static func joinPath(_ directory: String, _ name: String) -> String {
        if directory.isEmpty { return name }
        return directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    static func absolutePath(_ path: String) -> String {
        normalizedPath(path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path)
    }

    /// Removes `.`, `..` and repeated slashes of an absolute path without touching the file system.
    static func normalizedPath(_ path: String) -> String {
        var components: [Substring] = []
        for component in path.split(separator: "/") {
            switch component {
            case ".": continue
            case "..": if !components.isEmpty { components.removeLast() }
            default: components.append(component)
            }
        }
        return "/" + components.joined(separator: "/")
    }

    /// The first entry of a colon-separated path list as systemd passes it, or nil when empty.
    static func firstPath(_ value: String?) -> String? {
        guard let value, let first = value.split(separator: ":", omittingEmptySubsequences: false).first,
              !first.isEmpty else { return nil }
        return String(first)
    }

    /// An XDG-style variable: used only when set to an absolute path.
    static func absoluteVariable(_ value: String?) -> String? {
        guard let value, value.hasPrefix("/") else { return nil }
        return value
    }

    static func passwordHome(uid: UInt32) -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16384)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, let result, let home = result.pointee.pw_dir else {
            return nil
        }
        let path = String(cString: home)
        return path.hasPrefix("/") ? path : nil
    }
}
