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
            // python3-dbusmock's systemd template, with unit object paths escaped as systemd does
            // them (its own cannot hold the '@' of a template instance).
            try directory.write("systemd_instances.py", """
                import dbus
                from dbusmock import MOCK_IFACE
                from dbusmock.templates.systemd import *
                from dbusmock.templates.systemd import BUS_NAME, MAIN_OBJ, MAIN_IFACE, SYSTEM_BUS, UNIT_IFACE, PATH_PREFIX, load

                def _escape(name):
                    return ''.join(c if c.isalnum() else '_%02x' % ord(c) for c in name)

                @dbus.service.method(MOCK_IFACE, in_signature='s')
                def AddMockUnit(self, name):
                    unit_path = PATH_PREFIX + '/unit/' + _escape(name)
                    self.units[str(name)] = unit_path
                    self.AddObject(unit_path, UNIT_IFACE,
                                   {'Id': name, 'Names': [name], 'LoadState': 'loaded', 'ActiveState': 'inactive'}, [])
                """)
            mock.arguments = ["-m", "dbusmock", "--system", "--template", directory.file("systemd_instances.py")]
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

        /// Sets a mock unit's `ActiveState` and its service `Result` (as systemd does when it fails).
        func setState(_ unit: String, active: String, result: String) throws {
            let outcome = try python("""
                p = m.GetUnit('\(unit)', dbus_interface='org.freedesktop.systemd1.Manager')
                u = b.get_object('org.freedesktop.systemd1', p)
                u.UpdateProperties('org.freedesktop.systemd1.Unit', {'ActiveState': '\(active)'}, dbus_interface='org.freedesktop.DBus.Mock')
                try:
                    u.AddProperties('org.freedesktop.systemd1.Service', {'Result': '\(result)'}, dbus_interface='org.freedesktop.DBus.Mock')
                except dbus.exceptions.DBusException:
                    u.UpdateProperties('org.freedesktop.systemd1.Service', {'Result': '\(result)'}, dbus_interface='org.freedesktop.DBus.Mock')
                """)
            try #require(outcome.status == 0, "\(outcome.stderr)")
        }
    }

    /// A daemon whose sample app names `template` as its observer unit, talking to `bus`.
    static func daemon(observerUnit template: String, interval: String, bus: PrivateBus) throws -> DaemonProcess {
        let daemon = try DaemonProcess()
        let appFile = (daemon.configFile as NSString).deletingLastPathComponent + "/apps.d/com.example.game.conf"
        try "[App]\nID=com.example.game\nCatalog=catalog/example.storekit\nObserverUnit=\(template)\n"
            .write(toFile: appFile, atomically: true, encoding: .utf8)
        try "[Observers]\nActivationIntervalSec=\(interval)\n".write(toFile: daemon.configFile, atomically: true, encoding: .utf8)
        daemon.extraEnvironment = ["DBUS_SYSTEM_BUS_ADDRESS": bus.address]
        try daemon.start()
        return daemon
    }

    static func count(_ text: String, in log: String) -> Int { log.components(separatedBy: text).count - 1 }

    @Test("an update with no observer starts the buyer's instance of the template, and not again while it runs")
    func startsObserverInstance() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        try bus.addUnit("example-game-observer@4242.service")
        let daemon = try Self.daemon(observerUnit: "example-game-observer@.service", interval: "1s", bus: bus)
        defer { daemon.remove() }

        // A purchase made outside the app for uid 4242, with no observer connected: its instance is started.
        #expect(try daemon.ctl(["buy", "com.example.game", "com.example.game.coins100", "--uid", "4242"]).status == 0)
        #expect(try eventually { try bus.activeState("example-game-observer@4242.service") == "active" })
        #expect(eventually { daemon.log().contains("Started observer unit example-game-observer@4242.service for com.example.game (uid 4242)") })

        // Running but never connecting: said once, never started again (three intervals and more updates later).
        #expect(try daemon.ctl(["buy", "com.example.game", "com.example.game.coins100", "--uid", "4242"]).status == 0)
        #expect(eventually { daemon.log().contains("is active but no observer of com.example.game (uid 4242) has connected") })
        let log = daemon.log()
        #expect(Self.count("Started observer unit", in: log) == 1, "started \(Self.count("Started observer unit", in: log)) times")
        #expect(Self.count("has connected; not starting it again", in: log) == 1)
    }

    @Test("updates for root or a system account start no observer unit (the polkit rule would refuse it too)")
    func noObserverForRootOrSystemAccounts() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        for uid in ["0", "999", "65534", "4245"] { try bus.addUnit("example-game-observer@\(uid).service") }
        let daemon = try Self.daemon(observerUnit: "example-game-observer@.service", interval: "1s", bus: bus)
        defer { daemon.remove() }
        for uid in ["0", "999", "65534", "4245"] {
            #expect(try daemon.ctl(["buy", "com.example.game", "com.example.game.coins100", "--uid", uid]).status == 0)
        }
        // The person's (4245) is started; by then the others' updates were routed long before.
        #expect(try eventually { try bus.activeState("example-game-observer@4245.service") == "active" })
        for uid in ["0", "999", "65534"] {
            #expect(try bus.activeState("example-game-observer@\(uid).service") != "active", "uid \(uid)'s observer was started")
            #expect(!daemon.log().contains("observer-unit example-game-observer@\(uid).service"))
            #expect(!daemon.log().contains("example-game-observer@\(uid).service for"))
        }
    }

    @Test("an instance that fails is reported with its result and started again after a growing back-off")
    func failedInstanceBacksOff() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let unit = "example-game-observer@4243.service"
        try bus.addUnit(unit)
        let daemon = try Self.daemon(observerUnit: "example-game-observer@.service", interval: "1s", bus: bus)
        defer { daemon.remove() }
        #expect(try daemon.ctl(["buy", "com.example.game", "com.example.game.coins100", "--uid", "4243"]).status == 0)
        #expect(eventually { Self.count("Started observer unit \(unit)", in: daemon.log()) == 1 })

        // systemd reports the instance failed (its process exited without connecting).
        try bus.setState(unit, active: "failed", result: "exit-code")
        #expect(eventually { daemon.log().contains("Observer unit \(unit) for com.example.game (uid 4243) is failed (result: exit-code)") })
        #expect(daemon.log().contains("starting it again in 1 s"))
        #expect(eventually { Self.count("Started observer unit \(unit)", in: daemon.log()) == 2 })

        // It fails again: the next wait is twice as long.
        try bus.setState(unit, active: "failed", result: "exit-code")
        #expect(eventually { daemon.log().contains("starting it again in 2 s") })
        #expect(eventually(timeout: 15) { Self.count("Started observer unit \(unit)", in: daemon.log()) == 3 })
    }

    @Test("a unit that cannot be started is logged and retried after a growing back-off")
    func failedStartIsLogged() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let daemon = try Self.daemon(observerUnit: "missing-observer@.service", interval: "1s", bus: bus)
        defer { daemon.remove() }
        #expect(try daemon.ctl(["buy", "com.example.game", "com.example.game.coins100", "--uid", "4244"]).status == 0)
        let failure = "Failed to start observer unit missing-observer@4244.service"
        #expect(eventually(timeout: 15) { Self.count(failure, in: daemon.log()) >= 3 })
        let log = daemon.log()
        #expect(log.contains("trying again in 1 s") && log.contains("trying again in 2 s"), "\(log)")
    }

    @Test("the polkit rule's check: only instances of registered templates for the uids of people")
    func verifyObserverUnit() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        let appFile = (daemon.configFile as NSString).deletingLastPathComponent + "/apps.d/com.example.game.conf"
        try "[App]\nID=com.example.game\nCatalog=catalog/example.storekit\nObserverUnit=example-game-observer@.service\n"
            .write(toFile: appFile, atomically: true, encoding: .utf8)
        func verify(_ unit: String) throws -> Int32 {
            try ProcessRunner.run(Paths.binary("storekitd"), ["--config", daemon.configFile, "--verify-observer-unit", unit]).status
        }
        // Debian's /etc/login.defs: UID_MIN 1000, UID_MAX 60000 (the defaults when it says nothing).
        #expect(try verify("example-game-observer@1000.service") == 0)
        #expect(try verify("example-game-observer@60000.service") == 0)
        for refused in ["example-game-observer@0.service", "example-game-observer@4294967295.service",
                        "example-game-observer@999.service", "example-game-observer@65534.service",
                        "example-game-observer@.service", "example-game-observer@root.service", "example-game-observer@01000.service",
                        "example-game-observer@1000.socket", "example-game-observer@99999999999.service", "sshd.service",
                        "other-observer@1000.service", "example-game-observer@1000.service/../x"] {
            #expect(try verify(refused) == 1, "\(refused) was allowed")
        }
        let root = try ProcessRunner.run(Paths.binary("storekitd"), ["--config", daemon.configFile, "--verify-observer-unit",
                                                                      "example-game-observer@0.service"])
        #expect(root.stderr.contains("would run as uid 0, which is not a person's"), "\(root.stderr)")
        // A configured range replaces login.defs: a uid outside it is refused, one inside allowed.
        try "[Observers]\nUIDs=2000-2999\n".write(toFile: daemon.configFile, atomically: true, encoding: .utf8)
        #expect(try verify("example-game-observer@1000.service") == 1)
        #expect(try verify("example-game-observer@2500.service") == 0)
    }
}
