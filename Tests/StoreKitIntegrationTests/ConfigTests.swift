import Foundation
import StoreKitTestSupport
import Testing

/// The real `storekitd` refuses bad configuration with FILE:LINE and a non-zero exit, and keeps its
/// command-line contract (`--help` 0, usage errors 64).
@Suite struct DaemonConfigExitTests {
    /// Runs storekitd on a copy of the sample config changed by `edit`, on private directories.
    static func runDaemon(_ edit: (TemporaryDirectory) throws -> Void) throws -> (result: ProcessResult, directory: TemporaryDirectory) {
        let directory = TemporaryDirectory("skc")
        try FileManager.default.copyItem(atPath: Paths.sampleConfig, toPath: directory.file("config"))
        try edit(directory)
        // A daemon that wrongly accepts the config keeps running: the timeout ends it (and the test fails).
        let result = try ProcessRunner.run(
            Paths.binary("storekitd"),
            ["--config", directory.file("config/storekitd.conf"), "--runtime-dir", directory.file("run"),
             "--state-dir", directory.file("state"), "--log-target", "stderr"],
            timeout: 10)
        return (result, directory)
    }

    @Test("a malformed Database= with a password: neither --check-config nor the start repeats the password")
    func malformedConnectionStringIsRedacted() throws {
        let conninfo = "postgresql://storekitd:S3cretPW@[::1/storekit"
        let (result, directory) = try Self.runDaemon { directory in
            try directory.write("config/storekitd.conf.d/ledger.conf", "[Store]\nDatabase=\(conninfo)\n")
            chmod(directory.file("config/storekitd.conf.d/ledger.conf"), 0o600)
        }
        defer { directory.remove() }
        #expect(result.status == 1)
        #expect(result.stderr.contains("ledger.conf:2"), "\(result.stderr)")
        #expect(result.stderr.contains("IPv6"), "libpq's reason is kept: \(result.stderr)")
        #expect(!result.stderr.contains("S3cretPW") && !result.stdout.contains("S3cretPW"), "\(result.stderr)")
        let check = try ProcessRunner.run(Paths.binary("storekitd"),
                                          ["--check-config", "--config", directory.file("config/storekitd.conf")], timeout: 10)
        #expect(check.status == 1)
        #expect(!check.stderr.contains("S3cretPW") && !check.stdout.contains("S3cretPW"), "\(check.stderr)")
    }

    @Test("a Database= password in a file every user may read is refused; 0640 is accepted as far as the password goes")
    func passwordInWorldReadableFileIsRefused() throws {
        let (result, directory) = try Self.runDaemon { directory in
            try directory.write("config/storekitd.conf.d/ledger.conf",
                                "[Store]\nDatabase=host=/nonexistent dbname=storekit password=S3cretPW\n")
            chmod(directory.file("config/storekitd.conf.d/ledger.conf"), 0o644)
        }
        defer { directory.remove() }
        #expect(result.status == 1)
        #expect(result.stderr.contains("ledger.conf:2: Database= holds a password, and every user may read this file (mode 644)"),
                "\(result.stderr)")
        #expect(!result.stderr.contains("S3cretPW"))
        chmod(directory.file("config/storekitd.conf.d/ledger.conf"), 0o640)
        let check = try ProcessRunner.run(Paths.binary("storekitd"),
                                          ["--check-config", "--config", directory.file("config/storekitd.conf")], timeout: 10)
        #expect(check.status == 0, "\(check.stderr)")
    }

    @Test("a service file every user may read that holds the service's password is refused, as Database= itself is")
    func readableServiceFileIsRefused() throws {
        let directory = TemporaryDirectory("skc")
        defer { directory.remove() }
        try FileManager.default.copyItem(atPath: Paths.sampleConfig, toPath: directory.file("config"))
        try directory.write("pg_service.conf", "[other]\npassword=not-this\n[sk]\nhost=/nonexistent\ndbname=storekit\npassword=S3cretPW\n")
        chmod(directory.file("pg_service.conf"), 0o644)
        try directory.write("config/storekitd.conf.d/ledger.conf", "[Store]\nDatabase=service=sk\n")
        let check = try ProcessRunner.run(Paths.binary("storekitd"), ["--check-config", "--config", directory.file("config/storekitd.conf")],
                                          environment: ["PGSERVICEFILE": directory.file("pg_service.conf")], timeout: 10)
        #expect(check.status == 1)
        #expect(check.stderr.contains("service sk in \(directory.file("pg_service.conf")) holds a password, and every user may read that file"),
                "\(check.stderr)")
        #expect(!check.stderr.contains("S3cretPW"))
        chmod(directory.file("pg_service.conf"), 0o600)
        let fine = try ProcessRunner.run(Paths.binary("storekitd"), ["--check-config", "--config", directory.file("config/storekitd.conf")],
                                         environment: ["PGSERVICEFILE": directory.file("pg_service.conf")], timeout: 10)
        #expect(fine.status == 0, "\(fine.stderr)")
    }

    @Test("a password file libpq would ignore (group or world access) is refused with why, as libpq checks it")
    func loosePasswordFileIsRefused() throws {
        let (result, directory) = try Self.runDaemon { directory in
            try directory.write("pgpass", "*:*:*:storekitd:S3cretPW\n")
            chmod(directory.file("pgpass"), 0o644)
            try directory.write("config/storekitd.conf.d/ledger.conf",
                                "[Store]\nDatabase=host=/nonexistent dbname=storekit passfile=\(directory.file("pgpass"))\n")
        }
        defer { directory.remove() }
        #expect(result.status == 1)
        #expect(result.stderr.contains("pgpass has group or world access (mode 644); libpq ignores such a file"), "\(result.stderr)")
        chmod(directory.file("pgpass"), 0o600)
        let check = try ProcessRunner.run(Paths.binary("storekitd"),
                                          ["--check-config", "--config", directory.file("config/storekitd.conf")], timeout: 10)
        #expect(check.status == 0, "\(check.stderr)")
    }

    @Test func unknownKeyStopsTheDaemonWithFileAndLine() throws {
        let (result, directory) = try Self.runDaemon { directory in
            try directory.write("config/storekitd.conf", "# test\n[Daemon]\nLogLevel=info\nNoSuchKey=1\n")
        }
        defer { directory.remove() }
        #expect(result.status != 0)
        #expect(result.status != 137, "storekitd did not exit on its own")
        #expect(result.stderr.contains("storekitd.conf:4"), "stderr: \(result.stderr)")
        #expect(result.stderr.contains("NoSuchKey"), "stderr: \(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("run/storekitd.sock")), "it never listened")
    }

    @Test func badValueInADropInStopsTheDaemonWithFileAndLine() throws {
        let (result, directory) = try Self.runDaemon { directory in
            try directory.write("config/storekitd.conf.d/50-limits.conf", "[Limits]\n\nMaxConnections=lots\n")
        }
        defer { directory.remove() }
        #expect(result.status != 0)
        #expect(result.status != 137, "storekitd did not exit on its own")
        #expect(result.stderr.contains("50-limits.conf:3"), "stderr: \(result.stderr)")
    }

    @Test func brokenCatalogueStopsTheDaemonNamingTheFiles() throws {
        let (result, directory) = try Self.runDaemon { directory in
            try directory.write("config/apps.d/com.example.broken.conf",
                                "[App]\nID=com.example.broken\nCatalog=catalog/broken.storekit\n")
            try directory.write("config/catalog/broken.storekit", "{ \"products\": [ this is not JSON\n")
        }
        defer { directory.remove() }
        #expect(result.status != 0)
        #expect(result.status != 137, "storekitd did not exit on its own")
        #expect(result.stderr.contains("com.example.broken.conf:3"), "the registration's Catalog= line: \(result.stderr)")
        #expect(result.stderr.contains("broken.storekit"), "the catalogue file: \(result.stderr)")
    }

    @Test func missingCatalogueStopsTheDaemonNamingTheFile() throws {
        let (result, directory) = try Self.runDaemon { directory in
            try directory.write("config/apps.d/com.example.missing.conf",
                                "[App]\nID=com.example.missing\nCatalog=catalog/missing.storekit\n")
        }
        defer { directory.remove() }
        #expect(result.status != 0)
        #expect(result.status != 137, "storekitd did not exit on its own")
        #expect(result.stderr.contains("com.example.missing.conf:3"), "stderr: \(result.stderr)")
        #expect(result.stderr.contains("missing.storekit"), "stderr: \(result.stderr)")
    }

    @Test func helpExitsZero() throws {
        let result = try ProcessRunner.run(Paths.binary("storekitd"), ["--help"], timeout: 10)
        #expect(result.status == 0)
        #expect(result.stdout.contains("Usage: storekitd"), "stdout: \(result.stdout)")
        #expect(result.stdout.contains("--config"))
    }

    @Test func unknownOptionIsAUsageError() throws {
        let result = try ProcessRunner.run(Paths.binary("storekitd"), ["--no-such-option"], timeout: 10)
        #expect(result.status == 64, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("--no-such-option"), "stderr: \(result.stderr)")
    }
}
