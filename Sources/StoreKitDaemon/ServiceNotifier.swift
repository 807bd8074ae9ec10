import StoreKitPosix
import CSystemd
#if canImport(Glibc)
import Glibc
#endif

/// Talks to the service manager (sd_notify): readiness, status, watchdog, stopping, reloading.
/// Without `NOTIFY_SOCKET` every call is a cheap no-op.
public struct ServiceNotifier: Sendable {
    public let enabled: Bool
    /// Half the watchdog interval in milliseconds, nil when no watchdog is set for this process.
    public let watchdogPingInterval: Int64?

    public init(environment: [String: String]) {
        enabled = environment["NOTIFY_SOCKET"] != nil
        var usec: UInt64 = 0
        if sd_watchdog_enabled(0, &usec) > 0 && usec > 0 {
            watchdogPingInterval = max(Int64(usec / 2000), 1)
        } else {
            watchdogPingInterval = nil
        }
    }

    public func notify(_ state: String) {
        guard enabled else { return }
        _ = sd_notify(0, state)
    }

    public func ready(status: String) { notify("READY=1\nSTATUS=\(status)") }
    public func status(_ status: String) { notify("STATUS=\(status)") }
    public func watchdog() { notify("WATCHDOG=1") }
    public func stopping() { notify("STOPPING=1\nSTATUS=Shutting down") }

    public func reloading() {
        notify("RELOADING=1\nMONOTONIC_USEC=\(Monotonic.microseconds())\nSTATUS=Reloading configuration")
    }

    /// Hands a connected session's fd to the service manager's FD store (`FileDescriptorStoreMax=`),
    /// so the connection outlives a restart of the daemon.
    public func storeFileDescriptor(_ fd: Int32, name: String) {
        guard enabled else { return }
        var descriptor = fd
        _ = sd_pid_notify_with_fds(0, 0, "FDSTORE=1\nFDNAME=\(name)", &descriptor, 1)
    }

    /// Takes a session's fd out of the FD store (the connection ended).
    public func removeStoredFileDescriptor(name: String) {
        notify("FDSTOREREMOVE=1\nFDNAME=\(name)")
    }
}
