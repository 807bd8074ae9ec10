import CPosix
import Foundation

extension Thread {
    /// Runs `body` on a new thread named `name` (at most 15 bytes), as `ps -T`, `top -H` and
    /// `perf` show it. (Foundation's `Thread.name` does not reach the kernel on Linux.)
    public static func startNamed(_ name: String, _ body: @escaping @Sendable () -> Void) {
        precondition(name.utf8.count <= 15, "a thread name has at most 15 bytes")
        Thread.detachNewThread {
            storekit_name_thread(name)
            body()
        }
    }
}
