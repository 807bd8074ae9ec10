// A swift-testing suite written as for Apple's StoreKitTest (imports changed only), serialized as
// Apple asks of tests that share the test environment; then what is OpenStoreKitTest's own:
// sessions leave no process and no file, sessions side by side are isolated, bad input is refused.
import Foundation
import OpenStoreKit
@testable import OpenStoreKitTest
import Testing

/// Everything here runs one test at a time: OpenStoreKit in this process talks to one session's
/// daemon (the latest created), as Apple's test environment is one per process.
@Suite("OpenStoreKitTest", .serialized)
struct OpenStoreKitTestSuites {}

extension OpenStoreKitTestSuites {
@Suite("SKTestSession, as Apple's StoreKitTest is used")
struct StoreTestsSwiftTesting {
    @Test("StoreKit 1: the observer receives a purchase made through SKPaymentQueue, finishes it, and the session lists it")
    func storeKit1Purchase() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        session.disableDialogs = true
        session.clearTransactions()
        let observer = Observer()
        SKPaymentQueue.callbackQueue = DispatchQueue(label: "tests.observer")
        SKPaymentQueue.default().add(observer)
        defer { SKPaymentQueue.default().remove(observer) }

        let payment = SKMutablePayment()
        payment.productIdentifier = "com.example.game.coins100"
        SKPaymentQueue.default().add(payment)
        let finished = try await observer.firstFinished(timeout: 10)
        #expect(finished.payment.productIdentifier == "com.example.game.coins100")
        #expect(session.allTransactions().map(\.productIdentifier) == ["com.example.game.coins100"])
        #expect(session.allTransactions().first?.isFinished == true)
    }

    @Test("StoreKit 2: an interrupted purchase fails until the session resolves it")
    func interruptedPurchase() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store.storekit")
        session.interruptedPurchasesEnabled = true
        let pack = try #require(try await Product.products(for: ["com.example.game.level_pack"]).first)
        await #expect(throws: (any Error).self) { _ = try await pack.purchase() }
        let interrupted = try #require(session.allTransactions().last)
        #expect(interrupted.state == .failed && interrupted.hasPurchaseIssue)
        try session.resolveIssueForTransaction(identifier: interrupted.identifier)
        #expect(session.allTransactions().contains { $0.productIdentifier == "com.example.game.level_pack" && $0.state == .purchased })
    }
}

@Suite("OpenStoreKitTest's own promises")
struct SessionLifetimeTests {
    @Test("a session that ends leaves no process and no file; another starts at once")
    func nothingLeftBehind() throws {
        var session: SKTestSession? = try SKTestSession(configurationFileNamed: "Store")
        let directory = try #require(session?.daemon.directory)
        let guardPID = try #require(session?.daemon.guardPID)
        #expect(FileManager.default.fileExists(atPath: directory + "/run/control.sock"))
        let daemonPID = try #require(Self.children(of: guardPID).first)
        session = nil
        #expect(!FileManager.default.fileExists(atPath: directory))
        #expect(kill(guardPID, 0) != 0 && kill(daemonPID, 0) != 0, "guard \(guardPID) or daemon \(daemonPID) still runs")
        _ = try SKTestSession(configurationFileNamed: "Store")
    }

    @Test("when the lifeline ends as it does when the test process dies, the guard stops the daemon by itself")
    func deathOfTheTestProcess() throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        let guardPID = try #require(session.daemon.guardPID)
        let daemonPID = try #require(Self.children(of: guardPID).first)
        session.daemon.cutLifeline()   // what the kernel does to this process's descriptors when it dies
        var gone = false
        for _ in 0..<500 where !gone {
            gone = kill(daemonPID, 0) != 0 && session.daemon.guardPID == nil
            if !gone { usleep(10_000) }
        }
        #expect(gone, "daemon \(daemonPID) or guard \(guardPID) still runs 5 s after the lifeline ended")
    }

    @Test("sessions side by side each have their own daemon and transactions; ending one leaves the other, and ends its daemon at once")
    func sideBySide() async throws {
        let first = try SKTestSession(configurationFileNamed: "Store")
        var second: SKTestSession? = try SKTestSession(configurationFileNamed: "Store")
        try first.daemon.buy("com.example.game.coins100")
        try second?.daemon.buy("com.example.game.level_pack")
        try second?.daemon.buy("com.example.game.coins100")
        #expect(first.allTransactions().map(\.productIdentifier) == ["com.example.game.coins100"])
        #expect(second?.allTransactions().count == 2)
        let firstGuard = try #require(first.daemon.guardPID)
        let started = Date()
        second = nil
        // The second's lifeline was not inherited by the first's processes: it ended at once.
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(kill(firstGuard, 0) == 0)
        #expect(first.allTransactions().count == 1)
    }

    @Test("a missing or malformed configuration is refused with the reason")
    func badConfigurations() throws {
        #expect(throws: SKTestSessionError.self) { _ = try SKTestSession(configurationFileNamed: "NoSuchConfiguration") }
        #expect(throws: SKTestSessionError.self) { _ = try SKTestSession(contentsOf: URL(fileURLWithPath: "/nonexistent/x.storekit")) }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("OpenStoreKitTestTests-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let broken = directory.appendingPathComponent("Broken.storekit")
        try Data(#"{ "products" : [ { "productID" : 7 } ] }"#.utf8).write(to: broken)
        #expect {
            _ = try SKTestSession(contentsOf: broken)
        } throws: { error in
            "\(error)".contains("Broken.storekit")
        }
        let notStoreKit = directory.appendingPathComponent("Store.json")
        try Data("{}".utf8).write(to: notStoreKit)
        #expect(throws: SKTestSessionError.self) { _ = try SKTestSession(contentsOf: notStoreKit) }
    }

    @Test("deleteTransaction deletes that one transaction: an unfinished one leaves the queue, the rest stay; an unknown one is refused")
    func deleteOne() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        let coins = try session.daemon.buy("com.example.game.coins100")
        let pack = try session.daemon.buy("com.example.game.level_pack")
        let coinsID = try #require(coins["transactionIdentifier"]?.string.flatMap { Int($0) })
        let packID = try #require(pack["transactionIdentifier"]?.string.flatMap { Int($0) })
        try session.deleteTransaction(identifier: coinsID)
        #expect(session.allTransactions().map(\.identifier) == [packID])
        let unfinished = try session.daemon.control(.transactions, ["unfinished=1"])
        #expect(!"\(unfinished)".contains(String(coinsID)))
        #expect(throws: SKTestSessionError.self) { try session.deleteTransaction(identifier: coinsID) }
        #expect(session.allTransactions().count == 1)
    }

    @Test("deleting a subscription's original transaction deletes its renewals too, as Apple's deleteTransaction does")
    func deleteWithChildren() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        let bought = try await session.buyProduct(identifier: "com.example.game.premium.monthly")
        try session.forceRenewalOfSubscription(productIdentifier: "com.example.game.premium.monthly")
        let pack = try await session.buyProduct(identifier: "com.example.game.level_pack")
        let before = session.allTransactions()
        #expect(before.count == 3)
        #expect(before.filter { $0.originalTransactionIdentifier == Int(bought.id) }.count == 2, "the purchase and its renewal")
        try session.deleteTransaction(identifier: Int(bought.id))
        #expect(session.allTransactions().map(\.identifier) == [Int(pack.id)], "the renewal went with its original; the pack stays")
    }

    @Test("a refused command throws with the daemon's reason")
    func refusals() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        await #expect {
            try await session.buyProduct(identifier: "com.example.game.nothing")
        } throws: { error in
            "\(error)".contains("com.example.game.nothing")
        }
        #expect(throws: SKTestSessionError.self) { try session.refundTransaction(identifier: 1) }
        #expect(session.allTransactions().isEmpty)
    }

    static func children(of pid: Int32) -> [Int32] {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
        return text.split(separator: " ").compactMap { Int32($0) }
    }
}
}

/// A transaction observer that finishes what it is given and remembers the first finished purchase.
private final class Observer: NSObject, SKPaymentTransactionObserver, @unchecked Sendable {
    private let lock = NSLock()
    private var finished: SKPaymentTransaction?

    func paymentQueue(_ queue: SKPaymentQueue, updatedTransactions transactions: [SKPaymentTransaction]) {
        for transaction in transactions where transaction.transactionState == .purchased {
            queue.finishTransaction(transaction)
            lock.withLock { if finished == nil { finished = transaction } }
        }
    }

    func firstFinished(timeout: Double) async throws -> SKPaymentTransaction {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let transaction = lock.withLock({ finished }) {
                try await Task.sleep(for: .milliseconds(100))   // the finish reaches the daemon
                return transaction
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw CancellationError()
    }
}
