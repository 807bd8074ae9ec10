import Foundation
import StoreKitTestSupport
import Testing

/// `ObserverUnit=`: storekitd calls systemd's `StartUnit` over D-Bus when an update finds no
/// observer. A private dbus-daemon with python3-dbusmock's systemd template plays systemd.
@Suite("observer activation over D-Bus")
struct ObserverActivationTests {
    final class PrivateBus {
        let directory: TemporaryDirectory
        let address: String
        let bus: Process
        let mock: Process

        init() throws {
            directory = TemporaryDirectory("skbus")
            address = "unix:path=\(directory.file("bus.sock"))"
            try directory.write("bus.conf", """
                <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
                 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
                <busconfig><type>system</type><listen>\(address)</listen>
                <policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*"/><allow receive_sender="*"/></policy></busconfig>
                """)
            // In the foreground (no --fork), so that this test owns and reaps it.
            bus = Process()
            bus.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
            bus.arguments = ["--config-file=\(directory.file("bus.conf"))", "--nofork"]
            bus.standardOutput = FileHandle.nullDevice
            bus.standardError = FileHandle.nullDevice
            try bus.run()
            let busDeadline = Date().addingTimeInterval(10)
            while !FileManager.default.fileExists(atPath: directory.file("bus.sock")) && Date() < busDeadline { usleep(20_000) }
            try #require(FileManager.default.fileExists(atPath: directory.file("bus.sock")),
                         "dbus-daemon did not start (make test installs dbus-daemon)")
            mock = Process()
            mock.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            mock.arguments = ["-m", "dbusmock", "--system", "--template", "systemd"]
            mock.environment = ProcessInfo.processInfo.environment.merging(["DBUS_SYSTEM_BUS_ADDRESS": address]) { $1 }
            mock.standardOutput = FileHandle.nullDevice
            mock.standardError = FileHandle.nullDevice
            try mock.run()
            // Wait until the mock owns org.freedesktop.systemd1.
            let deadline = Date().addingTimeInterval(20)
            while Date() < deadline {
                if (try? owned())?.status == 0 { return }
                usleep(100_000)
            }
            throw DaemonError.timeout(log: "python3-dbusmock did not come up (make test installs python3-dbusmock)")
        }

        /// Exits 0 once the mock owns systemd's bus name.
        func owned() throws -> ProcessResult {
            try ProcessRunner.run("/usr/bin/python3", ["-c", """
                import dbus, sys
                b = dbus.bus.BusConnection('\(address)')
                sys.exit(0 if b.name_has_owner('org.freedesktop.systemd1') else 1)
                """], timeout: 20)
        }

        /// Runs a python snippet with `m` bound to systemd's manager object on the private bus.
        func python(_ code: String) throws -> ProcessResult {
            try ProcessRunner.run("/usr/bin/python3", ["-c", """
                import dbus
                b = dbus.bus.BusConnection('\(address)')
                m = b.get_object('org.freedesktop.systemd1', '/org/freedesktop/systemd1')
                \(code)
                """], timeout: 20)
        }

        func addUnit(_ name: String) throws {
            let result = try python("m.AddMockUnit('\(name)', dbus_interface='org.freedesktop.DBus.Mock')")
            try #require(result.status == 0, "\(result.stderr)")
        }

        func activeState(_ unit: String) throws -> String {
            let result = try python("""
                p = m.GetUnit('\(unit)', dbus_interface='org.freedesktop.systemd1.Manager')
                u = b.get_object('org.freedesktop.systemd1', p)
                print(u.Get('org.freedesktop.systemd1.Unit', 'ActiveState', dbus_interface='org.freedesktop.DBus.Properties'))
                """)
            return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func stop() {
            if mock.isRunning {
                kill(mock.processIdentifier, SIGKILL)
                mock.waitUntilExit()
            }
            if bus.isRunning {
                kill(bus.processIdentifier, SIGKILL)
                bus.waitUntilExit()
            }
            directory.remove()
        }
    }

    @Test("an update with no observer starts ObserverUnit= once per interval; a connected observer stops it")
    func startsObserverUnit() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        try bus.addUnit("example-game-observer.service")
        #expect(try bus.activeState("example-game-observer.service") == "inactive")

        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        let appFile = (daemon.configFile as NSString).deletingLastPathComponent + "/apps.d/com.example.game.conf"
        try "[App]\nID=com.example.game\nCatalog=catalog/example.storekit\nObserverUnit=example-game-observer.service\n"
            .write(toFile: appFile, atomically: true, encoding: .utf8)
        try "[Observers]\nActivationIntervalSec=30s\n".write(toFile: daemon.configFile, atomically: true, encoding: .utf8)
        daemon.extraEnvironment = ["DBUS_SYSTEM_BUS_ADDRESS": bus.address]
        try daemon.start()

        // A purchase made outside the app, with no observer connected: the unit is started.
        #expect(try daemon.ctl(["buy", "com.example.game", "com.example.game.coins100", "--uid", "0"]).status == 0)
        let deadline = Date().addingTimeInterval(10)
        while try bus.activeState("example-game-observer.service") != "active" && Date() < deadline { usleep(100_000) }
        #expect(try bus.activeState("example-game-observer.service") == "active")
        #expect(daemon.log().contains("Started observer unit example-game-observer.service for com.example.game"))

        // Rate-limited: a second update within the interval does not start it again.
        #expect(try daemon.ctl(["buy", "com.example.game", "com.example.game.coins100", "--uid", "0"]).status == 0)
        usleep(500_000)
        let starts = daemon.log().components(separatedBy: "Started observer unit").count - 1
        #expect(starts == 1, "started \(starts) times")
    }

    @Test("a unit that cannot be started is logged and retried")
    func failedStartIsLogged() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        let appFile = (daemon.configFile as NSString).deletingLastPathComponent + "/apps.d/com.example.game.conf"
        try "[App]\nID=com.example.game\nCatalog=catalog/example.storekit\nObserverUnit=missing-observer.service\n"
            .write(toFile: appFile, atomically: true, encoding: .utf8)
        try "[Observers]\nActivationIntervalSec=1s\n".write(toFile: daemon.configFile, atomically: true, encoding: .utf8)
        daemon.extraEnvironment = ["DBUS_SYSTEM_BUS_ADDRESS": bus.address]
        try daemon.start()
        #expect(try daemon.ctl(["buy", "com.example.game", "com.example.game.coins100", "--uid", "0"]).status == 0)
        let deadline = Date().addingTimeInterval(10)
        while daemon.log().components(separatedBy: "Failed to start observer unit missing-observer.service").count < 3
                && Date() < deadline {
            usleep(100_000)
        }
        // The first attempt and at least one retry after the interval.
        #expect(daemon.log().components(separatedBy: "Failed to start observer unit missing-observer.service").count >= 3)
    }
}
