import Foundation
@_spi(StoreKitTest) import OpenStoreKit
import StoreKitWire
import Synchronization

/// Apple's `SKTestSession` (StoreKitTest) on Linux: the controls of the test store, with the same
/// names and meaning, over a private storekitd that the session starts.
///
/// Each session starts its own daemon on temporary directories with the session's catalogue,
/// registered for this process's app identifier, and points OpenStoreKit in this process at it
/// (StoreKit 1 and StoreKit 2 alike): no system daemon is needed, so `swift test` runs StoreKit
/// code on a Linux CI machine. The session ends when it is deinitialized (or at exit): its daemon
/// stops, its files are removed, and OpenStoreKit goes back to the default daemon.
///
/// As with Apple's, this process's store is one: OpenStoreKit talks to the most recently created
/// session's daemon, so tests that buy through the app's code in one process run serially
/// (`.serialized` in swift-testing; XCTest runs a class's tests in order). Sessions in different
/// processes share nothing, and a session's own controls (`buyProduct`, `allTransactions`, …)
/// always act on its own daemon.
open class SKTestSession: @unchecked Sendable {
    let daemon: PrivateDaemon
    private let defaults: Settings
    private let state = Mutex(Settings())

    /// The settings a session keeps itself (the daemon keeps the rest).
    struct Settings {
        var disableDialogs = false
        var failTransactionsEnabled = false
        var failureError: SKError.Code?
        var locale = Locale(identifier: "en_US")
    }

    /// The session bound to OpenStoreKit in this process: the latest one created.
    private static let bound = Mutex<ObjectIdentifier?>(nil)

    /// Starts a session on the `.storekit` file at `fileURL`.
    public init(contentsOf fileURL: URL) throws {
        guard fileURL.isFileURL, FileManager.default.fileExists(atPath: fileURL.path) else {
            throw SKTestSessionError.configurationNotFound(fileURL.path)
        }
        guard fileURL.pathExtension == "storekit" else {
            throw SKTestSessionError.invalidConfiguration("\(fileURL.path): a StoreKit configuration file has the extension .storekit")
        }
        daemon = try PrivateDaemon(catalog: fileURL.standardizedFileURL, app: TestStoreBinding.appIdentifier)
        defaults = Settings()
        // Binding and noting who is bound under one lock: an older session ending meanwhile on
        // another thread must not unbind this one (it unbinds only while it is the one noted).
        let identity = ObjectIdentifier(self)
        let socket = daemon.clientSocket
        let dataHome = daemon.dataHome
        Self.bound.withLock { bound in
            TestStoreBinding.bind(socketPath: socket, dataHome: dataHome)
            // A new session's store fails nothing, whatever the previous session simulated.
            SimulatedFailures.clear()
            bound = identity
        }
    }

    /// Starts a session on the configuration file `filename` (with or without `.storekit`),
    /// looked for as Apple looks in the app's bundle: in the main bundle and every loaded bundle
    /// (a test target's resources), then in the current directory and its `Tests/` and
    /// `Sources/` trees.
    public convenience init(configurationFileNamed filename: String) throws {
        try self.init(contentsOf: Self.locate(filename))
    }

    deinit {
        let identity = ObjectIdentifier(self)
        Self.bound.withLock { bound in
            guard bound == identity else { return }
            bound = nil
            SimulatedFailures.clear()
            TestStoreBinding.unbind()
        }
        daemon.stop()
    }

    // MARK: - Settings

    /// Purchases need a parent's approval (they are deferred until approved or declined).
    open var askToBuyEnabled: Bool {
        get { (try? daemon.control(.switches))?["askToBuy"] == .bool(true) }
        set { _ = try? daemon.control(.askToBuy, ["enabled=\(newValue ? "on" : "off")"]) }
    }

    /// Dialogs are not shown (there are none on Linux: kept for source compatibility).
    open var disableDialogs: Bool {
        get { state.withLock { $0.disableDialogs } }
        set { state.withLock { $0.disableDialogs = newValue } }
    }

    /// Purchases are interrupted: they fail until `resolveIssueForTransaction(identifier:)`.
    open var interruptedPurchasesEnabled: Bool {
        get { (try? daemon.control(.switches))?["interrupted"] == .bool(true) }
        set { _ = try? daemon.control(.interrupted, ["enabled=\(newValue ? "on" : "off")"]) }
    }

    /// Purchases fail with `failureError` (`.unknown` when it is nil).
    open var failTransactionsEnabled: Bool {
        get { state.withLock { $0.failTransactionsEnabled } }
        set {
            state.withLock { $0.failTransactionsEnabled = newValue }
            applyFailure()
        }
    }

    /// The error failed purchases carry while `failTransactionsEnabled`.
    open var failureError: SKError.Code? {
        get { state.withLock { $0.failureError } }
        set {
            state.withLock { $0.failureError = newValue }
            applyFailure()
        }
    }

    private func applyFailure() {
        let (enabled, code) = state.withLock { ($0.failTransactionsEnabled, $0.failureError ?? .unknown) }
        _ = try? daemon.control(.failNext, ["code=\(code.rawValue)", "count=\(enabled ? "all" : "0")"])
    }

    /// The locale of the test environment (kept by the session; prices follow the storefront).
    open var locale: Locale {
        get { state.withLock { $0.locale } }
        set { state.withLock { $0.locale = newValue } }
    }

    /// The storefront's country code (ISO 3166-1 alpha-3, e.g. "USA", "GBR"). Setting an unknown
    /// one leaves it unchanged.
    open var storefront: String {
        get { (try? daemon.control(.storefront))?["storefront"]?.string ?? "USA" }
        set { _ = try? daemon.control(.storefront, ["set=\(newValue)"]) }
    }

    /// How fast subscriptions renew.
    open var timeRate: TimeRate {
        get {
            let name = (try? daemon.control(.clock))?["rate"]?.string
            return name.flatMap { TimeRate(name: $0) } ?? .realTime
        }
        set { _ = try? daemon.control(.clock, ["rate=\(newValue.name)"]) }
    }

    /// Renewals that fail for a billing issue first enter a grace period (access continues).
    open var billingGracePeriodIsEnabled: Bool {
        get { (try? daemon.control(.switches))?["billingGracePeriod"] == .bool(true) }
        set {
            let issue = (try? daemon.control(.switches))?["billingIssue"] == .bool(true)
            _ = try? daemon.control(.billingIssue, ["enabled=\(issue ? "on" : "off")", "grace=\(newValue ? "on" : "off")"])
        }
    }

    /// Renewals fail for a billing issue (billing retry, or a grace period first).
    open var shouldEnterBillingRetryOnRenewal: Bool {
        get { (try? daemon.control(.switches))?["billingIssue"] == .bool(true) }
        set {
            let grace = (try? daemon.control(.switches))?["billingGracePeriod"] == .bool(true)
            _ = try? daemon.control(.billingIssue, ["enabled=\(newValue ? "on" : "off")", "grace=\(grace ? "on" : "off")"])
        }
    }

    // MARK: - Resetting

    /// Every setting back to the configuration file's; transactions are kept.
    open func resetToDefaultState() {
        _ = try? daemon.control(.reset)
        state.withLock { $0 = defaults }
    }

    /// Deletes every transaction of the test environment.
    open func clearTransactions() {
        _ = try? daemon.control(.clear)
    }

    // MARK: - Transactions

    /// Every transaction of the test environment, oldest first.
    open func allTransactions() -> [SKTestTransaction] {
        guard case .array(let records)? = try? daemon.control(.history) else { return [] }
        let subscriptions = (try? daemon.control(.subscriptions)) ?? .array([])
        return records.compactMap { SKTestTransaction(json: $0, subscriptions: subscriptions) }
    }

    /// Deletes one transaction from the test environment; an unfinished one leaves the app's
    /// queue (`removedTransactions`). Its subscription, if any, stays.
    open func deleteTransaction(identifier: Int) throws {
        _ = try daemon.control(.clear, ["id=\(identifier)"])
    }

    /// Buys a product outside the app (as on another device); the app's observers receive it.
    @available(*, deprecated, renamed: "buyProduct(identifier:options:)")
    open func buyProduct(productIdentifier: String) throws {
        try daemon.buy(productIdentifier)
    }

    /// Buys a product outside the app and returns its transaction; the app's observers receive it.
    @discardableResult
    open func buyProduct(identifier: String, options: Set<Product.PurchaseOption> = []) async throws -> OpenStoreKit.Transaction {
        let bought = try daemon.buy(identifier, quantity: TestStoreBinding.quantity(of: options))
        guard let id = bought["transactionIdentifier"]?.string.flatMap(UInt64.init) else {
            throw SKTestSessionError.refused(command: "buy", message: "no transaction in the answer")
        }
        for await result in OpenStoreKit.Transaction.all {
            if case .verified(let transaction) = result, transaction.id == id { return transaction }
        }
        throw SKTestSessionError.refused(command: "buy", message: "transaction \(id) is not in Transaction.all")
    }

    /// Approves a deferred (Ask to Buy) purchase.
    open func approveAskToBuyTransaction(identifier: Int) throws {
        _ = try daemon.control(.approve, ["id=\(identifier)"])
    }

    /// Declines a deferred (Ask to Buy) purchase.
    open func declineAskToBuyTransaction(identifier: Int) throws {
        _ = try daemon.control(.decline, ["id=\(identifier)"])
    }

    /// Refunds a purchase.
    open func refundTransaction(identifier: Int) throws {
        _ = try daemon.control(.refund, ["id=\(identifier)"])
    }

    /// Resolves an interrupted purchase or a billing issue.
    open func resolveIssueForTransaction(identifier: Int) throws {
        _ = try daemon.control(.resolve, ["id=\(identifier)"])
    }

    /// Turns auto-renew on for the subscription of a transaction.
    open func enableAutoRenewForTransaction(identifier: Int) throws {
        _ = try daemon.control(.autoRenew, ["enabled=on", "id=\(identifier)"])
    }

    /// Turns auto-renew off for the subscription of a transaction.
    open func disableAutoRenewForTransaction(identifier: Int) throws {
        _ = try daemon.control(.autoRenew, ["enabled=off", "id=\(identifier)"])
    }

    /// Ends a subscription now.
    open func expireSubscription(productIdentifier: String) throws {
        _ = try daemon.control(.expire, ["app=\(daemon.app)", "product=\(productIdentifier)", "uid=\(getuid())"])
    }

    /// Renews a subscription now.
    open func forceRenewalOfSubscription(productIdentifier: String) throws {
        _ = try daemon.control(.renew, ["app=\(daemon.app)", "product=\(productIdentifier)", "uid=\(getuid())"])
    }

    // MARK: - Locating configuration files

    static func locate(_ filename: String) throws -> URL {
        let name = filename.hasSuffix(".storekit") ? String(filename.dropLast(".storekit".count)) : filename
        for bundle in [Bundle.main] + Bundle.allBundles {
            if let url = bundle.url(forResource: name, withExtension: "storekit") { return url }
        }
        let current = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
        let direct = current.appendingPathComponent(name + ".storekit")
        if FileManager.default.fileExists(atPath: direct.path) { return direct }
        for tree in ["Tests", "Sources"] {
            let root = current.appendingPathComponent(tree)
            guard let walker = FileManager.default.enumerator(atPath: root.path) else { continue }
            while let relative = walker.nextObject() as? String {
                if (relative as NSString).lastPathComponent == name + ".storekit" { return root.appendingPathComponent(relative) }
            }
        }
        throw SKTestSessionError.configurationNotFound(name + ".storekit")
    }
}
