import Foundation
import StoreKitConnection
import StoreKitPosix
import StoreKitTestSupport
import Testing

/// The runtime and state directories: one that another user owns or may write into is refused
/// (that user could replace the sockets or plant symlinks), and what the daemon creates is 0700.
@Suite("directory trust")
struct DirectoryTrustTests {
    /// Starts the daemon expecting it to refuse; returns its exit status and log.
    static func refusedStart(_ daemon: DaemonProcess) throws -> (status: Int32, log: String) {
        do {
            try daemon.start(timeout: 10)
        } catch DaemonError.exited(let status, let log) {
            return (status, log)
        }
        Issue.record("storekitd started")
        return (0, daemon.log())
    }

    static func mode(_ path: String) -> mode_t {
        var status = stat()
        return lstat(path, &status) == 0 ? status.st_mode & 0o7777 : 0
    }

    @Test("a runtime directory every user may write into (the /tmp fallback another user made 0777) is refused")
    func worldWritableRuntimeDirectory() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        #expect(mkdir(daemon.runtimeDirectory, 0o777) == 0)
        #expect(chmod(daemon.runtimeDirectory, 0o777) == 0)
        let (status, log) = try Self.refusedStart(daemon)
        #expect(status == 1)
        #expect(log.contains("\(daemon.runtimeDirectory) is writable by every user"), "\(log)")
        #expect(!FileManager.default.fileExists(atPath: daemon.clientSocket))
    }

    @Test("a state directory that belongs to another user is refused", .enabled(if: getuid() == 0, "needs root to chown"))
    func foreignStateDirectory() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        #expect(mkdir(daemon.stateDirectory, 0o700) == 0)
        #expect(chown(daemon.stateDirectory, 4321, 4321) == 0)
        let (status, log) = try Self.refusedStart(daemon)
        #expect(status == 1)
        #expect(log.contains("\(daemon.stateDirectory) belongs to uid 4321"), "\(log)")
    }

    @Test("a symlink in place of the state directory is refused, not followed")
    func symlinkedStateDirectory() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        let elsewhere = daemon.directory.file("elsewhere")
        #expect(mkdir(elsewhere, 0o700) == 0)
        #expect(symlink(elsewhere, daemon.stateDirectory) == 0)
        let (status, log) = try Self.refusedStart(daemon)
        #expect(status == 1)
        #expect(log.contains("\(daemon.stateDirectory) is not a directory"), "\(log)")
        #expect(!FileManager.default.fileExists(atPath: elsewhere + "/storekitd.sqlite"))
    }

    @Test("what the daemon creates is private whatever its umask: directories, database, WAL, commit log")
    func createdFilesArePrivate() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        // Started by a shell with umask 0, so that only the daemon's own care makes them private.
        let (process, _) = try daemon.launch(["/bin/sh", "-c", "umask 0; exec \"$0\" \"$@\"", Paths.binary("storekitd")] + daemon.arguments,
                                             environment: ProcessInfo.processInfo.environment.filter { $0.key != "NOTIFY_SOCKET" })
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() } }
        #expect(try daemon.waitUntilReady(process, timeout: 15), "\(daemon.log())")
        let client = try Client(daemon)
        _ = try client.subscribe()
        _ = try client.buy(Sample.coins)
        client.close()
        // Root's state directory is readable (apps read root-certificate.pem there); the keys are not.
        #expect(Self.mode(daemon.stateDirectory) == (getuid() == 0 ? 0o755 : 0o700))
        #expect(Self.mode(daemon.stateDirectory + "/root-certificate.pem") == 0o644)
        #expect(Self.mode(daemon.stateDirectory + "/signing") == 0o700)
        for file in ["root.pem", "intermediate.pem", "leaf.pem"] {
            #expect(Self.mode(daemon.stateDirectory + "/signing/" + file) == 0o600, "\(file)")
        }
        // Run as root, the daemon serves every user: the runtime directory is traversable, not writable.
        #expect(Self.mode(daemon.runtimeDirectory) == (getuid() == 0 ? 0o755 : 0o700))
        for file in ["storekitd.sqlite", "storekitd.sqlite-wal", "storekitd.sqlite-shm", "storekitd.sqlite-log.0", "storekitd.sqlite-log.1"] {
            let path = daemon.stateDirectory + "/" + file
            guard FileManager.default.fileExists(atPath: path) else { continue }
            #expect(Self.mode(path) == 0o600, "\(file) is \(String(Self.mode(path), radix: 8))")
        }
        #expect(Self.mode(daemon.databasePath) == 0o600)
    }

    @Test("a symlink planted at the commit log is refused, and its target is not written")
    func symlinkedCommitLog() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        #expect(mkdir(daemon.stateDirectory, 0o700) == 0)
        let target = daemon.directory.file("victim")
        try "precious\n".write(toFile: target, atomically: false, encoding: .utf8)
        #expect(symlink(target, daemon.stateDirectory + "/storekitd.sqlite-log.0") == 0)
        let (status, log) = try Self.refusedStart(daemon)
        #expect(status == 1)
        #expect(log.contains("storekitd.sqlite-log.0") && log.contains("symbolic link"), "\(log)")
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "precious\n")
    }

    @Test("an existing database readable by others is made 0600 at start")
    func existingDatabaseMadePrivate() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        #expect(daemon.stop() == 0)
        #expect(chmod(daemon.databasePath, 0o644) == 0)
        try daemon.start()
        #expect(Self.mode(daemon.databasePath) == 0o600)
    }

    @Test("signing keys copied with loose modes (directory 0755, files 0644) are made private at start, said once in the journal")
    func looseKeyModesRepaired() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        #expect(daemon.stop() == 0)
        let keys = daemon.stateDirectory + "/signing"
        #expect(chmod(keys, 0o755) == 0)
        for file in ["root.pem", "intermediate.pem", "leaf.pem"] { #expect(chmod(keys + "/" + file, 0o644) == 0) }
        if getuid() == 0 {
            // What the hostile user of the finding did: read the leaf key as another uid.
            daemon.openDirectoriesToOtherUsers()
            #expect(try ProcessRunner.run("/usr/sbin/runuser", ["-u", "nobody", "--", "/bin/cat", keys + "/leaf.pem"]).status == 0,
                    "readable before the start")
        }
        try daemon.start()
        #expect(Self.mode(keys) == 0o700)
        for file in ["root.pem", "intermediate.pem", "leaf.pem"] { #expect(Self.mode(keys + "/" + file) == 0o600, "\(file)") }
        if getuid() == 0 {
            #expect(try ProcessRunner.run("/usr/sbin/runuser", ["-u", "nobody", "--", "/bin/cat", keys + "/leaf.pem"]).status != 0)
        }
        let warnings = daemon.log().split(separator: "\n").filter { $0.contains("signing key was readable by other users") }
        #expect(warnings.count == 1, "\(daemon.log())")
        #expect(warnings.first?.contains("leaf.pem was 644, made 600") == true)
        #expect(warnings.first?.contains("rotate-key --chain") == true)
        #expect(daemon.stop() == 0)
        try daemon.start()
        #expect(daemon.log().split(separator: "\n").filter { $0.contains("signing key was readable") }.count == 1,
                "nothing to repair the next time")
    }

    @Test("a signing key file that is a symbolic link is refused at start, and its target is not read as the key")
    func symlinkedKeyRefused() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        #expect(daemon.stop() == 0)
        let leaf = daemon.stateDirectory + "/signing/leaf.pem"
        let elsewhere = daemon.directory.file("planted.pem")
        #expect(rename(leaf, elsewhere) == 0)
        #expect(symlink(elsewhere, leaf) == 0)
        let (status, log) = try Self.refusedStart(daemon)
        #expect(status == 1)
        #expect(log.contains("leaf.pem is a symbolic link"), "\(log)")
    }

    @Test("a second daemon on the same runtime directory with another state directory is refused; the first keeps its sockets")
    func secondDaemonOnTheSameRuntimeDirectory() throws {
        let first = try DaemonProcess()
        defer { first.remove() }
        try first.start()
        let rootBefore = try String(contentsOfFile: first.runtimeDirectory + "/root-certificate.pem", encoding: .utf8)
        let state = first.directory.file("other-state")
        let second = try ProcessRunner.run(Paths.binary("storekitd"),
                                           ["--config", first.configFile, "--runtime-dir", first.runtimeDirectory,
                                            "--state-dir", state, "--log-target", "stderr"], timeout: 15)
        #expect(second.status == 1, "\(second.stderr)")
        #expect(second.stderr.contains("another storekitd serves in \(first.runtimeDirectory)")
                && second.stderr.contains("pid \(first.process?.processIdentifier ?? 0)"), "\(second.stderr)")
        #expect(try String(contentsOfFile: first.runtimeDirectory + "/root-certificate.pem", encoding: .utf8) == rootBefore,
                "the first's root certificate was replaced")
        let client = try Client(first)
        #expect(try client.request { .ping(requestID: $0) }.code == .ok, "the first no longer serves")
        client.close()
        #expect(first.stop() == 0)
        #expect(!FileManager.default.fileExists(atPath: first.runtimeDirectory + "/storekitd.lock"), "the claim is left behind")
        // Once the first has stopped, another may serve there.
        try first.start()
        #expect(first.stop() == 0)
    }

    @Test("a state directory its user may not write into is refused in the directory's words, not SQLite's",
          .enabled(if: getuid() == 0, "needs root to run the daemon as another user"))
    func readOnlyStateDirectory() throws {
        let directory = TemporaryDirectory("skro")
        defer { directory.remove() }
        chmod(directory.path, 0o755)
        let state = directory.file("state")
        let run = directory.file("run")
        #expect(mkdir(state, 0o500) == 0 && chown(state, 65534, 65534) == 0)
        #expect(mkdir(run, 0o700) == 0 && chown(run, 65534, 65534) == 0)
        let result = try ProcessRunner.run(Paths.binary("storekitd"),
                                           ["--config", Paths.sampleConfig + "/storekitd.conf", "--state-dir", state,
                                            "--runtime-dir", run, "--log-target", "stderr"],
                                           environment: ["HOME": "/"], uid: 65534, timeout: 15)
        #expect(result.status == 1)
        #expect(result.stderr.contains("the state directory \(state) is not writable: uid 65534 may not write into it"), "\(result.stderr)")
        #expect(!result.stderr.lowercased().contains("readonly database"), "\(result.stderr)")
    }

    @Test("a client does not use a per-user socket directory that another user may write into")
    func clientSkipsUntrustedDirectory() throws {
        let runtime = TemporaryDirectory("skxdg")
        defer { runtime.remove() }
        let own = runtime.file("storekitd")
        #expect(mkdir(own, 0o700) == 0)
        let fd = try UnixSocket.listen(path: own + "/storekitd.sock", mode: 0o666)
        defer { UnixSocket.close(fd) }
        // Run as root, the client always uses the system directory; as a user, the check decides.
        guard getuid() != 0 else {
            #expect(SocketLocation.runtimeDirectory(environment: ["XDG_RUNTIME_DIR": runtime.path]) == "/run/storekitd")
            return
        }
        #expect(SocketLocation.runtimeDirectory(environment: ["XDG_RUNTIME_DIR": runtime.path]) == own)
        #expect(chmod(own, 0o777) == 0)
        #expect(SocketLocation.runtimeDirectory(environment: ["XDG_RUNTIME_DIR": runtime.path]) == "/run/storekitd")
    }

    @Test("as a user, a client uses its own socket directory only while nobody else may write into it",
          .enabled(if: getuid() == 0, "needs root to run the client as uid 65534"))
    func clientLookupAsUser() throws {
        let runtime = TemporaryDirectory("skxdguser")
        defer { runtime.remove() }
        let own = runtime.file("storekitd")
        #expect(mkdir(own, 0o700) == 0)
        #expect(chown(runtime.path, 65534, 65534) == 0 && chown(own, 65534, 65534) == 0)
        // A socket file with nothing listening: the client says which path it tried.
        let fd = try UnixSocket.listen(path: own + "/storekitd.sock", mode: 0o666)
        UnixSocket.close(fd)
        func tried() throws -> String {
            try ProcessRunner.run(Paths.binary("storekit-example-app"), ["--ledger", "/dev/null", "list"],
                                  environment: ["XDG_RUNTIME_DIR": runtime.path, "STOREKIT_CONNECT_TIMEOUT": "1", "HOME": "/"],
                                  uid: 65534, timeout: 30).stderr
        }
        let trusted = try tried()
        #expect(trusted.contains(own + "/storekitd.sock"), "\(trusted)")
        #expect(chmod(own, 0o777) == 0)
        let untrusted = try tried()
        #expect(!untrusted.contains(own), "a directory anybody may write was used: \(untrusted)")
        #expect(untrusted.contains("/run/storekitd/storekitd.sock"), "\(untrusted)")
    }

    @Test("PrivateDirectory: owner, mode and kind are each checked")
    func privateDirectoryChecks() throws {
        let base = TemporaryDirectory("skpriv")
        defer { base.remove() }
        let path = base.file("d")
        try PrivateDirectory.prepare(path, mode: 0o700)
        #expect(Self.mode(path) == 0o700)
        #expect(chmod(path, 0o770) == 0)
        #expect(throws: PrivateDirectory.Refusal.self) { try PrivateDirectory.check(path) }
        #expect(chmod(path, 0o755) == 0)
        try PrivateDirectory.check(path)
        let link = base.file("link")
        #expect(symlink(path, link) == 0)
        #expect(throws: PrivateDirectory.Refusal.self) { try PrivateDirectory.check(link) }
        // Missing parents are created 0700 as well.
        try PrivateDirectory.prepare(base.file("a/b/c"), mode: 0o755)
        #expect(Self.mode(base.file("a")) == 0o700)
        #expect(Self.mode(base.file("a/b/c")) == 0o755)
    }
}
