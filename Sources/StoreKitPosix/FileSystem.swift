#if canImport(Glibc)
import Glibc
#endif

/// System calls on paths, as opposed to open descriptors (see `FileDescriptor`): each wrapped once,
/// EINTR retried, -1 turned into a thrown `Errno`.
public enum FileSystem {
    /// `access(F_OK)`: whether `path` names something (a dangling symbolic link does not count).
    public static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    /// `stat(2)`, or `lstat(2)` (the link itself, not what it points at) with `followingSymlinks: false`.
    public static func status(of path: String, followingSymlinks: Bool = true) throws(Errno) -> stat {
        var info = stat()
        _ = try retryingSyscall { followingSymlinks ? stat(path, &info) : lstat(path, &info) }
        return info
    }

    /// `unlink(2)`.
    public static func remove(_ path: String) throws(Errno) {
        _ = try retryingSyscall { unlink(path) }
    }

    /// `chmod(2)`.
    public static func setPermissions(of path: String, to mode: mode_t) throws(Errno) {
        _ = try retryingSyscall { chmod(path, mode) }
    }

    /// `statvfs(3)`: the file system holding `path`.
    public static func statistics(ofFileSystemAt path: String) throws(Errno) -> statvfs {
        var info = statvfs()
        _ = try retryingSyscall { statvfs(path, &info) }
        return info
    }
}
