import StoreKitLedger
import StoreKitPosix
import CSystemd
import Dispatch
import StoreKitEngine

/// Keeps apps' persistent observers alive: when an update arrives for a (uid, app) with no
/// connected observer and the app has `ObserverUnit=` (a template, `name@.service`), the buyer's
/// instance (`name@UID.service`) is started through systemd's D-Bus API (`StartUnit`, via sd-bus).
///
/// An instance is started only when systemd says it is not running: while it is active or
/// activating storekitd waits for it to connect (and says once if it runs without connecting).
/// An instance that failed, stopped without connecting, or could not be started is tried again
/// after a back-off that doubles from `ActivationIntervalSec=` up to 16 times it; each failure is
/// a journal entry with the unit's `Result=`. An observer of the queue connecting ends it all.
///
/// The loop thread calls `request`, `observerConnected` and `retryDue`; everything else, the
/// blocking D-Bus calls included, runs on the private serial queue `calls`, which alone owns the
/// state below, so a slow bus never stalls the serving loop.
final class ObserverActivator: @unchecked Sendable {
    /// One instance unit's history since an update first found no observer for its queue.
    private struct Attempts {
        var queue: QueueKey
        /// When the last StartUnit was sent; nil when none is outstanding.
        var startedAt: Int64?
        var failures = 0
        var nextCheck: Int64 = .min
        var saidRunningWithoutObserver = false
    }

    private let logger: Logger
    private let calls = DispatchQueue(label: "storekitd.observer-activation")
    private var units: [String: Attempts] = [:]   // owned by `calls`
    private let manager: @Sendable (_ unit: String) -> SystemdManager.UnitState
    private let start: @Sendable (_ unit: String) -> Result<String, SystemdManager.CallError>

    init(logger: Logger,
         manager: @escaping @Sendable (String) -> SystemdManager.UnitState = SystemdManager.unitState,
         start: @escaping @Sendable (String) -> Result<String, SystemdManager.CallError> = SystemdManager.startUnit) {
        self.logger = logger
        self.manager = manager
        self.start = start
    }

    /// The instance of template `configured` for `uid`: `name@.service` → `name@UID.service`.
    static func unitName(_ configured: String, uid: UInt32) -> String {
        String(configured.dropLast("@.service".count)) + "@\(uid).service"
    }

    /// The uid `unit` is the instance of template `configured` for, nil when it is no such
    /// instance (the check the polkit rule makes through `storekitd --verify-observer-unit`, with
    /// the uid then checked against `PersonUIDs`).
    static func instanceUID(_ unit: String, of configured: String?) -> UInt32? {
        guard let configured, configured.hasSuffix("@.service") else { return nil }
        let prefix = configured.dropLast(".service".count)   // "name@"
        guard unit.hasPrefix(prefix), unit.hasSuffix(".service") else { return nil }
        let instance = unit.dropFirst(prefix.count).dropLast(".service".count)
        guard !instance.isEmpty, instance.count <= 10, instance.allSatisfy({ $0.isASCII && $0.isNumber }),
              let uid = UInt32(instance), String(uid) == instance else { return nil }
        return uid
    }

    /// An update for `queue` found no observer; start its instance of `configured` unless it runs
    /// or is backing off.
    func request(_ queue: QueueKey, unit configured: String, now: Int64, interval: Int64) {
        let unit = Self.unitName(configured, uid: queue.uid)
        calls.async { [self] in
            if units[unit] == nil { units[unit] = Attempts(queue: queue) }
            check(unit, interval: interval)
        }
    }

    func observerConnected(_ queue: QueueKey) {
        calls.async { [self] in
            units = units.filter { $0.value.queue != queue }
        }
    }

    /// Looks again at every unit whose queue still has no observer (called about once a second).
    func retryDue(now: Int64, interval: Int64) {
        calls.async { [self] in
            for unit in Array(units.keys) { check(unit, interval: interval) }
        }
    }

    // MARK: On `calls`

    private func check(_ unit: String, interval: Int64) {
        guard var attempts = units[unit] else { return }
        let now = Monotonic.milliseconds()
        guard now >= attempts.nextCheck else { return }
        defer { units[unit] = attempts }
        let fields = [("STOREKIT_APP", attempts.queue.app), ("STOREKIT_UID", String(attempts.queue.uid)),
                      ("STOREKIT_OBSERVER_UNIT", unit)]
        let who = "\(attempts.queue.app) (uid \(attempts.queue.uid))"
        let state = manager(unit)
        if state.isRunning {
            attempts.nextCheck = now + max(interval, 1000)
            if let startedAt = attempts.startedAt, now - startedAt >= max(interval, 1000), !attempts.saidRunningWithoutObserver {
                attempts.saidRunningWithoutObserver = true
                logger.warning("Observer unit \(unit) is \(state.activeState) but no observer of \(who) has connected; "
                               + "not starting it again while it runs", id: .observerActivation, fields: fields)
            }
            return
        }
        if attempts.startedAt != nil {
            // Started earlier, no longer running, and its observer never connected.
            attempts.startedAt = nil
            attempts.failures += 1
            let delay = Self.backOff(failures: attempts.failures, interval: interval)
            attempts.nextCheck = now + delay
            logger.warning("Observer unit \(unit) for \(who) is \(state.activeState) (result: \(state.result ?? "unknown")) "
                           + "and its observer did not connect; starting it again in \(delay / 1000) s",
                           id: .observerActivation, fields: fields + [("STOREKIT_UNIT_RESULT", state.result ?? "unknown")])
            return
        }
        switch start(unit) {
        case .success(let job):
            attempts.startedAt = now
            attempts.saidRunningWithoutObserver = false
            attempts.nextCheck = now + max(interval, 1000)
            logger.info("Started observer unit \(unit) for \(who): job \(job)", id: .observerActivation, fields: fields)
        case .failure(let error):
            attempts.failures += 1
            let delay = Self.backOff(failures: attempts.failures, interval: interval)
            attempts.nextCheck = now + delay
            logger.warning("Failed to start observer unit \(unit) for \(who), trying again in \(delay / 1000) s: \(error.message)",
                           id: .observerActivation, fields: fields)
        }
    }

    /// `interval` (at least 1 s) doubled for each failure after the first, at most 16 times over.
    static func backOff(failures: Int, interval: Int64) -> Int64 {
        max(interval, 1000) << min(max(failures - 1, 0), 4)
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

    /// What systemd says of a unit: `ActiveState` and, for a service, `Result`.
    struct UnitState: Sendable {
        var activeState: String
        var result: String?

        var isRunning: Bool { ["active", "activating", "reloading", "deactivating"].contains(activeState) }
    }

    /// `GetUnit` then the unit's `ActiveState` and the service's `Result`; a unit systemd has not
    /// loaded (`NoSuchUnit`) or a bus that cannot be asked reads as inactive, so a start is tried
    /// and its error is what gets reported.
    static func unitState(_ unit: String) -> UnitState {
        var bus: OpaquePointer?
        guard sd_bus_open_system(&bus) >= 0, let bus else { return UnitState(activeState: "inactive") }
        defer { sd_bus_flush_close_unref(bus) }
        var message: OpaquePointer?
        guard sd_bus_message_new_method_call(bus, &message, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                             "org.freedesktop.systemd1.Manager", "GetUnit") >= 0, let message else {
            return UnitState(activeState: "inactive")
        }
        defer { sd_bus_message_unref(message) }
        guard unit.withCString({ sd_bus_message_append_basic(message, CChar(UInt8(ascii: "s")), $0) }) >= 0 else {
            return UnitState(activeState: "inactive")
        }
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        guard sd_bus_call(bus, message, 10_000_000, &error, &reply) >= 0, let reply else { return UnitState(activeState: "inactive") }
        defer { sd_bus_message_unref(reply) }
        var pathPointer: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "o")), &pathPointer) >= 0, let pathPointer else {
            return UnitState(activeState: "inactive")
        }
        let path = String(cString: pathPointer)
        func property(_ interface: String, _ name: String) -> String? {
            var propertyError = sd_bus_error()
            defer { sd_bus_error_free(&propertyError) }
            var value: UnsafeMutablePointer<CChar>?
            guard sd_bus_get_property_string(bus, "org.freedesktop.systemd1", path, interface, name, &propertyError, &value) >= 0,
                  let value else { return nil }
            defer { free(value) }
            return String(cString: value)
        }
        return UnitState(activeState: property("org.freedesktop.systemd1.Unit", "ActiveState") ?? "inactive",
                         result: property("org.freedesktop.systemd1.Service", "Result"))
    }

    static func errnoText(_ status: Int32) -> String {
        String(cString: strerror(-status))
    }
}

#if canImport(Glibc)
import Glibc
#endif
