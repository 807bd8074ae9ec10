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

    @Test("directories the daemon creates are private whatever the umask")
    func createdDirectoriesArePrivate() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        let old = umask(0)
        defer { umask(old) }
        try daemon.start()
        #expect(Self.mode(daemon.stateDirectory) == 0o700)
        // Run as root, the daemon serves every user: the runtime directory is traversable, not writable.
        #expect(Self.mode(daemon.runtimeDirectory) == (getuid() == 0 ? 0o755 : 0o700))
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
