import Foundation
import Glibc

/// What OpenStoreKitTest's `SKTestSession` needs to point this process's store at the private
/// storekitd it started, and back: not API for apps (`@_spi(StoreKitTest)`).
@_spi(StoreKitTest)
public enum TestStoreBinding {
    /// The app identifier this process says hello with (what the session registers).
    public static var appIdentifier: String { StoreConnection.shared.resolvedAppIdentifier }

    /// From now on the library talks to the daemon on `socketPath`, trusts the root certificate
    /// beside it, and keeps app receipts and downloaded content under `dataHome`; what it knew of the previous daemon
    /// (the payment queue's transactions, the trusted root, the connection) is forgotten.
    public static func bind(socketPath: String, dataHome: String) {
        ReceiptFile.dataHomeOverride.withLock { $0 = dataHome }
        ContentDownloader.cacheHomeOverride.withLock { $0 = dataHome }
        switchStore(socketPath: socketPath)
    }

    /// Back to the default daemon (`$STOREKITD_SOCKET` or the runtime directory's) and data home.
    public static func unbind() {
        ReceiptFile.dataHomeOverride.withLock { $0 = nil }
        ContentDownloader.cacheHomeOverride.withLock { $0 = nil }
        switchStore(socketPath: nil)
    }

    /// The quantity a `.quantity(_:)` option among `options` asks for.
    public static func quantity(of options: Set<Product.PurchaseOption>) -> Int? {
        for option in options {
            if case .quantity(let quantity) = option.value { return quantity }
        }
        return nil
    }

    private static func switchStore(socketPath: String?) {
        SKPaymentQueue.socketPath = socketPath
        SignedDataTrust.forget()
        SKPaymentQueue.default().forgetTransactions()
        StoreConnection.shared.reconnect()
    }
}
