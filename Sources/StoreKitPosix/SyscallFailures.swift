#if STOREKIT_TEST_HOOKS
import Synchronization

/// Failures a test injects into the system calls made on one descriptor (debug builds only,
/// `STOREKIT_TEST_HOOKS`): the next `times` calls of `syscall` on `fd` fail with `error` without
/// being made. Keyed by descriptor, so tests running in parallel in one process never take each
/// other's failures; cleared with `clear(fd)` (a closed number is reused).
public enum SyscallFailures {
    private static let armed = Atomic<Int>(0)
    private static let planned = Mutex<[Key: [Errno]]>([:])

    private struct Key: Hashable {
        let syscall: Syscall
        let fd: Int32
    }

    public static func inject(_ error: Errno, into syscall: Syscall, on fd: Int32, times: Int = 1) {
        planned.withLock { plan in
            plan[Key(syscall: syscall, fd: fd), default: []].append(contentsOf: repeatElement(error, count: times))
            armed.store(plan.count, ordering: .releasing)
        }
    }

    /// Drops what is still planned for `fd`; returns how many failures were not taken.
    @discardableResult
    public static func clear(_ fd: Int32) -> Int {
        planned.withLock { plan in
            var left = 0
            for key in plan.keys where key.fd == fd { left += plan.removeValue(forKey: key)?.count ?? 0 }
            armed.store(plan.count, ordering: .releasing)
            return left
        }
    }

    /// The failure planned for this call, taken; nil (at the cost of one atomic load) when none is.
    static func take(_ syscall: Syscall, on fd: Int32) -> Errno? {
        guard armed.load(ordering: .acquiring) > 0 else { return nil }
        return planned.withLock { plan in
            let key = Key(syscall: syscall, fd: fd)
            guard var errors = plan[key], !errors.isEmpty else { return nil }
            let error = errors.removeFirst()
            plan[key] = errors.isEmpty ? nil : errors
            armed.store(plan.count, ordering: .releasing)
            return error
        }
    }
}
#endif
