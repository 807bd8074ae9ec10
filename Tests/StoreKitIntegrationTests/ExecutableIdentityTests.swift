import Foundation
import StoreKitTestSupport
import Testing

/// `Executable=` compares the running file, not the name `/proc/PID/exe` gives it: another
/// program bind-mounted over the registered path (in a user and mount namespace any user may
/// make) is refused.
@Suite("Executable= identity")
struct ExecutableIdentityTests {
    static let namespacesAvailable = (try? ProcessRunner.run("/usr/bin/unshare", ["-Urm", "true"], timeout: 10).status) == 0

    @Test("a bind mount of another program over the registered path is refused; the registered file is accepted",
          .enabled(if: namespacesAvailable, "needs unprivileged user and mount namespaces (unshare -Urm)"))
    func bindMountedImpostor() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        // The registered file: a copy of the example app, so that the original is another file.
        let registered = daemon.directory.file("registered-app")
        try FileManager.default.copyItem(atPath: Paths.binary("storekit-example-app"), toPath: registered)
        let appFile = (daemon.configFile as NSString).deletingLastPathComponent + "/apps.d/com.example.game.conf"
        try "[App]\nID=com.example.game\nCatalog=catalog/example.storekit\nExecutable=\(registered)\n"
            .write(toFile: appFile, atomically: true, encoding: .utf8)
        try daemon.start()
        let environment = daemon.clientEnvironment.merging(["STOREKIT_CONNECT_TIMEOUT": "2"]) { $1 }

        let genuine = try Self.runFreshCopy(registered, ["--ledger", daemon.directory.file("ledger-1"), "buy", "com.example.game.coins100"],
                                            environment: environment)
        #expect(genuine.status == 0, "\(genuine.stdout) \(genuine.stderr)")

        // The impostor: the original binary mounted over the registered path, run by that path.
        let impostor = try ProcessRunner.run("/usr/bin/unshare", [
            "-Urm", "/bin/sh", "-c", "mount --bind \"$1\" \"$2\" && exec \"$2\" --ledger \"$3\" buy com.example.game.coins100",
            "sh", Paths.binary("storekit-example-app"), registered, daemon.directory.file("ledger-2"),
        ], environment: environment, timeout: 30)
        #expect(impostor.status != 0, "\(impostor.stdout) \(impostor.stderr)")
        #expect(eventually { daemon.log().contains("another file than \(registered)") }, "\(daemon.log())")
    }

    /// Runs a just-written executable. A process another test forks while the copy is open for
    /// writing holds it open until that child execs, and exec(2) of a file open for writing fails
    /// with ETXTBSY: tried again for up to 5 s while it does.
    static func runFreshCopy(_ path: String, _ arguments: [String], environment: [String: String]) throws -> ProcessResult {
        let deadline = Date().addingTimeInterval(5)
        while true {
            do {
                return try ProcessRunner.run(path, arguments, environment: environment, timeout: 30)
            } catch let error as NSError {
                let underlying = error.userInfo[NSUnderlyingErrorKey] as? NSError
                guard underlying?.domain == NSPOSIXErrorDomain, underlying?.code == Int(ETXTBSY), Date() < deadline else { throw error }
                usleep(20_000)
            }
        }
    }
}
