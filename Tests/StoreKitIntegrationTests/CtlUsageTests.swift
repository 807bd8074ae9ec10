import Foundation
import StoreKitTestSupport
import Testing

/// A usage error names what is wrong and shows the usage of the command given, not the whole
/// program's (as git and systemctl do); no daemon is needed to say so.
@Suite("storekitctl usage errors")
struct CtlUsageTests {
    @Test("a command missing its argument prints that command's usage and exits 64",
          arguments: [("approve", "Usage: storekitctl approve TRANSACTION"), ("products", "Usage: storekitctl products APP"),
                      ("refund", "Usage: storekitctl refund")])
    func commandUsage(command: String, usage: String) throws {
        let result = try ProcessRunner.run(Paths.binary("storekitctl"), [command],
                                           environment: ["STOREKITD_CONTROL_SOCKET": "/nonexistent/control.sock"])
        #expect(result.status == 64)
        #expect(result.stderr.contains(usage), "\(result.stderr)")
        #expect(!result.stderr.contains("Usage: storekitctl [--socket PATH]"), "the whole program's usage: \(result.stderr)")
    }

    @Test("a table cuts a JWS short and says how long it is; -o json prints it whole")
    func longValuesCutInTables() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let table = try daemon.ctl(["buy", Sample.app, Sample.levelPack])
        #expect(table.status == 0, "\(table.stderr)")
        let line = try #require(table.stdout.split(separator: "\n").first { $0.hasPrefix("jwsRepresentation") })
        #expect(line.count < 150 && line.contains("characters; -o json prints it whole"), "\(line)")
        let json = try #require(try daemon.ctlObject(["buy", Sample.app, Sample.seasonPass])[string: "jwsRepresentation"])
        #expect(json.count > 1000 && json.split(separator: ".").count == 3)
    }

    @Test("no command or an unknown one prints the program's usage")
    func programUsage() throws {
        for arguments in [[], ["frobnicate"]] {
            let result = try ProcessRunner.run(Paths.binary("storekitctl"), arguments)
            #expect(result.status == 64)
            #expect(result.stderr.contains("Usage: storekitctl [--socket PATH]"), "\(result.stderr)")
        }
    }

    @Test("a user who may not use the control socket is told to be root or in AdminGroup=, not only 'Permission denied'",
          .enabled(if: getuid() == 0, "needs root to run storekitctl as another user"))
    func notAnAdministrator() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        daemon.openDirectoriesToOtherUsers()
        let result = try daemon.ctl(["status"], uid: 65534)
        #expect(result.status == 1)
        #expect(result.stderr.contains("run storekitctl as root") && result.stderr.contains("AdminGroup="), "\(result.stderr)")
        let missing = try ProcessRunner.run(Paths.binary("storekitctl"), ["status"],
                                            environment: ["STOREKITD_CONTROL_SOCKET": daemon.directory.file("none/control.sock")])
        #expect(missing.status == 1 && missing.stderr.contains("no daemon serves there"), "\(missing.stderr)")
    }
}
