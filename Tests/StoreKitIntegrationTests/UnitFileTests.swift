import Foundation
import StoreKitTestSupport
import Testing

/// The shipped units pass systemd's own offline checks, and `make install` lays out what it promises.
@Suite("unit files")
struct UnitFileTests {
    static let units = ["storekitd.service", "storekitd.socket", "storekitd-control.socket", "storekit-example-app.service"]

    /// Copies of the units with ExecStart= pointing at the built binaries (verify needs them to exist).
    static func prepared() throws -> TemporaryDirectory {
        let directory = TemporaryDirectory("skunits")
        for unit in units {
            let text = try String(contentsOfFile: Paths.repository + "/systemd/" + unit, encoding: .utf8)
            try directory.write(unit, text.replacingOccurrences(of: "/usr/bin/", with: Paths.buildDirectory + "/"))
        }
        return directory
    }

    @Test("systemd-analyze verify prints nothing")
    func verify() throws {
        let directory = try Self.prepared()
        defer { directory.remove() }
        let result = try ProcessRunner.run("/usr/bin/systemd-analyze", ["verify", "--man=no"] + Self.units.map { directory.file($0) })
        #expect(result.status == 0)
        #expect(result.stdout.isEmpty && result.stderr.isEmpty, "\(result.stdout)\(result.stderr)")
    }

    @Test("systemd-analyze security: exposure of storekitd.service at most 2.0")
    func security() throws {
        let directory = try Self.prepared()
        defer { directory.remove() }
        let result = try ProcessRunner.run("/usr/bin/systemd-analyze",
                                           ["security", "--offline=yes", "--threshold=20", directory.file("storekitd.service")])
        #expect(result.status == 0, "\(result.stdout.suffix(400))")
        let line = result.stdout.split(separator: "\n").first { $0.contains("Overall exposure level") }
        let exposure = line.flatMap { Double($0.split(separator: " ").first { Double($0) != nil } ?? "") }
        #expect(exposure != nil && exposure! <= 2.0, "\(line ?? "no exposure line")")
    }

    @Test("the socket units name their fds client and control; the service is Type=notify with a watchdog")
    func contents() throws {
        let client = try String(contentsOfFile: Paths.repository + "/systemd/storekitd.socket", encoding: .utf8)
        let control = try String(contentsOfFile: Paths.repository + "/systemd/storekitd-control.socket", encoding: .utf8)
        let service = try String(contentsOfFile: Paths.repository + "/systemd/storekitd.service", encoding: .utf8)
        #expect(client.contains("FileDescriptorName=client") && client.contains("SocketMode=0666"))
        #expect(control.contains("FileDescriptorName=control") && control.contains("SocketMode=0600"))
        for setting in ["Type=notify", "NotifyAccess=main", "WatchdogSec=", "Restart=on-failure", "ExecReload=",
                        "FileDescriptorStoreMax=", "StateDirectory=", "ConfigurationDirectory=", "DynamicUser=yes"] {
            #expect(service.contains(setting), "missing \(setting)")
        }
        #expect(!service.contains("PrivateUsers=yes"), "PrivateUsers= would hide the real uids from SO_PEERCRED")
    }

    @Test("make install with DESTDIR and PREFIX installs binaries, units, catalog and config")
    func makeInstall() throws {
        let destination = TemporaryDirectory("skinst")
        defer { destination.remove() }
        // The release build is what `make install` installs; reuse an existing one when present.
        let result = try ProcessRunner.run("/usr/bin/make", ["-C", Paths.repository, "install-files", "DESTDIR=\(destination.path)",
                                                             "PREFIX=/usr", "BUILD_DIR=\(Paths.buildDirectory)"], timeout: 120)
        #expect(result.status == 0, "\(result.stderr)")
        for path in ["/usr/bin/storekitd", "/usr/bin/storekitctl", "/usr/bin/storekit-example-app",
                     "/usr/lib/systemd/system/storekitd.service", "/usr/lib/systemd/system/storekitd.socket",
                     "/usr/lib/systemd/system/storekitd-control.socket", "/usr/lib/systemd/catalog/storekitd.catalog",
                     "/etc/storekitd/storekitd.conf", "/etc/storekitd/apps.d/com.example.game.conf",
                     "/etc/storekitd/catalog/example.storekit"] {
            #expect(FileManager.default.fileExists(atPath: destination.path + path), "missing \(path)")
        }
        let service = try String(contentsOfFile: destination.path + "/usr/lib/systemd/system/storekitd.service", encoding: .utf8)
        #expect(service.contains("ExecStart=/usr/bin/storekitd"))
    }
}
