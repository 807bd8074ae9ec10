import CPosix
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

    /// `renameat2(2)` with `RENAME_EXCHANGE`: `first` and `second` (both must exist) trade places
    /// in one step, so a reader sees one or the other, never neither.
    public static func exchange(_ first: String, _ second: String) throws(Errno) {
        _ = try retryingSyscall { storekit_exchange(first, second) }
    }

    /// `unlink(2)`.
    public static func remove(_ path: String) throws(Errno) {
        _ = try retryingSyscall { unlink(path) }
    }

    /// `chmod(2)`.
    public static func setPermissions(of path: String, to mode: mode_t) throws(Errno) {
        _ = try retryingSyscall { chmod(path, mode) }
    }

    /// `rename(2)`: atomically replaces `destination` with `source`.
    public static func rename(_ source: String, to destination: String) throws(Errno) {
        _ = try retryingSyscall { Glibc.rename(source, destination) }
    }

    /// Replaces the file at `path` with `bytes`, whole or not at all: written to a new file beside
    /// it (never following a link, mode `permissions` whatever the umask), synced, renamed over.
    /// Writers racing for one path (two instances of an app refreshing its receipt, two threads)
    /// each write a temporary file of their own, named with 64 random bits and created
    /// exclusively (a name taken is drawn again), so each rename puts one writer's whole file in
    /// place and no writer removes another's. The temporary file is removed when any step fails.
    /// One left by a crash between its creation and the rename (`NAME.tmp-HEX`) is removed by a
    /// later write of the same path once it is `leftoverAge` seconds old: no live writer of these
    /// small files takes that long.
    public static func writeAtomically(_ bytes: [UInt8], to path: String, permissions: mode_t) throws(Errno) {
        var attempts = 0
        while true {
            let temporary = path + ".tmp-" + String(UInt64.random(in: .min ... .max), radix: 16)
            let file: FileDescriptor
            do {
                file = try FileDescriptor.open(
                    temporary, .writeOnly, options: [.create, .exclusive, .noFollow, .closeOnExec], permissions: permissions)
            } catch where error == .fileExists && attempts < 8 {
                attempts += 1
                continue
            }
            do {
                try file.setPermissions(permissions)
                try file.write(bytes, toAbsoluteOffset: 0)
                try file.synchronize()
                try file.close()
                try rename(temporary, to: path)
            } catch {
                try? remove(temporary)
                throw error
            }
            removeLeftovers(of: path)
            return
        }
    }

    /// Age (seconds since the last change) from which a temporary file of `writeAtomically` is a
    /// crash's leftover.
    public static let leftoverAge = 600

    /// Removes the temporary files of `writeAtomically(to: path)` that are `leftoverAge` old or
    /// older: regular files named `NAME.tmp-` and 1 to 16 lowercase hex digits. Best effort: a
    /// directory that cannot be listed, or a file that cannot be removed, is left as it is.
    static func removeLeftovers(of path: String) {
        let now = WallClock.seconds()
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let prefix = (slash.map { String(path[path.index(after: $0)...]) } ?? path) + ".tmp-"
        guard let names = try? names(inDirectory: directory) else { return }
        for name in names where name.utf8.starts(with: prefix.utf8) {   // bytes, not canonical equivalence
            let suffix = name.utf8.dropFirst(prefix.utf8.count)
            guard (1...16).contains(suffix.count), suffix.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else { continue }
            let leftover = directory + "/" + name
            guard let info = try? status(of: leftover, followingSymlinks: false), info.st_mode & S_IFMT == S_IFREG,
                  now - info.st_mtim.tv_sec >= leftoverAge else { continue }
            try? remove(leftover)
        }
    }

    /// The whole regular file at `path`, refusing a symbolic link in its last component unless
    /// `followingSymlinks`. A directory is `EISDIR`; `/dev/null` reads as empty; anything else
    /// that is not a regular file (a FIFO, a socket, a device) is `EINVAL`, at once: it is opened
    /// without blocking, so a FIFO with no writer does not hold the caller.
    public static func readContents(of path: String, followingSymlinks: Bool = false) throws(Errno) -> [UInt8] {
        var options: FileDescriptor.OpenOptions = followingSymlinks ? [.closeOnExec] : [.noFollow, .closeOnExec]
        options.insert(FileDescriptor.OpenOptions(rawValue: O_NONBLOCK))
        let file = try FileDescriptor.open(path, .readOnly, options: options)
        let info = try file.status()   // on a throw, the descriptor closes as it goes out of scope
        switch info.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: throw Errno(rawValue: EISDIR)
        case S_IFCHR where info.st_rdev == (try? status(of: "/dev/null"))?.st_rdev: return []   // as a masked file is linked
        default: throw .invalidArgument
        }
        let size = Int(info.st_size)
        let bytes = try file.read(atAbsoluteOffset: 0, count: size)
        try file.close()
        return bytes
    }

    /// The names in the directory at `path`, without `.` and `..`, in no particular order.
    public static func names(inDirectory path: String) throws(Errno) -> [String] {
        guard let directory = opendir(path) else { throw Errno.current }
        defer { closedir(directory) }
        var names: [String] = []
        errno = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
            errno = 0
        }
        if errno != 0 { throw Errno.current }
        return names
    }

    /// `statvfs(3)`: the file system holding `path`.
    public static func statistics(ofFileSystemAt path: String) throws(Errno) -> statvfs {
        var info = statvfs()
        _ = try retryingSyscall { statvfs(path, &info) }
        return info
    }
}
