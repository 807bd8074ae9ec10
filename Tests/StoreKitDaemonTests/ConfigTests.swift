import Foundation
import Testing
@testable import StoreKitDaemon

/// A fresh directory under the system temp dir, removed when the body returns.
private func withTemporaryDirectory<T>(_ body: (String) throws -> T) throws -> T {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("config-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: url) }
    return try body(url.path)
}

/// Writes `text` to `path`, creating missing parent directories.
private func write(_ text: String, to path: String) throws {
    let url = URL(fileURLWithPath: path)
    try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
    try Data(text.utf8).write(to: url)
}

/// The error `load` throws for `path`, or nil when it loads.
private func loadError(_ path: String, required: Bool = true) -> ConfigError? {
    do {
        _ = try DaemonConfiguration.load(configFile: path, required: required)
        return nil
    } catch {
        return error
    }
}

/// The configuration's settings without the app list and file list, to compare with the defaults.
private func settingsOnly(_ config: DaemonConfiguration) -> DaemonConfiguration {
    var copy = config
    copy.apps = []
    copy.sourceFiles = []
    return copy
}

private let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

@Suite("Config")
struct ConfigTests {
    @Test("a FIFO as the configuration file is refused at once, not waited on; a missing drop-in directory is none")
    func fifoConfigIsRefused() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/storekitd.conf"
            #expect(mkfifo(path, 0o600) == 0)
            let started = Date()
            #expect(loadError(path) == ConfigError(file: path, line: nil, message: "cannot read file: not a regular file"))
            #expect(Date().timeIntervalSince(started) < 2)
            let dropIns = try DaemonConfiguration.dropIns(in: dir + "/absent.d")
            #expect(dropIns.isEmpty)
        }
    }

    // MARK: Sample config

    @Test func sampleConfigLoads() throws {
        let path = repositoryRoot + "/config/storekitd.conf"
        let config = try DaemonConfiguration.load(configFile: path, required: true)
        #expect(settingsOnly(config) == .defaults)
        let app = try #require(config.app("com.example.game"))
        #expect(app.catalogPath.hasPrefix("/"))
        #expect(app.catalogPath == DaemonConfiguration.normalizedPath(repositoryRoot + "/config/catalog/example.storekit"))
        #expect(app.executable == nil)
        #expect(app.observerUnit == nil)
        #expect(config.sourceFiles.first == path)
        #expect(config.sourceFiles.contains(repositoryRoot + "/config/apps.d/com.example.game.conf"))
    }

    /// Uncommenting every `#Key=value` line of the sample must give exactly the built-in defaults,
    /// so the documented defaults cannot drift from the code.
    @Test func sampleConfigDocumentsTheDefaults() throws {
        let sample = try String(contentsOfFile: repositoryRoot + "/config/storekitd.conf", encoding: .utf8)
        var uncommented = 0
        let lines = sample.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            if line.hasPrefix("#"), let first = line.dropFirst().first, first.isLetter, line.contains("=") {
                uncommented += 1
                return String(line.dropFirst())
            }
            return String(line)
        }
        #expect(uncommented == 24)
        try withTemporaryDirectory { dir in
            try write(lines.joined(separator: "\n"), to: dir + "/storekitd.conf")
            let config = try DaemonConfiguration.load(configFile: dir + "/storekitd.conf", required: true)
            #expect(config == DaemonConfiguration.defaults.with(sourceFiles: [dir + "/storekitd.conf"]))
        }
    }

    // MARK: Files and drop-ins

    @Test func defaultsWhenThereIsNoFile() throws {
        #expect(try DaemonConfiguration.load(configFile: nil, required: false) == .defaults)
        try withTemporaryDirectory { dir in
            let missing = dir + "/storekitd.conf"
            #expect(try DaemonConfiguration.load(configFile: missing, required: false) == .defaults)
            let error = try #require(loadError(missing))
            #expect(error.file == missing)
            #expect(error.line == nil)
        }
        let defaults = DaemonConfiguration.defaults
        #expect(defaults.logLevel == .info)
        #expect(defaults.maxFrameSize == 1_048_576)
        #expect(defaults.maxConnections == 16384)
        #expect(defaults.maxConnectionsPerUID == 4096)
        #expect(defaults.maxObserversPerConnection == 64)
        #expect(defaults.maxRequestsInFlight == 256)
        #expect(defaults.partialFrameTimeout == TimeSpan(seconds: 10))
        #expect(defaults.outputHighWaterMark == 8 * 1024 * 1024)
        #expect(defaults.outputBudget == 256 * 1024 * 1024)
        #expect(defaults.sendTimeout == TimeSpan(seconds: 30))
        #expect(defaults.maxControlConnections == 64)
        #expect(defaults.helloTimeout == TimeSpan(seconds: 10))
        #expect(defaults.maxApplicationUsernameLength == 256)
        #expect(defaults.maxRequestsPerUIDPerSecond == 2_000)
        #expect(defaults.maxUnfinishedPerQueue == 10_000)
        #expect(defaults.observerActivationInterval == TimeSpan(seconds: 30))
        #expect(defaults.apps.isEmpty && defaults.sourceFiles.isEmpty)
    }

    @Test func dropInsOverrideKeyByKeyInLexicalOrder() throws {
        try withTemporaryDirectory { dir in
            let main = dir + "/storekitd.conf"
            try write("[Daemon]\nLogLevel=debug\nStorefront=usa\n[Limits]\nMaxConnections=100\nMaxFrameSize=64K\n", to: main)
            try write("[Limits]\nMaxConnections=300\n", to: main + ".d/20-b.conf")
            try write("[Limits]\nMaxConnections=200\nOutputHighWaterMark=2G\n", to: main + ".d/10-a.conf")
            try write("[Daemon]\nStorefront=\n", to: main + ".d/30-reset.conf")
            try write("this is not ini", to: main + ".d/notes.txt")
            try write("[Nonsense]\n", to: main + ".d/.hidden.conf")
            try FileManager.default.createSymbolicLink(atPath: main + ".d/40-masked.conf", withDestinationPath: "/dev/null")

            let config = try DaemonConfiguration.load(configFile: main, required: false)
            #expect(config.maxConnections == 300)
            #expect(config.maxFrameSize == 65536)
            #expect(config.outputHighWaterMark == 2 << 30)
            #expect(config.logLevel == .debug)
            #expect(config.storefront == nil)
            #expect(config.sourceFiles == [main, main + ".d/10-a.conf", main + ".d/20-b.conf", main + ".d/30-reset.conf"])
        }
    }

    @Test func dropInsAndAppsAreReadWithoutMainFile() throws {
        try withTemporaryDirectory { dir in
            try write("[Limits]\nMaxConnections=7\n", to: dir + "/storekitd.conf.d/a.conf")
            try write("[App]\nID=com.example.a\nCatalog=a.storekit\n", to: dir + "/apps.d/a.conf")
            let config = try DaemonConfiguration.load(configFile: dir + "/storekitd.conf", required: false)
            #expect(config.maxConnections == 7)
            #expect(config.app("com.example.a")?.catalogPath == dir + "/a.storekit")
        }
    }

    // MARK: Errors carry file:line

    @Test("a NUL byte in a configuration file is refused with its line, not cut at by the C libraries below")
    func nulByteIsRefused() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/storekitd.conf"
            try write("[Daemon]\nLogLevel=notice\n[Store]\nStorefront=USA\u{0}FRA\n", to: path)
            let error = try #require(loadError(path))
            #expect(error == ConfigError(file: path, line: 4, message: "the line holds a NUL byte"))
        }
    }

    @Test func unknownKeyIsReportedWithFileAndLine() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/storekitd.conf"
            let text = """
                # storekitd
                ; another comment

                [Daemon]
                LogLevel = notice
                #Foo=commented out is fine

                [Limits]
                MaxConnections=10
                  # indented comment
                MaxFrameSize=2M
                Foo=1
                """
            try write(text, to: path)
            let error = try #require(loadError(path))
            #expect(error.description == "\(path):12: unknown key 'Foo' in section [Limits]")
            #expect(error == ConfigError(file: path, line: 12, message: "unknown key 'Foo' in section [Limits]"))
        }
    }

    @Test(arguments: [
        ("[Limits]\nMaxFrameSize=abc\n", 2, "MaxFrameSize"),
        ("[Daemon]\n\nLogLevel=loud\n", 3, "LogLevel"),
        ("[Limits]\nMaxConnections=-1\n", 2, "MaxConnections"),
        ("[Limits]\nMaxConnections=0\n", 2, "MaxConnections"),
        ("[Limits]\nMaxFrameSize=10\n", 2, "MaxFrameSize"),
        ("[Limits]\nMaxFrameSize=1T\n", 2, "MaxFrameSize"),
        ("[Limits]\nMaxRequestsInFlight=99999999999999999999999\n", 2, "MaxRequestsInFlight"),
        ("[Limits]\nPartialFrameTimeoutSec=soon\n", 2, "PartialFrameTimeoutSec"),
        ("[Limits]\nPartialFrameTimeoutSec=0\n", 2, "PartialFrameTimeoutSec"),
        ("[Observers]\nActivationIntervalSec=-5s\n", 2, "ActivationIntervalSec"),
        ("[Daemon]\nStorefront=US\n", 2, "Storefront"),
        ("[Daemon]\nRuntimeDirectory=run/storekitd\n", 2, "RuntimeDirectory"),
        ("[Daemon]\nAdminGroup=no-such-group-storekitd-test\n", 2, "AdminGroup"),
        ("[Limits]\nMaxConnections=5 # five\n", 2, "MaxConnections"),
        ("[Store]\nDatabase=/var/lib/storekitd/storekitd.sqlite\n", 2, "Database"),
        ("[Store]\n\nDatabase=host=/run/postgresql colour=blue\n", 3, "Database"),
        ("[Store]\nDatabase=mysql://localhost/storekit\n", 2, "Database"),
        ("[Store]\nHostName=host a\n", 2, "HostName"),
        ("[Store]\nHostName=\(String(repeating: "h", count: 256))\n", 2, "HostName"),
        ("[Store]\nAccountFrom=email\n", 2, "AccountFrom"),
    ])
    func badValueIsReportedWithFileAndLine(text: String, line: Int, key: String) throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/storekitd.conf"
            try write(text, to: path)
            let error = try #require(loadError(path))
            #expect(error.file == path)
            #expect(error.line == line)
            #expect(error.message.hasPrefix("invalid value"))
            #expect(error.message.contains("\(key)="))
            #expect(error.description.hasPrefix("\(path):\(line): invalid value"))
        }
    }

    @Test(arguments: [
        ("MaxConnections=1\n[Limits]\n", 1, "assignment 'MaxConnections=' outside of any section"),
        ("[Limits]\nMaxConnections\n", 2, "missing '=' in line 'MaxConnections'"),
        ("[Limits]\n=5\n", 2, "missing key name before '='"),
        ("[Limits\n", 1, "invalid section header '[Limits'"),
        ("# x\n[Network]\n", 2, "unknown section [Network]"),
        ("[App]\nID=com.example.x\n", 1, "unknown section [App] (app registrations belong in apps.d/*.conf)"),
        ("[limits]\nMaxConnections=1\n", 1, "unknown section [limits]"),
    ])
    func malformedLineIsReported(text: String, line: Int, message: String) throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/storekitd.conf"
            try write(text, to: path)
            #expect(loadError(path) == ConfigError(file: path, line: line, message: message))
        }
    }

    @Test(arguments: [
        ("postgresql:///storekit?host=/run/postgresql", "postgresql:///storekit?host=/run/postgresql"),
        ("host=/run/postgresql dbname=storekit sslmode=disable", "host=/run/postgresql dbname=storekit sslmode=disable"),
        ("", nil),
    ] as [(String, String?)])
    func databaseSelectsTheLedger(value: String, database: String?) throws {
        try withTemporaryDirectory { dir in
            try write("[Store]\nDatabase=\(value)\n", to: dir + "/storekitd.conf")
            #expect(try DaemonConfiguration.load(configFile: dir + "/storekitd.conf", required: true).database == database)
        }
    }

    @Test func hostNameAndAccountSourceOfAFleet() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/storekitd.conf"
            try write("[Store]\nDatabase=host=/run/postgresql\nHostName=kiosk-07.example\nAccountFrom=uid\n", to: path)
            let config = try DaemonConfiguration.load(configFile: path, required: true)
            #expect(config.hostName == "kiosk-07.example")
            #expect(config.accountFrom == .uid)
            try write("[Store]\nHostName=\nAccountFrom=\n", to: path)
            let defaults = try DaemonConfiguration.load(configFile: path, required: true)
            #expect(defaults.hostName == nil && defaults.accountFrom == .userName, "empty: the machine id, user names")
        }
    }

    @Test func aBadDatabaseValueDoesNotRepeatItsPassword() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/storekitd.conf"
            try write("[Store]\nDatabase=host=/run/postgresql password=hunter2 colour=blue\n", to: path)
            let error = try #require(loadError(path))
            #expect(error.line == 2)
            #expect(!error.description.contains("hunter2"), "\(error)")
            #expect(error.message.contains("colour"), "libpq's reason: \(error.message)")
        }
    }

    @Test func errorInDropInNamesTheDropIn() throws {
        try withTemporaryDirectory { dir in
            let main = dir + "/storekitd.conf"
            try write("[Limits]\nMaxConnections=1\n", to: main)
            try write("\n[Limits]\nMaxConnections=many\n", to: main + ".d/50-bad.conf")
            let error = try #require(loadError(main))
            #expect(error.file == main + ".d/50-bad.conf")
            #expect(error.line == 3)
        }
    }

    // MARK: Syntax

    @Test func commentsBlankLinesAndContinuations() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/storekitd.conf"
            let text = "\u{FEFF}# hash comment\r\n; semicolon comment\r\n\r\n[Daemon]\r\n  ; indented\r\n"
                + "  StateDirectory  =   /var/lib/x   \r\nRuntimeDirectory=/run/a\\\n# skipped inside a continuation\n/b\n[Limits]\nMaxConnections=\\\n42\n"
            try write(text, to: path)
            let config = try DaemonConfiguration.load(configFile: path, required: true)
            #expect(config.stateDirectory == "/var/lib/x")
            #expect(config.runtimeDirectory == "/run/a /b")
            #expect(config.maxConnections == 42)
        }
    }

    @Test func parserKeepsLinesAndSections() throws {
        let file = try ConfigFile.parse("[A]\nx = 1\n\n[B]\ny=two words \n[A]\nx=3\n", path: "t.conf")
        #expect(file.sections.map(\.name) == ["A", "B", "A"])
        #expect(file.sections[0].entries == [ConfigFile.Entry(key: "x", value: "1", line: 2)])
        #expect(file.sections[1].entries == [ConfigFile.Entry(key: "y", value: "two words", line: 5)])
        #expect(file.sections[2].line == 6)
    }

    @Test func valueParsing() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/storekitd.conf"
            try write("""
                [Daemon]
                AdminGroup=0
                LogLevel=warning
                Storefront=gbr
                StateDirectory=/var/lib//storekitd/./db/
                [Limits]
                MaxFrameSize=4096
                OutputHighWaterMark=16 M
                PartialFrameTimeoutSec=1.5
                [Observers]
                ActivationIntervalSec=0
                """, to: path)
            let config = try DaemonConfiguration.load(configFile: path, required: true)
            #expect(config.adminGroup == "0")
            #expect(config.adminGroupID() == 0)
            #expect(config.logLevel == .warning)
            #expect(config.storefront == "GBR")
            #expect(config.stateDirectory == "/var/lib/storekitd/db")
            #expect(config.maxFrameSize == 4096)
            #expect(config.outputHighWaterMark == 16 << 20)
            #expect(config.partialFrameTimeout == TimeSpan(milliseconds: 1500))
            #expect(config.observerActivationInterval == TimeSpan(milliseconds: 0))
        }
    }

    @Test func adminGroupByName() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/storekitd.conf"
            try write("[Daemon]\nAdminGroup=root\n", to: path)
            let config = try DaemonConfiguration.load(configFile: path, required: true)
            #expect(config.adminGroupID() == 0)
        }
    }

    @Test func logLevelsAreOrderedBySyslogPriority() {
        #expect(LogLevel.allCases.map(\.rawValue) == [3, 4, 5, 6, 7])
        #expect(LogLevel.err < .warning && LogLevel.info < .debug)
        #expect(LogLevel(name: "err") == .err && LogLevel(name: "notice") == .notice && LogLevel(name: "loud") == nil)
        #expect(LogLevel.allCases.allSatisfy { LogLevel(name: $0.name) == $0 })
    }

    // MARK: apps.d

    @Test func appsAreLoadedSortedWithResolvedPaths() throws {
        try withTemporaryDirectory { dir in
            let main = dir + "/etc/storekitd.conf"
            try write("[Daemon]\n", to: main)
            try write("""
                [App]
                ID=org.example.zeta
                Catalog=/srv/catalogs/../zeta.storekit
                Executable=/usr/bin/zeta
                ObserverUnit=zeta-observer@.service
                """, to: dir + "/etc/apps.d/a.conf")
            try write("# alpha\n[App]\nCatalog=catalog/alpha.storekit\nID=com.example.alpha\n", to: dir + "/etc/apps.d/b.conf")
            let config = try DaemonConfiguration.load(configFile: main, required: true)
            #expect(config.apps.map(\.id) == ["com.example.alpha", "org.example.zeta"])
            let alpha = try #require(config.app("com.example.alpha"))
            #expect(alpha.catalogPath == dir + "/etc/catalog/alpha.storekit")
            #expect(alpha.file == dir + "/etc/apps.d/b.conf")
            #expect(alpha.line == 4)
            #expect(alpha.catalogLine == 3)
            #expect(alpha.catalogError("cannot read").description == "\(dir)/etc/apps.d/b.conf:3: cannot read")
            let zeta = try #require(config.app("org.example.zeta"))
            #expect(zeta.catalogPath == "/srv/zeta.storekit")
            #expect(zeta.executable == "/usr/bin/zeta")
            #expect(zeta.observerUnit == "zeta-observer@.service")
            #expect(config.app("com.example.missing") == nil)
            #expect(config.sourceFiles == [main, dir + "/etc/apps.d/a.conf", dir + "/etc/apps.d/b.conf"])
        }
    }

    @Test func duplicateAppIDAcrossFiles() throws {
        try withTemporaryDirectory { dir in
            let main = dir + "/storekitd.conf"
            try write("[App]\nID=com.example.game\nCatalog=a.storekit\n", to: dir + "/apps.d/10-first.conf")
            try write("# again\n[App]\nCatalog=b.storekit\nID=com.example.game\n", to: dir + "/apps.d/20-second.conf")
            let error = try #require(loadError(main, required: false))
            #expect(error == ConfigError(
                file: dir + "/apps.d/20-second.conf", line: 4,
                message: "duplicate app ID 'com.example.game' (already declared at \(dir)/apps.d/10-first.conf:2)"))
        }
    }

    @Test(arguments: [
        ("[App]\nCatalog=x.storekit\n", 1, "missing required key ID= in section [App]"),
        ("\n[App]\nID=com.example.x\n", 2, "missing required key Catalog= in section [App]"),
        ("[App]\nID=com.example.x\nCatalog=x.storekit\nExecutable=bin/game\n", 4,
         "invalid value 'bin/game' for Executable=: must be an absolute path"),
        ("[App]\nID=com.example.x\nCatalog=x.storekit\nObserverUnit=observer.socket\n", 4,
         "invalid value 'observer.socket' for ObserverUnit=: expected a template unit name ending in @.service (its instance is the buyer's uid)"),
        ("[App]\nID=com.example.x\nCatalog=x.storekit\nObserverUnit=observer.service\n", 4,
         "invalid value 'observer.service' for ObserverUnit=: expected a template unit name ending in @.service (its instance is the buyer's uid)"),
        ("[App]\nID=com example\nCatalog=x.storekit\n", 2,
         "invalid value 'com example' for ID=: expected a reverse-DNS name of letters, digits, '.', '-' and '_' (at most 255 bytes)"),
        ("[App]\nID=com.example.x\nCatalog=\n", 3, "invalid value '' for Catalog=: expected the path of a .storekit file"),
        ("[App]\nID=com.example.x\nCatalog=x.storekit\nName=X\n", 4, "unknown key 'Name' in section [App]"),
        ("[App]\nID=com.example.x\nCatalog=x.storekit\n[App]\nID=com.example.y\n", 4,
         "second [App] section (the first is at line 1); each file in apps.d declares one app"),
        ("[Limits]\nMaxConnections=1\n", 1, "unknown section [Limits] (it belongs in storekitd.conf)"),
        ("ID=com.example.x\n", 1, "assignment 'ID=' outside of any section"),
    ])
    func invalidAppRegistration(text: String, line: Int, message: String) throws {
        try withTemporaryDirectory { dir in
            try write(text, to: dir + "/apps.d/x.conf")
            #expect(loadError(dir + "/storekitd.conf", required: false) == ConfigError(file: dir + "/apps.d/x.conf", line: line, message: message))
        }
    }

    @Test func appFileWithoutAppSection() throws {
        try withTemporaryDirectory { dir in
            try write("# nothing here\n", to: dir + "/apps.d/empty.conf")
            #expect(loadError(dir + "/storekitd.conf", required: false) == ConfigError(file: dir + "/apps.d/empty.conf", line: nil, message: "no [App] section"))
        }
    }

    @Test func appIDValidation() {
        #expect(AppRegistration.isValidID("com.example.game"))
        #expect(AppRegistration.isValidID("com.example-2.my_game"))
        #expect(!AppRegistration.isValidID(""))
        #expect(!AppRegistration.isValidID("com..example"))
        #expect(!AppRegistration.isValidID(".com.example"))
        #expect(!AppRegistration.isValidID("com/example"))
        #expect(!AppRegistration.isValidID("com.exämple"))
        #expect(AppRegistration.isValidID(String(repeating: "a", count: 255)))
        #expect(!AppRegistration.isValidID(String(repeating: "a", count: 256)))
    }

    // MARK: TimeSpan

    @Test(arguments: [
        ("10s", 10_000), ("500ms", 500), ("5min", 300_000), ("1h", 3_600_000), ("2", 2000), ("30", 30_000),
        ("1d", 86_400_000), ("1w", 604_800_000), ("1.5s", 1500), ("0.25", 250), ("1h 30min", 5_400_000),
        ("1min30s", 90_000), (" 2 min ", 120_000), ("0", 0), ("3 seconds", 3000), ("100msec", 100),
    ] as [(String, Int64)])
    func timeSpanParses(text: String, milliseconds: Int64) throws {
        let span = try #require(TimeSpan(parsing: text))
        #expect(span.milliseconds == milliseconds)
    }

    @Test(arguments: ["", "garbage", "s", "10 parsecs", "-5s", "1..5s", "1.s", ".5s", "5s garbage", "99999999999999999999s", ".", "1e3"])
    func timeSpanRejects(text: String) {
        #expect(TimeSpan(parsing: text) == nil)
    }

    @Test func timeSpanValues() {
        #expect(TimeSpan(milliseconds: 1500).seconds == 1.5)
        #expect(TimeSpan(seconds: 10).duration == .seconds(10))
        #expect(TimeSpan(milliseconds: 500) < TimeSpan(seconds: 1))
        #expect(TimeSpan(milliseconds: 90_500).description == "1min 30s 500ms")
        #expect(TimeSpan(milliseconds: 0).description == "0")
        for ms: Int64 in [1, 999, 60_000, 93_784_005] {
            #expect(TimeSpan(parsing: TimeSpan(milliseconds: ms).description) == TimeSpan(milliseconds: ms))
        }
    }

    // MARK: Which files and directories

    @Test func configFileLocation() {
        let env = ["CONFIGURATION_DIRECTORY": "/etc/custom:/etc/other"]
        #expect(DaemonConfiguration.locateConfigFile(explicit: "my.conf", environment: env) == ("my.conf", true))
        #expect(DaemonConfiguration.locateConfigFile(explicit: nil, environment: env) == ("/etc/custom/storekitd.conf", false))
        #expect(DaemonConfiguration.locateConfigFile(explicit: nil, environment: ["CONFIGURATION_DIRECTORY": "/c/"])
                == ("/c/storekitd.conf", false))
        #expect(DaemonConfiguration.locateConfigFile(explicit: nil, environment: ["CONFIGURATION_DIRECTORY": ""])
                == ("/etc/storekitd/storekitd.conf", false))
        #expect(DaemonConfiguration.locateConfigFile(explicit: nil, environment: [:]) == ("/etc/storekitd/storekitd.conf", false))
    }

    @Test func runtimeDirectoryPrecedence() {
        var config = DaemonConfiguration.defaults
        let env = ["RUNTIME_DIRECTORY": "/run/sd-a:/run/sd-b", "XDG_RUNTIME_DIR": "/run/user/1000"]
        config.runtimeDirectory = "/run/from-config"
        #expect(config.resolveRuntimeDirectory(explicit: "/tmp/explicit", environment: env, uid: 1000) == "/tmp/explicit")
        #expect(config.resolveRuntimeDirectory(explicit: nil, environment: env, uid: 1000) == "/run/sd-a")
        #expect(config.resolveRuntimeDirectory(explicit: nil, environment: ["XDG_RUNTIME_DIR": "/run/user/1000"], uid: 1000)
                == "/run/from-config")
        config.runtimeDirectory = nil
        #expect(config.resolveRuntimeDirectory(explicit: nil, environment: ["XDG_RUNTIME_DIR": "/run/user/1000"], uid: 0)
                == "/run/storekitd")
        #expect(config.resolveRuntimeDirectory(explicit: nil, environment: ["XDG_RUNTIME_DIR": "/run/user/1000"], uid: 1000)
                == "/run/user/1000/storekitd")
        #expect(config.resolveRuntimeDirectory(explicit: nil, environment: [:], uid: 1000) == "/tmp/storekitd-1000")
    }

    @Test func stateDirectoryPrecedence() {
        var config = DaemonConfiguration.defaults
        let env = ["STATE_DIRECTORY": "/var/lib/sd-a:/var/lib/sd-b", "XDG_STATE_HOME": "/home/u/.state", "HOME": "/home/u"]
        config.stateDirectory = "/srv/from-config"
        #expect(config.resolveStateDirectory(explicit: "/tmp/explicit", environment: env, uid: 1000) == "/tmp/explicit")
        #expect(config.resolveStateDirectory(explicit: nil, environment: env, uid: 1000) == "/var/lib/sd-a")
        #expect(config.resolveStateDirectory(explicit: nil, environment: ["HOME": "/home/u"], uid: 1000) == "/srv/from-config")
        config.stateDirectory = nil
        #expect(config.resolveStateDirectory(explicit: nil, environment: ["HOME": "/root"], uid: 0) == "/var/lib/storekitd")
        #expect(config.resolveStateDirectory(explicit: nil, environment: ["XDG_STATE_HOME": "/home/u/.state", "HOME": "/home/u"], uid: 1000)
                == "/home/u/.state/storekitd")
        #expect(config.resolveStateDirectory(explicit: nil, environment: ["HOME": "/home/u"], uid: 1000)
                == "/home/u/.local/state/storekitd")
        #expect(config.resolveStateDirectory(explicit: nil, environment: ["XDG_STATE_HOME": "relative", "HOME": "/home/u"], uid: 1000)
                == "/home/u/.local/state/storekitd")
    }
}

extension DaemonConfiguration {
    fileprivate func with(sourceFiles: [String]) -> DaemonConfiguration {
        var copy = self
        copy.sourceFiles = sourceFiles
        return copy
    }

    // MARK: [Family]

    @Test("[Family] sections name members by user name; each is one family, across the file and its drop-ins")
    func familiesLoad() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/storekitd.conf"
            try write("[Family]\nMembers=root daemon\nMembers=bin\n", to: path)
            try write("[Family]\nMembers=sys sync\n", to: path + ".d/10-second.conf")
            let config = try DaemonConfiguration.load(configFile: path, required: true)
            #expect(config.families.map(\.members) == [["root", "daemon", "bin"], ["sys", "sync"]])
            #expect(config.families.map(\.uids) == [[0, 1, 2], [3, 4]])
            #expect(config.familyGroups.groups == [[0, 1, 2], [3, 4]])
            #expect(config.familyGroups.others(of: 1) == [0, 2])
            #expect(DaemonConfiguration.defaults.families.isEmpty)
        }
    }

    @Test("a [Family] naming no such user, one member, seven, a uid twice, or an unknown key is refused with its line")
    func badFamiliesAreRefused() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/storekitd.conf"
            let cases: [(text: String, line: Int, message: String)] = [
                ("[Family]\nMembers=root no-such-user-here\n", 2, "no user 'no-such-user-here' on this host"),
                ("[Family]\nMembers=root\n", 1, "at least two members"),
                ("[Family]\nMembers=root daemon\nMembers=\nMembers=bin\n", 1, "at least two members"),
                ("[Family]\nMembers=root daemon bin sys sync games man\n", 1, "at most 6 members, this one 7"),
                ("[Family]\nMembers=root 0\n", 2, "no user '0'"),
                ("[Family]\nMembers=root daemon root\n", 2, "already a member as 'root'"),
                ("[Family]\nMembers=root daemon\n\n[Family]\nMembers=bin daemon\n", 4, "'daemon' (uid 1) is already in the family at"),
                ("[Family]\nName=Smiths\nMembers=root daemon\n", 2, "unknown key 'Name' in section [Family]"),
            ]
            for example in cases {
                try write(example.text, to: path)
                let error = try #require(loadError(path), "\(example.text) must be refused")
                #expect(error.line == example.line, "\(example.text): \(error.message)")
                #expect(error.message.contains(example.message), "\(example.text): \(error.message)")
            }
        }
    }
}
