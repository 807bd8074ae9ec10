import CSystemd
import Dispatch
import StoreKitEngine

/// Keeps apps' persistent observers alive: when an update arrives for a (uid, app) with no
/// connected observer and the app has `ObserverUnit=`, the unit is started through systemd's
/// D-Bus API (`StartUnit`, via sd-bus). Starts are rate-limited per unit and retried after the
/// interval for as long as no observer has connected (a unit that failed to start or crashed).
///
/// The loop thread calls `request`, `observerConnected` and `retryDue`; the blocking D-Bus call
/// runs on a private queue so a slow bus never stalls the serving loop.
final class ObserverActivator {
    private struct Pending {
        var unit: String
        var lastAttempt: Int64
    }

    private let logger: Logger
    private let calls = DispatchQueue(label: "storekitd.observer-activation")
    private var pending: [QueueKey: Pending] = [:]
    private var lastStart: [String: Int64] = [:]

    init(logger: Logger) {
        self.logger = logger
    }

    /// `ObserverUnit=` for one uid: a template `name@.service` is instantiated with the uid.
    static func unitName(_ configured: String, uid: UInt32) -> String {
        configured.hasSuffix("@.service") ? String(configured.dropLast("@.service".count)) + "@\(uid).service" : configured
    }

    /// An update for `queue` found no observer; start `unit` unless it was started within `interval` ms.
    func request(_ queue: QueueKey, unit configured: String, now: Int64, interval: Int64) {
        let unit = Self.unitName(configured, uid: queue.uid)
        if pending[queue] == nil { pending[queue] = Pending(unit: unit, lastAttempt: Int64.min / 2) }
        if let last = lastStart[unit], now - last < interval { return }
        start(unit, for: queue, now: now)
    }

    func observerConnected(_ queue: QueueKey) {
        pending[queue] = nil
    }

    /// Tries again for queues still without an observer once the interval has passed.
    func retryDue(now: Int64, interval: Int64) {
        for (queue, entry) in pending where now - entry.lastAttempt >= interval {
            if let last = lastStart[entry.unit], now - last < interval { continue }
            start(entry.unit, for: queue, now: now)
        }
    }

    var pendingCount: Int { pending.count }

    private func start(_ unit: String, for queue: QueueKey, now: Int64) {
        pending[queue]?.lastAttempt = now
        lastStart[unit] = now
        let logger = self.logger
        let fields = [("STOREKIT_APP", queue.app), ("STOREKIT_UID", String(queue.uid)), ("STOREKIT_OBSERVER_UNIT", unit)]
        calls.async {
            switch SystemdManager.startUnit(unit) {
            case .success(let job):
                logger.info("Started observer unit \(unit) for \(queue.app) (uid \(queue.uid)): job \(job)",
                            id: .observerActivation, fields: fields)
            case .failure(let error):
                logger.warning("Failed to start observer unit \(unit) for \(queue.app) (uid \(queue.uid)), will retry: \(error.message)",
                               id: .observerActivation, fields: fields)
            }
        }
    }
}

/// The one call storekitd makes on systemd's manager object.
enum SystemdManager {
    struct CallError: Error {
        let message: String
    }

    /// `org.freedesktop.systemd1.Manager.StartUnit(unit, "replace")` on the system bus
    /// (`DBUS_SYSTEM_BUS_ADDRESS` is honoured); returns the job path.
    static func startUnit(_ unit: String) -> Result<String, CallError> {
        var bus: OpaquePointer?
        var status = sd_bus_open_system(&bus)
        guard status >= 0, let bus else { return .failure(CallError(message: "cannot connect to the system bus: \(errnoText(status))")) }
        defer { sd_bus_flush_close_unref(bus) }
        var message: OpaquePointer?
        status = sd_bus_message_new_method_call(bus, &message, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                                "org.freedesktop.systemd1.Manager", "StartUnit")
        guard status >= 0, let message else { return .failure(CallError(message: "cannot build the call: \(errnoText(status))")) }
        defer { sd_bus_message_unref(message) }
        for argument in [unit, "replace"] {
            status = argument.withCString { sd_bus_message_append_basic(message, CChar(UInt8(ascii: "s")), $0) }
            guard status >= 0 else { return .failure(CallError(message: "cannot build the call: \(errnoText(status))")) }
        }
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        status = sd_bus_call(bus, message, 10_000_000, &error, &reply)
        guard status >= 0, let reply else {
            let name = error.name.map { String(cString: $0) } ?? "error"
            let text = error.message.map { String(cString: $0) } ?? errnoText(status)
            return .failure(CallError(message: "\(name): \(text)"))
        }
        defer { sd_bus_message_unref(reply) }
        var path: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "o")), &path) >= 0, let path else {
            return .success("(unknown job)")
        }
        return .success(String(cString: path))
    }

    static func errnoText(_ status: Int32) -> String {
        String(cString: strerror(-status))
    }
}

#if canImport(Glibc)
import Glibc
#endif
