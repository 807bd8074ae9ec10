import OpenStoreKit

/// The app's record of content it has unlocked, one line per transaction, fsynced before the
/// transaction is finished, so redelivery after a crash never grants the same purchase twice.
///
/// Several instances of the app may run for one user at once (its observer, and a `buy` started
/// beside it), and each receives every update: the file is the one truth they share. Each look-up
/// reads it under a shared `flock`, and a grant checks and appends under an exclusive one, so two
/// instances racing for one transaction grant it once.
final class Ledger {
    let path: String

    static func defaultPath(app: String) -> String {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["XDG_STATE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? NSHomeDirectory() + "/.local/state"
        return base + "/storekit-example-app/\(app).ledger"
    }

    init(path: String) {
        self.path = path
    }

    /// Whether the content of transaction `id` was unlocked, by this instance or another. (A
    /// ledger not made yet holds nothing.)
    func contains(_ id: String) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return false }
            fail("cannot open ledger \(path)")
        }
        defer { close(fd) }
        lock(fd, LOCK_SH)
        return grantedIDs(fd).ids.contains(id)
    }

    /// Grants the transaction's content unless it was granted before; true when granted now.
    func grant(_ transaction: SKPaymentTransaction) -> Bool {
        guard let id = transaction.transactionIdentifier, !id.isEmpty else { return false }
        let directory = (path as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { fail("cannot open ledger \(path)") }
        defer { close(fd) }
        lock(fd, LOCK_EX)
        let ledger = grantedIDs(fd)
        guard !ledger.ids.contains(id) else { return false }
        // A line cut short (a full disk, a crash mid-write) is ended first, so that the new
        // line is never read as part of it.
        let line = (ledger.endsInNewline ? "" : "\n") + "\(id) \(transaction.payment.productIdentifier) \(transaction.payment.quantity)\n"
        let bytes = Array(line.utf8)
        guard write(fd, bytes, bytes.count) == bytes.count, fsync(fd) == 0 else {
            fail("cannot write ledger \(path)")
        }
        return true
    }

    private func lock(_ fd: Int32, _ mode: Int32) {
        while flock(fd, mode) != 0 {
            guard errno == EINTR else { fail("cannot lock ledger \(path)") }
        }
    }

    /// The transaction ids in the ledger, read from the start of `fd`, and whether its last line
    /// is whole (an empty ledger's is).
    private func grantedIDs(_ fd: Int32) -> (ids: Set<String>, endsInNewline: Bool) {
        // Read from the start: appends (O_APPEND) do not move where reads begin.
        let text: [UInt8]
        do {
            text = Array(try FileHandle(fileDescriptor: fd, closeOnDealloc: false).readToEnd() ?? Data())
        } catch {
            fail("cannot read ledger \(path)")
        }
        var ids: Set<String> = []
        for line in text.split(separator: UInt8(ascii: "\n")) {
            if let id = line.split(separator: UInt8(ascii: " ")).first { ids.insert(String(decoding: id, as: UTF8.self)) }
        }
        return (ids, text.last.map { $0 == UInt8(ascii: "\n") } ?? true)
    }

    private func fail(_ message: String) -> Never {
        Output.error("\(message): \(String(cString: strerror(errno)))")
        exit(1)
    }
}
