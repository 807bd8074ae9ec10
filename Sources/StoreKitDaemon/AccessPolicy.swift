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

/// The executable of the process on the other end of `socket`, for `Executable=` checks.
///
/// Guarded against pid reuse: the pid is pinned with a pidfd before `/proc/PID/exe` is read, and
/// the answer counts only if afterwards that process is still alive and the socket still
/// connected — so the exe read is the peer's, not a later process that got the same pid.
/// (A process of the same uid can always ptrace the app or hand its socket on; see docs/security.md.)
func verifiedExecutable(of pid: Int32, socket: Int32) -> String? {
    let pidfd = storekit_pidfd_open(pid)
    guard pidfd >= 0 else { return nil }
    defer { close(pidfd) }
    guard let path = executablePath(of: pid) else { return nil }
    let exited = storekit_poll_now(pidfd, Int16(POLLIN)) == 1
    let hungUp = storekit_poll_now(socket, 0x2000 /* POLLRDHUP */ | Int16(POLLHUP)) == 1
    return exited || hungUp ? nil : path
}

/// Reads `/proc/PID/exe`; nil when the process is gone or unreadable.
func executablePath(of pid: Int32) -> String? {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
    guard count > 0 else { return nil }
    return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
