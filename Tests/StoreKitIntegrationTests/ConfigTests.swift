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
