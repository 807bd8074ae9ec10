import Foundation
import StoreKitWire

/// The value of `SKDownload.timeRemaining` when the remaining time is not known.
public let SKDownloadTimeRemainingUnknown: TimeInterval = -1

/// Hosted content of a purchased or restored transaction (a `[HostedContent]` of the app's
/// registration): queue it with `SKPaymentQueue.start(_:)`, follow it in
/// `paymentQueue(_:updatedDownloads:)`, and once it is `.finished` take its files from
/// `contentURL` (the folder that holds `Contents/`) before finishing the transaction.
///
/// The files come from storekitd as descriptors it opened (no copy through the daemon), are
/// checked against the SHA-256 it listed, and land in
/// `$XDG_CACHE_HOME/storekit/APP/downloads/PRODUCT/` (default `~/.cache/...`). A paused, failed
/// or interrupted download keeps what it copied and goes on from there.
open class SKDownload: NSObject {
    /// What changes as the download runs, under `lock`.
    struct Progress {
        var state: SKDownloadState = .waiting
        var progress: Float = 0
        var timeRemaining: TimeInterval = SKDownloadTimeRemainingUnknown
        var error: (any Error)?
        var contentURL: URL?
        /// The worker copying it, while active.
        var worker: ContentDownloader?
    }

    private let lock = NSLock()
    private var current = Progress()
    private weak var storedTransaction: SKPaymentTransaction?
    private let storedContentIdentifier: String
    private let storedVersion: String
    private let storedLength: Int64
    /// The transaction's id in the daemon's queue; 0 for a test double.
    let transactionID: UInt64

    /// Creates an empty download; useful for test doubles.
    public override init() {
        storedContentIdentifier = ""
        storedVersion = ""
        storedLength = 0
        transactionID = 0
        super.init()
    }

    /// The download of `content` for `transaction`.
    init(content: HostedContentRecord, transaction: SKPaymentTransaction, transactionID: UInt64) {
        storedContentIdentifier = content.productID
        storedVersion = content.version
        storedLength = Int64(clamping: content.length)
        storedTransaction = transaction
        self.transactionID = transactionID
        super.init()
    }

    /// Reads or changes the mutable part, under the lock.
    func withProgress<T>(_ body: (inout Progress) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&current)
    }

    /// The state of the download.
    open var state: SKDownloadState { withProgress { $0.state } }
    /// The state of the download (deprecated name of `state`).
    open var downloadState: SKDownloadState { state }
    /// The identifier of the hosted content: the product identifier.
    open var contentIdentifier: String { storedContentIdentifier }
    /// The size of the content in bytes.
    open var expectedContentLength: Int64 { storedLength }
    /// The size of the content in bytes (deprecated name of `expectedContentLength`).
    open var contentLength: Int64 { storedLength }
    /// Where the content is once `.finished`: the folder that holds `Contents/` (and
    /// `ContentInfo.plist`); nil before.
    open var contentURL: URL? { withProgress { $0.contentURL } }
    /// The version of the content.
    open var contentVersion: String { storedVersion }
    /// Why the download failed; set when the state is `.failed`.
    open var error: (any Error)? { withProgress { $0.error } }
    /// How far the download is, from 0 to 1.
    open var progress: Float { withProgress { $0.progress } }
    /// The estimated seconds left, or `SKDownloadTimeRemainingUnknown`.
    open var timeRemaining: TimeInterval { withProgress { $0.timeRemaining } }
    /// The transaction the content belongs to.
    open var transaction: SKPaymentTransaction { storedTransaction ?? SKPaymentTransaction() }

    /// Where the downloaded content of `productID` is, if it was downloaded (and not deleted).
    open class func contentURL(forProductID productID: String) -> URL? {
        let url = ContentDownloader.finalURL(app: StoreConnection.shared.resolvedAppIdentifier, productID: productID)
        return FileManager.default.fileExists(atPath: url.path) ? url : nil
    }

    /// Deletes the downloaded content of `productID` (what `contentURL(forProductID:)` names).
    open class func deleteContentForProductID(_ productID: String) {
        let url = ContentDownloader.finalURL(app: StoreConnection.shared.resolvedAppIdentifier, productID: productID)
        try? FileManager.default.removeItem(at: url)
    }
}
