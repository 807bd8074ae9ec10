import Foundation
import StoreKitTestSupport
import Testing

/// The shipped units pass systemd's own offline checks, say what the design promises (a static
/// system user, socket activation only, sockets that own /run/storekitd), and `make install-files`
/// lays out what the package does. The behaviour under a real systemd is `make test-system`'s.
@Suite("unit files")
struct UnitFileTests {
    /// The system units (installed) and the model observer template (documentation, not installed).
    static let units = ["systemd/storekitd.service", "systemd/storekitd.socket", "systemd/storekitd-control.socket",
                        "docs/examples/storekit-example-app-observer@.service"]

    /// Copies of the units with ExecStart= pointing at the built binaries (verify needs them to exist).
    static func prepared() throws -> TemporaryDirectory {
        let directory = TemporaryDirectory("skunits")
        for unit in units {
            let text = try String(contentsOfFile: Paths.repository + "/" + unit, encoding: .utf8)
            try directory.write((unit as NSString).lastPathComponent,
                                text.replacingOccurrences(of: "/usr/bin/", with: Paths.buildDirectory + "/"))
        }
        return directory
    }

    /// A unit file as (section, key, value) triples, in order; comments and blank lines dropped.
    static func parse(_ path: String) throws -> [(section: String, key: String, value: String)] {
        var section = ""
        var entries: [(section: String, key: String, value: String)] = []
        for raw in try String(contentsOfFile: Paths.repository + "/" + path, encoding: .utf8).split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast())
                continue
            }
            guard let equals = line.firstIndex(of: "=") else { continue }
            entries.append((section, String(line[..<equals]), String(line[line.index(after: equals)...])))
        }
        return entries
    }

    static func values(_ entries: [(section: String, key: String, value: String)], _ section: String, _ key: String) -> [String] {
        entries.filter { $0.section == section && $0.key == key }.map(\.value)
    }

    @Test("systemd-analyze verify prints nothing")
    func verify() throws {
        let directory = try Self.prepared()
        defer { directory.remove() }
        let files = Self.units.map { directory.file(($0 as NSString).lastPathComponent) }
        let result = try ProcessRunner.run("/usr/bin/systemd-analyze", ["verify", "--man=no"] + files)
        #expect(result.status == 0)
        #expect(result.stdout.isEmpty && result.stderr.isEmpty, "\(result.stdout)\(result.stderr)")
    }

    @Test("systemd-analyze security: exposure of storekitd.service at most 1.0")
    func security() throws {
        let directory = try Self.prepared()
        defer { directory.remove() }
        let result = try ProcessRunner.run("/usr/bin/systemd-analyze",
                                           ["security", "--offline=yes", "--threshold=10", directory.file("storekitd.service")])
        #expect(result.status == 0, "\(result.stdout.suffix(400))")
        let line = result.stdout.split(separator: "\n").first { $0.contains("Overall exposure level") }
        let exposure = line.flatMap { Double($0.split(separator: " ").first { Double($0) != nil } ?? "") }
        #expect(exposure != nil && exposure! <= 1.0, "\(line ?? "no exposure line")")
    }

    @Test("the service: Type=notify with a watchdog, a static system user, socket-activated only, ceilings")
    func service() throws {
        let unit = try Self.parse("systemd/storekitd.service")
        func value(_ section: String, _ key: String) -> String? { Self.values(unit, section, key).last }
        #expect(value("Service", "Type") == "notify")
        #expect(value("Service", "NotifyAccess") == "main")
        #expect(value("Service", "Restart") == "on-failure")
        #expect(value("Service", "RestartSec") == "1s")
        #expect(value("Service", "ExecReload") == "/bin/kill -HUP $MAINPID")
        for key in ["WatchdogSec", "FileDescriptorStoreMax", "ConfigurationDirectory", "MemoryHigh", "MemoryMax", "TasksMax"] {
            #expect(value("Service", key) != nil, "missing \(key)=")
        }
        #expect(value("Service", "StateDirectory") == "storekitd")
        #expect(value("Service", "StateDirectoryMode") == "0755", "apps read the root certificate there")
        #expect(value("Service", "User") == "storekitd" && value("Service", "Group") == "storekitd")
        // DynamicUser= cannot use the system bus on Debian 12, and with RuntimeDirectory= it moves
        // /run/storekitd under /run/private (0700), locking apps out. The socket units own that dir.
        #expect(value("Service", "DynamicUser") == nil, "DynamicUser= is set")
        #expect(value("Service", "RuntimeDirectory") == nil, "RuntimeDirectory= is set: the socket units own /run/storekitd")
        #expect(value("Service", "PrivateUsers") == nil, "PrivateUsers= would hide the real uids from SO_PEERCRED")
        // Started by its sockets only, never at boot.
        #expect(!unit.contains { $0.section == "Install" }, "storekitd.service has an [Install] section")
        #expect(value("Unit", "StartLimitIntervalSec") != nil && value("Unit", "StartLimitBurst") != nil)
        #expect(value("Unit", "Documentation") == "man:storekitd(8) man:storekitd.conf(5) man:storekitctl(1)")
    }

    @Test("the sockets: fds named client and control, both brought back by one start, no stale files")
    func sockets() throws {
        let client = try Self.parse("systemd/storekitd.socket")
        let control = try Self.parse("systemd/storekitd-control.socket")
        #expect(Self.values(client, "Socket", "ListenStream") == ["/run/storekitd/storekitd.sock"])
        #expect(Self.values(client, "Socket", "FileDescriptorName") == ["client"])
        #expect(Self.values(client, "Socket", "SocketMode") == ["0666"])
        #expect(Self.values(control, "Socket", "ListenStream") == ["/run/storekitd/control.sock"])
        #expect(Self.values(control, "Socket", "FileDescriptorName") == ["control"])
        #expect(Self.values(control, "Socket", "SocketMode") == ["0600"])
        #expect(Self.values(client, "Unit", "Wants").contains("storekitd-control.socket"))
        #expect(Self.values(control, "Unit", "PartOf").contains("storekitd.socket"))
        for unit in [client, control] {
            #expect(Self.values(unit, "Socket", "RemoveOnStop") == ["yes"])
            #expect(Self.values(unit, "Socket", "DirectoryMode") == ["0755"])
            #expect(Self.values(unit, "Socket", "Service") == ["storekitd.service"])
            #expect(Self.values(unit, "Install", "WantedBy") == ["sockets.target"])
            #expect(Self.values(unit, "Unit", "Documentation") == ["man:storekitd(8) man:storekitd.conf(5) man:storekitctl(1)"])
        }
    }

    @Test("the model observer is a per-uid template in docs/examples, not a system unit")
    func observerTemplate() throws {
        let unit = try Self.parse("docs/examples/storekit-example-app-observer@.service")
        func value(_ key: String) -> String? { Self.values(unit, "Service", key).last }
        #expect(value("User") == "%i")
        #expect(value("DynamicUser") == nil && value("PrivateUsers") == nil)
        #expect(value("ExecStart") == "/usr/bin/storekit-example-app observe")
        #expect(value("Restart") == "always")
        #expect(value("StateDirectory") == "storekit-example-app/%i")
        #expect(Self.values(unit, "Service", "Environment").contains("XDG_STATE_HOME=/var/lib/storekit-example-app/%i"))
        #expect(Self.values(unit, "Service", "Environment").contains("XDG_DATA_HOME=/var/lib/storekit-example-app/%i"),
                "the app receipt needs a writable home (ProtectHome=yes)")
        #expect(Self.values(unit, "Unit", "After").contains("storekitd.socket"))
        #expect(Self.values(unit, "Unit", "Wants").contains("storekitd.socket"))
        #expect(!unit.contains { $0.section == "Install" })
        #expect(!FileManager.default.fileExists(atPath: Paths.repository + "/systemd/storekit-example-app.service"))
    }

    @Test("the sysusers.d entry and the polkit rule")
    func userAndPolkit() throws {
        let sysusers = try String(contentsOfFile: Paths.repository + "/systemd/storekitd.sysusers", encoding: .utf8)
        let entries = sysusers.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }
        #expect(entries == [#"u storekitd - "StoreKit payment queue daemon" /var/lib/storekitd"#])
        let rule = try String(contentsOfFile: Paths.repository + "/systemd/storekitd.rules", encoding: .utf8)
        for fragment in [#""org.freedesktop.systemd1.manage-units""#, #"subject.user != "storekitd""#,
                         #"action.lookup("verb") != "start""#,
                         #"polkit.spawn(["/usr/bin/storekitd", "--verify-observer-unit", unit])"#, "polkit.Result.YES"] {
            #expect(rule.contains(fragment), "the rule lacks \(fragment)")
        }
        #expect(!rule.replacingOccurrences(of: "polkit.Result.NOT_HANDLED", with: "").contains("polkit.Result.NO"),
                "the rule decides only what it grants; the rest falls through")
    }

    @Test("make install-files with DESTDIR and PREFIX installs the package's layout, without the sample app's unit")
    func makeInstall() throws {
        let destination = TemporaryDirectory("skinst")
        defer { destination.remove() }
        let result = try ProcessRunner.run("/usr/bin/make", ["-C", Paths.repository, "install-files", "DESTDIR=\(destination.path)",
                                                             "PREFIX=/usr", "BUILD_DIR=\(Paths.buildDirectory)"], timeout: 120)
        #expect(result.status == 0, "\(result.stderr)")
        var expected = ["/usr/bin/storekitd", "/usr/bin/storekitctl", "/usr/bin/storekit-example-app", "/usr/bin/storekit2-example-app",
                        "/usr/lib/systemd/system/storekitd.service", "/usr/lib/systemd/system/storekitd.socket",
                        "/usr/lib/systemd/system/storekitd-control.socket", "/usr/lib/systemd/catalog/storekitd.catalog",
                        "/usr/lib/sysusers.d/storekitd.conf", "/usr/share/polkit-1/rules.d/storekitd.rules",
                        "/usr/share/doc/storekitd/README.md",
                        "/usr/share/doc/storekit-examples/examples/storekit-example-app-observer@.service",
                        "/usr/share/doc/storekit-examples/examples/c/buy-and-finish.c",
                        "/usr/share/doc/storekit-examples/examples/python/buy_and_finish.py",
                        "/etc/storekitd/storekitd.conf", "/etc/storekitd/apps.d/com.example.game.conf",
                        "/etc/storekitd/catalog/example.storekit"]
        for (page, section) in [("storekitd.8", "8"), ("storekitctl.1", "1"), ("storekitd.conf.5", "5"), ("storekit2-example-app.1", "1")]
        where FileManager.default.fileExists(atPath: Paths.repository + "/man/" + page) {
            expected.append("/usr/share/man/man\(section)/\(page)")
        }
        for path in expected {
            #expect(FileManager.default.fileExists(atPath: destination.path + path), "missing \(path)")
        }
        let units = try FileManager.default.contentsOfDirectory(atPath: destination.path + "/usr/lib/systemd/system")
        #expect(units.sorted() == ["storekitd-control.socket", "storekitd.service", "storekitd.socket"])
        let service = try String(contentsOfFile: destination.path + "/usr/lib/systemd/system/storekitd.service", encoding: .utf8)
        #expect(service.contains("ExecStart=/usr/bin/storekitd"))
    }
}
