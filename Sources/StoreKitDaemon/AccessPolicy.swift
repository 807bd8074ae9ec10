import CPosix
import StoreKitPosix
#if canImport(Glibc)
import Glibc
#endif

/// Who may use the control socket: root, the daemon's own user, and members of `AdminGroup=`.
/// Checked on every accepted connection, whatever the socket file's mode says.
struct AccessPolicy {
    let adminGroupID: gid_t?
    let daemonUID: uid_t

    init(adminGroup: String?) {
        daemonUID = geteuid()
        guard let adminGroup else {
            adminGroupID = nil
            return
        }
        if let numeric = UInt32(adminGroup) {
            adminGroupID = numeric
        } else if let group = getgrnam(adminGroup) {
            adminGroupID = group.pointee.gr_gid
        } else {
            adminGroupID = nil
        }
    }

    func mayControl(_ peer: PeerCredentials) -> Bool {
        if peer.uid == 0 || peer.uid == daemonUID { return true }
        guard let adminGroupID else { return false }
        if peer.gid == adminGroupID { return true }
        return Self.groups(of: peer.uid, primary: peer.gid).contains(adminGroupID)
    }

    /// The supplementary groups of `uid` from the user database.
    static func groups(of uid: uid_t, primary: gid_t) -> [gid_t] {
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return [primary] }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(name, primary, &groups, &count) < 0 {
            groups = [gid_t](repeating: 0, count: Int(count))
            _ = getgrouplist(name, primary, &groups, &count)
        }
        return Array(groups.prefix(Int(max(count, 0))))
    }
}

/// What `Executable=` found about the process on the other end of a socket.
enum ExecutableCheck: Equatable {
    case matches
    /// The process runs another file; `path` is what `/proc/PID/exe` names (in the process's
    /// own mount namespace, so it may even read as the registered path).
    case differs(path: String)
    /// The process could not be examined (gone, unreadable, pid reused): refused all the same.
    case unknown(String)
}

/// Whether the process on the other end of `socket` runs the file registered as `Executable=`.
///
/// The file itself is compared, not its name: the device and inode of the running executable
/// (`stat` of `/proc/PID/exe`, which reaches the file the process executes whatever its mount
/// namespace calls it) against those of `registered` in the daemon's namespace, so a bind
/// mount of another program over the registered path is refused. The process is pinned with a
/// pidfd first — the socket's own (`SO_PEERPIDFD`) where the kernel has it, else
/// `pidfd_open(pid)` — and the answer counts only if afterwards that process is still alive and
/// the socket still connected, so a recycled pid cannot be mistaken for the peer.
/// (A process of the same uid can always ptrace the app or hand its socket on; see docs/security.md.)
func checkExecutable(of pid: Int32, socket: Int32, registered: String) -> ExecutableCheck {
    let pidfd: PidFD
    if let peer = peerPidfd(socket) {
        pidfd = peer
    } else {
        do throws(Errno) {
            pidfd = try PidFD(pid: pid)
        } catch {
            return .unknown("cannot pin pid \(pid): \(error)")
        }
    }
    if let pinned = pidOfPidfd(pidfd.rawValue), pinned != pid {
        return .unknown("pid \(pid) is no longer the peer (its pidfd names pid \(pinned))")
    }
    var running = stat()
    guard stat("/proc/\(pid)/exe", &running) == 0 else { return .unknown("cannot examine /proc/\(pid)/exe: \(Errno.current)") }
    let path = executablePath(of: pid) ?? "an unknown executable"
    let exited = pidfd.hasExited()
    let hungUp = storekit_poll_now(socket, 0x2000 /* POLLRDHUP */ | Int16(POLLHUP)) == 1
    guard !exited, !hungUp else { return .unknown("pid \(pid) went away while it was examined") }
    var expected = stat()
    guard stat(registered, &expected) == 0 else { return .unknown("cannot examine \(registered): \(Errno.current)") }
    return running.st_dev == expected.st_dev && running.st_ino == expected.st_ino ? .matches : .differs(path: path)
}

/// The pidfd of the socket's peer (`SO_PEERPIDFD`, Linux 6.5 and later); nil where the kernel lacks it.
func peerPidfd(_ socket: Int32) -> PidFD? {
    var fd: Int32 = -1
    var length = socklen_t(MemoryLayout<Int32>.size)
    let soPeerPidfd: Int32 = 77
    guard getsockopt(socket, SOL_SOCKET, soPeerPidfd, &fd, &length) == 0, fd >= 0 else { return nil }
    return PidFD(adopting: fd)
}

/// The pid a pidfd refers to, from `/proc/self/fdinfo` (nil when unreadable; -1 there: exited).
func pidOfPidfd(_ pidfd: Int32) -> Int32? {
    guard let info = try? String(contentsOfFile: "/proc/self/fdinfo/\(pidfd)", encoding: .utf8),
          let line = info.split(separator: "\n").first(where: { $0.hasPrefix("Pid:") }) else { return nil }
    return Int32(line.dropFirst(4).trimmingWhitespace())
}

/// Reads `/proc/PID/exe`; nil when the process is gone or unreadable.
func executablePath(of pid: Int32) -> String? {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
    guard count > 0 else { return nil }
    return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
