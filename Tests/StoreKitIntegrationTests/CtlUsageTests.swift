import Foundation
import StoreKitTestSupport
import StoreKitWire
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

    @Test("storekitd called as storekitctl (the package's link) is storekitctl: usage, tables, binary output, exit statuses")
    func storekitdByTheNameStorekitctl() throws {
        let links = TemporaryDirectory("skctl")
        defer { links.remove() }
        let link = links.path + "/storekitctl"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: Paths.binary("storekitd"))
        let usage = try ProcessRunner.run(link, ["refund"])
        #expect(usage.status == 64 && usage.stderr.contains("Usage: storekitctl refund"), "\(usage.stderr)")

        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let bought = try ProcessRunner.run(link, ["buy", Sample.app, Sample.levelPack, "--uid", "7"], environment: daemon.clientEnvironment)
        #expect(bought.status == 0 && bought.stdout.contains("productIdentifier"), "\(bought.stderr)")
        let table = try ProcessRunner.run(link, ["transactions", "--uid", "7"], environment: daemon.clientEnvironment)
        let lines = table.stdout.split(separator: "\n")
        #expect(table.status == 0 && lines.count == 2, "\(table.stdout)\(table.stderr)")
        #expect(lines.first?.hasPrefix("ID ") == true && lines.last?.contains(Sample.levelPack) == true, "\(table.stdout)")
        let der = try ProcessRunner.run("/bin/sh", ["-c", "'\(link)' certificate --der | openssl x509 -inform der -noout -subject"],
                                        environment: daemon.clientEnvironment)
        #expect(der.status == 0 && der.stdout.contains("storekitd Root CA"), "\(der.stdout)\(der.stderr)")
        let refused = try ProcessRunner.run(link, ["buy", "com.example.nothing", "x"], environment: daemon.clientEnvironment)
        #expect(refused.status == 1 && refused.stderr.contains("not registered"), "\(refused.stderr)")
        // And by its own name, the same binary is still the daemon: it refuses an unknown option as the daemon does.
        let asDaemon = try ProcessRunner.run(Paths.binary("storekitd"), ["--frobnicate"])
        #expect(asDaemon.status != 0 && !asDaemon.stderr.contains("Usage: storekitctl"), "\(asDaemon.stderr)")
    }

    @Test("storekitctl offers exactly the control plane's commands (StoreKitWire.ControlCommand), sign-offer, sign-eligibility and sign-commerce")
    func everyControlCommand() throws {
        let help = try ProcessRunner.run(Paths.binary("storekitctl"), ["--help"])
        let listed = help.stdout.split(separator: "\n", omittingEmptySubsequences: false).drop { !$0.hasPrefix("Commands:") }.dropFirst()
            .prefix { !$0.isEmpty }.compactMap { $0.split(separator: " ").first.map(String.init) }
        // sign-offer, sign-eligibility and sign-commerce sign here, as the developer's server would, without the daemon.
        let signedHere = ["sign-offer", "sign-eligibility", "sign-commerce"]
        let sentToTheDaemon = listed.filter { !signedHere.contains($0) }
        #expect(signedHere.allSatisfy(listed.contains))
        #expect(Set(sentToTheDaemon) == Set(ControlCommand.allCases.map(\.rawValue)), "\(listed)")
        #expect(sentToTheDaemon.count == ControlCommand.allCases.count)
    }

    @Test("clear --transaction deletes that one transaction; an unknown one fails; --transaction goes alone")
    func clearOneTransaction() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let gone = try #require(try daemon.ctlObject(["buy", Sample.app, Sample.coins, "--uid", "5"])[string: "transactionIdentifier"])
        let stays = try #require(try daemon.ctlObject(["buy", Sample.app, Sample.levelPack, "--uid", "5"])[string: "transactionIdentifier"])
        let cleared = try daemon.ctl(["clear", "--transaction", gone, "-o", "json"])
        #expect(cleared.status == 0 && cleared.stdout.contains(#""deletedTransactions":1"#) && cleared.stdout.contains(gone), "\(cleared.stdout)\(cleared.stderr)")
        let left = try daemon.ctl(["transactions", "--uid", "5", "-o", "json"])
        #expect(left.stdout.contains(stays) && !left.stdout.contains(gone), "\(left.stdout)")
        let again = try daemon.ctl(["clear", "--transaction", gone])
        #expect(again.status == 1 && again.stderr.contains("does not exist"), "\(again.stderr)")
        let mixed = try daemon.ctl(["clear", "--transaction", stays, "--all"])
        #expect(mixed.status == 64, "\(mixed.stderr)")
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
