import Foundation
@_spi(StoreKitTest) import OpenStoreKit
#if canImport(Glibc)
import Glibc
#endif

// Hosted content: how fast a buyer's app gets a product's content (OpenStoreKit's SKDownload:
// a descriptor per file from storekitd, read, hashed with SHA-256, written and synced), against
// `cp -r` of the same folder followed by `sync` of the copied files (the same bytes made as
// durable), and plain `cp -r`. Page cache warm for every side: the source is read once first.
extension Bench {
    func runDownloads() throws -> [Figure] {
        let files = quick ? 2 : 4
        let fileSize = 128 << 20
        let base = directory + "/downloads"
        let content = base + "/config/content/pack"
        mkdir(base, 0o755)
        let daemon = try BenchDaemon(directory: base, binary: self.daemon.binary, appCount: 1)
        try FileManager.default.createDirectory(atPath: content, withIntermediateDirectories: true)
        var generator = SystemRandomNumberGenerator()
        for index in 0..<files {
            var bytes = [UInt8](repeating: 0, count: fileSize)
            for offset in stride(from: 0, to: fileSize, by: 8) {
                withUnsafeBytes(of: generator.next()) { word in
                    for byte in 0..<8 { bytes[offset + byte] = word[byte] }
                }
            }
            try Data(bytes).write(to: URL(fileURLWithPath: content + "/part\(index).bin"))
        }
        try "[App]\nID=bench.content\nCatalog=catalog.storekit\n\n[HostedContent]\nProduct=bench.pack\nPath=content/pack\n"
            .write(toFile: base + "/config/apps.d/content.conf", atomically: true, encoding: .utf8)
        let megabytes = Double(files * fileSize) / 1_048_576
        log("hosted content: \(files) files, \(Int(megabytes)) MiB…")
        _ = try run("/bin/sh", ["-c", "cat \"$0\"/* > /dev/null", content])
        try daemon.start()
        defer { daemon.stop() }

        let rounds = quick ? 2 : 3
        let ours = try downloadSeconds(daemon: daemon, dataHome: base + "/app", rounds: rounds)
        var copies: [Double] = []
        var synced: [Double] = []
        for _ in 0..<rounds {
            let target = base + "/copy"
            try? FileManager.default.removeItem(atPath: target)
            settleDisk()
            var started = monotonicNanoseconds()
            _ = try run("/bin/cp", ["-r", content, target])
            copies.append(Double(monotonicNanoseconds() - started) / 1e9)
            try? FileManager.default.removeItem(atPath: target)
            settleDisk()
            started = monotonicNanoseconds()
            _ = try run("/bin/sh", ["-c", "cp -r \"$0\" \"$1\" && sync \"$1\"/*", content, target])
            synced.append(Double(monotonicNanoseconds() - started) / 1e9)
        }
        try? FileManager.default.removeItem(atPath: base + "/copy")
        let best = { (values: [Double]) in megabytes / (values.min() ?? 1) }
        return [
            Figure(name: "hosted content download (SKDownload, SHA-256, synced), \(Int(megabytes)) MiB; peer: cp -r + sync",
                   unit: "MB/s", value: best(ours), peer: best(synced), targetRatio: 0.5, targetAbsolute: nil, better: .higher),
            Figure(name: "  the same download; peer: cp -r (nothing synced, nothing checked)", unit: "MB/s", value: best(ours),
                   peer: best(copies), targetRatio: nil, targetAbsolute: nil, better: .higher),
        ]
    }

    /// Seconds from `SKPaymentQueue.start` to `.finished`, once per round: the purchase's
    /// download, then each restore's.
    private func downloadSeconds(daemon: BenchDaemon, dataHome: String, rounds: Int) throws -> [Double] {
        SKPaymentQueue.applicationIdentifier = "bench.content"
        TestStoreBinding.bind(socketPath: daemon.clientSocket, dataHome: dataHome)
        defer { TestStoreBinding.unbind() }
        SKPaymentQueue.callbackQueue = DispatchQueue(label: "bench.downloads")
        let observer = DownloadTimer()
        SKPaymentQueue.default().add(observer)
        defer { SKPaymentQueue.default().remove(observer) }
        var seconds: [Double] = []
        for round in 0..<rounds {
            SKDownload.deleteContentForProductID("bench.pack")
            settleDisk()
            observer.reset()
            if round == 0 {
                let payment = SKMutablePayment()
                payment.productIdentifier = "bench.pack"
                SKPaymentQueue.default().add(payment)
            } else {
                SKPaymentQueue.default().restoreCompletedTransactions()
            }
            guard let elapsed = observer.waitForDownload(timeout: 300) else {
                throw BenchError("hosted content download did not finish: \(observer.failure ?? "timed out")")
            }
            seconds.append(elapsed)
        }
        SKDownload.deleteContentForProductID("bench.pack")
        return seconds
    }

    private func run(_ path: String, _ arguments: [String]) throws -> Int32 {
        let pid = try spawn(path, [path] + arguments)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        guard status == 0 else { throw BenchError("\(path) \(arguments.joined(separator: " ")) failed: status \(status)") }
        return status
    }
}

/// Starts each purchased or restored transaction's download, times it, finishes the transaction.
private final class DownloadTimer: NSObject, SKPaymentTransactionObserver, @unchecked Sendable {
    private let lock = NSCondition()
    private var started: UInt64?
    private var elapsed: Double?
    private(set) var failure: String?

    func reset() {
        lock.withLock {
            started = nil
            elapsed = nil
            failure = nil
        }
    }

    func paymentQueue(_ queue: SKPaymentQueue, updatedTransactions transactions: [SKPaymentTransaction]) {
        for transaction in transactions where transaction.transactionState == .purchased || transaction.transactionState == .restored {
            lock.withLock { started = monotonicNanoseconds() }
            queue.start(transaction.downloads)
        }
    }

    func paymentQueue(_ queue: SKPaymentQueue, updatedDownloads downloads: [SKDownload]) {
        for download in downloads {
            switch download.state {
            case .finished:
                lock.withLock {
                    elapsed = Double(monotonicNanoseconds() - (started ?? 0)) / 1e9
                    lock.broadcast()
                }
                queue.finishTransaction(download.transaction)
            case .failed, .cancelled:
                lock.withLock {
                    failure = download.error?.localizedDescription ?? "\(download.state)"
                    lock.broadcast()
                }
            default:
                break
            }
        }
    }

    func waitForDownload(timeout: Double) -> Double? {
        let deadline = Date().addingTimeInterval(timeout)
        return lock.withLock {
            while elapsed == nil && failure == nil {
                if !lock.wait(until: deadline) { return nil }
            }
            return elapsed
        }
    }
}
