import Foundation

/// What the machine running the tests allows, for `.enabled(if:_:)` traits: a test that needs root
/// or a kernel feature is skipped, with the reason, where it cannot run.
public enum TestEnvironment {
    /// Running as root: needed to act as another user (setpriv, a thread's setresuid) or to chown.
    public static var isRoot: Bool { geteuid() == 0 }

    /// Whether `unshare --mount` can make a private mount namespace and mount a tmpfs in it: root
    /// with CAP_SYS_ADMIN, which many containers withhold. Tried once, on a directory of its own.
    public static let canMountInPrivateNamespace: Bool = {
        guard isRoot, FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else { return false }
        let directory = TemporaryDirectory("skm")
        defer { directory.remove() }
        let result = try? ProcessRunner.run(
            "/usr/bin/unshare", ["--mount", "--propagation", "private", "/bin/sh", "-c", "mount -t tmpfs tmpfs \"$0\"", directory.path],
            timeout: 10)
        return result?.status == 0
    }()
}
