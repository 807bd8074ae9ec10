import Foundation
import StoreKitPosix
import StoreKitWire
import Synchronization

/// The app receipt on disk, kept current by the library.
///
/// Apple's receipt lives in the app bundle; on Linux the library writes it per user and app at
/// `SKPaymentQueue.appStoreReceiptURL` (a 0600 file in a 0700 directory of the user's data home,
/// so that only the user's own processes read it). It asks storekitd for a new receipt before it
/// delivers a batch of transaction updates to the observers, so an app that validates the
/// receipt in `paymentQueue(_:updatedTransactions:)` finds the transactions in it (the receipt
/// fetched for the batch, even when another process of the app wrote the file since); batches
/// keep their order while a receipt is fetched.
final class ReceiptFile: @unchecked Sendable {
    static let shared = ReceiptFile()

    private let lock = NSLock()
    /// Deliveries in arrival order; one waits while its receipt is being fetched, and gets it,
    /// and while payments this process sent before it arrived are unanswered (`afterPayments`).
    private var pending: [(ready: Bool, afterPayments: UInt64, receipt: [UInt8]?, deliver: ([UInt8]?) -> Void)] = []
    /// How many of this process's payments the daemon has answered (SKPaymentQueue counts).
    private var answered: UInt64 = 0

    /// The daemon answered payments up to `count`: the deliveries that waited for them go.
    func paymentsAnswered(_ count: UInt64) {
        lock.withLock { answered = max(answered, count) }
        drain()
    }

    /// The receipt fetched for the batch the observers are being told of, while they are: what
    /// `SKAppReceipt.validated()` reads in place of the file. Another process of the same user
    /// and app (an observer beside a purchase) writes the same file, and may write a receipt it
    /// fetched earlier just after this one: validated against the file, a batch could miss its
    /// own transactions. Guarded by `batchLock`.
    private static nonisolated(unsafe) var batchReceipt: [UInt8]?
    private static let batchLock = NSLock()

    /// Runs `body` (the observers' callbacks for a batch) with `receipt` as the batch's receipt.
    static func withBatchReceipt(_ receipt: [UInt8]?, _ body: () -> Void) {
        guard let receipt else { return body() }
        batchLock.withLock { batchReceipt = receipt }
        defer { batchLock.withLock { batchReceipt = nil } }
        body()
    }

    /// The receipt of the batch being delivered, if one is.
    static var currentBatchReceipt: [UInt8]? { batchLock.withLock { batchReceipt } }

    /// The data home of an OpenStoreKitTest session, while one is bound (`TestStoreBinding`).
    static let dataHomeOverride = Mutex<String?>(nil)

    /// `$XDG_DATA_HOME/storekit/APP/receipt` (default `~/.local/share/storekit/APP/receipt`).
    static func url(app: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        let dataHome = baseDirectory(session: dataHomeOverride.withLock { $0 }, variable: "XDG_DATA_HOME", underHome: ".local/share",
                                     environment: environment)
        return URL(fileURLWithPath: dataHome + "/storekit/" + app + "/receipt")
    }

    /// An XDG base directory: a bound test session's, else `$VARIABLE` when absolute, else
    /// `$HOME/underHome`.
    static func baseDirectory(session: String?, variable: String, underHome: String,
                              environment: [String: String]) -> String {
        if let session { return session }
        if let xdg = environment[variable], xdg.hasPrefix("/") { return xdg }
        return (environment["HOME"] ?? NSHomeDirectory()) + "/" + underHome
    }

    /// Asks storekitd for the receipt and writes it; `completion` gets the bytes or the error.
    static func refresh(connection: StoreConnection, app: String, completion: @escaping @Sendable (Result<[UInt8], SKError>) -> Void) {
        connection.request({ .receipt(requestID: $0) }) { result in
            switch result {
            case .success(.receipt(_, let data)):
                do {
                    try write(data, app: app)
                    completion(.success(data))
                } catch {
                    completion(.failure(SKError(.unknown, userInfo: [NSLocalizedDescriptionKey: "Cannot write the receipt: \(error)"])))
                }
            case .success:
                completion(.failure(SKError(.unknown)))
            case .failure(let error):
                completion(.failure(error))
            }
        }
    }

    /// Fetches and writes the receipt, once done (a failure leaves the file as it was): StoreKit 2
    /// keeps the app's receipt current as StoreKit 1 does, after a purchase and an update.
    static func refreshed(connection: StoreConnection = .shared) async {
        let app = connection.resolvedAppIdentifier
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            refresh(connection: connection, app: app) { _ in continuation.resume() }
        }
    }

    static func write(_ data: [UInt8], app: String) throws {
        let url = url(app: app)
        let directory = url.deletingLastPathComponent().path
        try PrivateDirectory.prepare(directory, mode: 0o700)
        try FileSystem.writeAtomically(data, to: url.path, permissions: 0o600)
    }

    /// Runs `deliver` in arrival order; when `refreshFirst`, only after a new receipt was
    /// fetched (or could not be: the delivery never waits on a failure), with that receipt.
    func sequence(refreshFirst: Bool, afterPayments: UInt64 = 0, connection: StoreConnection, app: String,
                  _ deliver: @escaping ([UInt8]?) -> Void) {
        lock.withLock { pending.append((!refreshFirst, afterPayments, nil, deliver)) }
        guard refreshFirst else {
            drain()
            return
        }
        Self.refresh(connection: connection, app: app) { [self] result in
            lock.withLock {
                if let waiting = pending.firstIndex(where: { !$0.ready }) {
                    pending[waiting].ready = true
                    pending[waiting].receipt = try? result.get()
                }
            }
            drain()
        }
    }

    /// Delivers the ready entries at the head, in order. (Under the lock: a delivery only hands
    /// its callbacks to the callback queue, and two threads draining must not reorder them.)
    private func drain() {
        lock.withLock {
            while let head = pending.first, head.ready, head.afterPayments <= answered {
                pending.removeFirst()
                head.deliver(head.receipt)
            }
        }
    }
}
