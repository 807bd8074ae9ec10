import Foundation

/// Polls `condition` every 20 ms until it holds or `timeout` seconds have passed; returns whether
/// it held (its last answer). The one way tests wait for what another thread or process does:
/// a condition with a deadline, never a fixed sleep. A test that asserts something did *not*
/// happen first waits here for a later event that proves the earlier input was handled.
@discardableResult
public func eventually(timeout: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ProcessInfo.processInfo.systemUptime + timeout
    while true {
        if try condition() { return true }
        if ProcessInfo.processInfo.systemUptime >= deadline { return false }
        usleep(20_000)
    }
}
