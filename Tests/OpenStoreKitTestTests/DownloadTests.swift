// SKDownload in this process against a real storekitd whose level pack comes with 32 MiB of
// hosted content: what an app's own code sees of start, cancel, and finishing a transaction
// whose content is still downloading, and SKProduct's hosted-content properties.
import Foundation
@_spi(StoreKitTest) import OpenStoreKit
@testable import OpenStoreKitTest
import StoreKitTestSupport
import Testing

extension OpenStoreKitTestSuites {
@Suite("SKDownload, in the app's process")
struct DownloadTests {
    static let pack = "com.example.game.level_pack"
    static let length = 32 << 20

    /// A daemon whose level pack has one file of `length` bytes, with this process bound to it.
    final class Store {
        let daemon: DaemonProcess

        init() throws {
            daemon = try DaemonProcess()
            let config = (daemon.configFile as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: config + "/content/big", withIntermediateDirectories: true)
            try Data(repeating: 0x5A, count: DownloadTests.length).write(to: URL(fileURLWithPath: config + "/content/big/data.bin"))
            try "[App]\nID=\(TestStoreBinding.appIdentifier)\nCatalog=catalog/example.storekit\n\n[HostedContent]\nProduct=\(pack)\nPath=content/big\nVersion=3\n"
                .write(toFile: config + "/apps.d/com.example.game.conf", atomically: true, encoding: .utf8)
            try daemon.start()
            TestStoreBinding.bind(socketPath: daemon.clientSocket, dataHome: daemon.dataHome)
        }

        deinit {
            TestStoreBinding.unbind()
            daemon.remove()
        }
    }

    /// Buys the pack through the queue and hands the purchased transaction to `act` (on the
    /// callback queue); records every download update.
    final class Observer: NSObject, SKPaymentTransactionObserver, @unchecked Sendable {
        private let lock = NSLock()
        private var purchased: SKPaymentTransaction?
        private(set) var updates: [(state: SKDownloadState, progress: Float)] = []
        let onProgress: (SKPaymentQueue, SKDownload) -> Void

        init(onProgress: @escaping (SKPaymentQueue, SKDownload) -> Void) {
            self.onProgress = onProgress
        }

        func paymentQueue(_ queue: SKPaymentQueue, updatedTransactions transactions: [SKPaymentTransaction]) {
            for transaction in transactions where transaction.transactionState == .purchased {
                lock.withLock { purchased = transaction }
            }
        }

        func paymentQueue(_ queue: SKPaymentQueue, updatedDownloads downloads: [SKDownload]) {
            for download in downloads {
                lock.withLock { updates.append((download.state, download.progress)) }
                if download.state == .active, download.progress > 0 { onProgress(queue, download) }
            }
        }

        var transaction: SKPaymentTransaction? { lock.withLock { purchased } }
        var states: [SKDownloadState] { lock.withLock { updates.map(\.state) } }

        func wait(timeout: Double = 30, until condition: () -> Bool) async throws {
            let deadline = Date().addingTimeInterval(timeout)
            while !condition() {
                guard Date() < deadline else { throw CancellationError() }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    /// Buys the pack; returns its purchased transaction and the transaction's download.
    static func buyPack(observing observer: Observer) async throws -> (SKPaymentTransaction, SKDownload) {
        let payment = SKMutablePayment()
        payment.productIdentifier = pack
        SKPaymentQueue.default().add(payment)
        try await observer.wait { observer.transaction != nil }
        let transaction = try #require(observer.transaction)
        return (transaction, try #require(transaction.downloads.first))
    }

    @Test("a purchase's transaction has one waiting download with the product's content; SKProduct says it is downloadable")
    func downloadsOfAPurchase() async throws {
        let store = try Store()
        SKPaymentQueue.callbackQueue = DispatchQueue(label: "tests.downloads")
        let products = try await SKPaymentQueue.default().products(for: [Self.pack, "com.example.game.coins100"]).products
        let pack = try #require(products.first { $0.productIdentifier == Self.pack })
        #expect(pack.isDownloadable && pack.downloadContentVersion == "3" && pack.contentVersion == "3")
        #expect(pack.downloadContentLengths == [NSNumber(value: Self.length)])
        #expect(products.first { $0.productIdentifier != Self.pack }?.isDownloadable == false)

        let observer = Observer { _, _ in }
        SKPaymentQueue.default().add(observer)
        defer { SKPaymentQueue.default().remove(observer) }
        SKPaymentQueue.default().add(SKPayment(product: pack))
        try await observer.wait { observer.transaction != nil }
        let transaction = try #require(observer.transaction)
        let download = try #require(transaction.downloads.first)
        #expect(transaction.downloads.count == 1)
        #expect(download.state == .waiting && download.contentIdentifier == Self.pack && download.contentVersion == "3")
        #expect(download.expectedContentLength == Int64(Self.length) && download.contentURL == nil && download.transaction === transaction)

        SKPaymentQueue.default().start(transaction.downloads)
        try await observer.wait { download.state == .finished }
        let url = try #require(download.contentURL)
        #expect(SKDownload.contentURL(forProductID: Self.pack) == url)
        #expect((try FileManager.default.attributesOfItem(atPath: url.path + "/Contents/data.bin")[.size] as? Int) == Self.length)
        SKPaymentQueue.default().finishTransaction(transaction)
        SKDownload.deleteContentForProductID(Self.pack)
        #expect(SKDownload.contentURL(forProductID: Self.pack) == nil)
        _ = store
    }

    @Test("cancel stops an active download, deletes what it copied, and never finishes it")
    func cancelActiveDownload() async throws {
        let store = try Store()
        SKPaymentQueue.callbackQueue = DispatchQueue(label: "tests.downloads")
        let observer = Observer { queue, download in queue.cancel([download]) }
        SKPaymentQueue.default().add(observer)
        defer { SKPaymentQueue.default().remove(observer) }
        let (_, download) = try await Self.buyPack(observing: observer)
        SKPaymentQueue.default().start([download])
        try await observer.wait { download.state == .cancelled }
        try await Task.sleep(for: .milliseconds(200))
        #expect(download.state == .cancelled && download.contentURL == nil && download.progress == 0)
        #expect(!observer.states.contains(.finished), "\(observer.states)")
        let downloads = store.daemon.dataHome + "/storekit/\(TestStoreBinding.appIdentifier)/downloads"
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: downloads)) ?? []).filter { $0 != ".locks" }.isEmpty,
                "nothing copied is left")
        // Cancelled is final: start does nothing more.
        SKPaymentQueue.default().start([download])
        #expect(download.state == .cancelled)
    }

    @Test("finishing a transaction cancels its active download, which is no longer queueable; the finish goes through")
    func finishingCancelsDownloads() async throws {
        let store = try Store()
        SKPaymentQueue.callbackQueue = DispatchQueue(label: "tests.downloads")
        let observer = Observer { queue, download in queue.finishTransaction(download.transaction) }
        SKPaymentQueue.default().add(observer)
        defer { SKPaymentQueue.default().remove(observer) }
        let (_, download) = try await Self.buyPack(observing: observer)
        SKPaymentQueue.default().start([download])
        try await observer.wait { download.state == .cancelled }
        #expect(!observer.states.contains(.finished))
        #expect(download.contentURL == nil)
        // No longer queueable: start leaves it cancelled.
        SKPaymentQueue.default().start([download])
        #expect(download.state == .cancelled)
        try await observer.wait {
            let listed = (try? store.daemon.ctlJSON(["transactions"])) as? [[String: Any]] ?? []
            return !listed.isEmpty && listed.allSatisfy { $0["finished"] as? Bool == true }
        }
    }
}
}
