import OpenStoreKit

/// The app's record of content it has unlocked, one line per transaction, fsynced before the
/// transaction is finished, so redelivery after a crash never grants the same purchase twice.
final class Ledger {
    let path: String
    private var granted: Set<String> = []

    static func defaultPath(app: String) -> String {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["XDG_STATE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? NSHomeDirectory() + "/.local/state"
        return base + "/storekit-example-app/\(app).ledger"
    }

    init(path: String) {
        self.path = path
        if let text = try? String(contentsOfFile: path, encoding: .utf8) {
            for line in text.split(separator: "\n") {
                if let id = line.split(separator: " ").first { granted.insert(String(id)) }
            }
        }
    }

    /// Grants the transaction's content unless it was granted before; true when granted now.
    func grant(_ transaction: SKPaymentTransaction) -> Bool {
        guard let id = transaction.transactionIdentifier, !granted.contains(id) else { return false }
        let line = "\(id) \(transaction.payment.productIdentifier) \(transaction.payment.quantity)\n"
        let directory = (path as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            Output.error("cannot open ledger \(path): \(String(cString: strerror(errno)))")
            exit(1)
        }
        defer { close(fd) }
        let bytes = Array(line.utf8)
        guard write(fd, bytes, bytes.count) == bytes.count, fsync(fd) == 0 else {
            Output.error("cannot write ledger \(path): \(String(cString: strerror(errno)))")
            exit(1)
        }
        granted.insert(id)
        return true
    }
}
