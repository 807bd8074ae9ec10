#if canImport(Glibc)
import Glibc
#endif

/// A directory whose contents only its owner may replace: where the daemon binds its sockets and
/// keeps its database, and where a client looks for a socket. One that another user owns, or may
/// write into, is refused, because that user could put a socket or a symlink there of their own.
public enum PrivateDirectory {
    /// Why a directory cannot be trusted (or made), in words for the person who must fix it.
    public struct Refusal: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// Creates `path` with `mode` when it is absent (missing parents 0700, the umask ignored),
    /// then checks it as `check` does.
    public static func prepare(_ path: String, mode: mode_t, uid: uid_t = getuid()) throws(Refusal) {
        var status = stat()
        if lstat(path, &status) != 0 {
            guard errno == ENOENT else { throw Refusal(description: "cannot inspect \(path): \(Errno.current)") }
            try create(path, mode: mode)
        }
        try check(path, uid: uid)
    }

    /// Checks that `path` is a directory (not a symlink to one), owned by `uid` or root, and not
    /// writable by group or others.
    public static func check(_ path: String, uid: uid_t = getuid()) throws(Refusal) {
        var status = stat()
        guard lstat(path, &status) == 0 else { throw Refusal(description: "cannot inspect \(path): \(Errno.current)") }
        guard status.st_mode & S_IFMT == S_IFDIR else {
            throw Refusal(description: "\(path) is not a directory (a symlink or another file is there)")
        }
        guard status.st_uid == uid || status.st_uid == 0 else {
            throw Refusal(description: "\(path) belongs to uid \(status.st_uid), not to uid \(uid) or root; "
                + "another user could replace what is in it. Remove it or choose another directory")
        }
        guard status.st_mode & 0o022 == 0 else {
            throw Refusal(description: "\(path) is writable by "
                + (status.st_mode & 0o002 != 0 ? "every user" : "its group")
                + " (mode \(String(status.st_mode & 0o7777, radix: 8))); make it 0700 or 0755")
        }
    }

    private static func create(_ path: String, mode: mode_t) throws(Refusal) {
        var prefix = path.hasPrefix("/") ? "" : "."
        let components = path.split(separator: "/", omittingEmptySubsequences: true)
        for (index, component) in components.enumerated() {
            prefix += "/" + component
            let last = index == components.count - 1
            if mkdir(prefix, last ? mode : 0o700) == 0 {
                // mkdir applies the umask; the mode asked for is the mode wanted.
                if last, chmod(prefix, mode) != 0 {
                    throw Refusal(description: "cannot set the mode of \(prefix): \(Errno.current)")
                }
            } else if errno != EEXIST {
                throw Refusal(description: "cannot create \(prefix): \(Errno.current)")
            }
        }
    }
}
