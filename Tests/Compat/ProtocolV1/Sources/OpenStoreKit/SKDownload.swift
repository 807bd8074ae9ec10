import Foundation

/// The value of `SKDownload.timeRemaining` when the remaining time is not known.
public let SKDownloadTimeRemainingUnknown: TimeInterval = -1

/// Hosted content of a transaction; this store hosts none, so `downloads` is always empty.
open class SKDownload: NSObject {
    private let storedTransaction: SKPaymentTransaction

    /// Creates an empty download; useful for test doubles.
    public override init() {
        storedTransaction = SKPaymentTransaction()
        super.init()
    }

    /// The state of the download.
    open var state: SKDownloadState { .waiting }
    /// The identifier of the hosted content.
    open var contentIdentifier: String { "" }
    /// The size of the content in bytes.
    open var expectedContentLength: Int64 { 0 }
    /// Where the content is on disk once downloaded.
    open var contentURL: URL? { nil }
    /// The version of the content.
    open var contentVersion: String { "" }
    /// Why the download failed, if it did.
    open var error: (any Error)? { nil }
    /// How far the download is, from 0 to 1.
    open var progress: Float { 0 }
    /// The estimated seconds left, or `SKDownloadTimeRemainingUnknown`.
    open var timeRemaining: TimeInterval { SKDownloadTimeRemainingUnknown }
    /// The transaction the content belongs to.
    open var transaction: SKPaymentTransaction { storedTransaction }

    /// Where downloaded content of a product is cached; always `nil` here.
    open class func contentURL(forProductID productID: String) -> URL? { nil }

    /// Deletes the cached content of a product; nothing to delete here.
    open class func deleteContentForProductID(_ productID: String) {}
}
