import Foundation
import StoreKitWire

/// A payment in the payment queue, with its state; observers receive these.
///
/// Apps may subclass it and override the properties to build test doubles.
open class SKPaymentTransaction: NSObject {
    /// The wire record this transaction was made from; the queue finishes transactions by `record.id`.
    var record: TransactionRecord?

    private var storedPayment: SKPayment
    private var storedState: SKPaymentTransactionState
    private var storedIdentifier: String?
    private var storedDate: Date?
    private var storedOriginal: SKPaymentTransaction?
    private var storedError: (any Error)?
    private var storedDownloads: [SKDownload] = []

    /// Creates an empty transaction (state `.purchasing`, an empty payment); useful for test doubles.
    public override init() {
        storedPayment = SKPayment()
        storedState = .purchasing
        super.init()
    }

    /// Creates a transaction from the daemon's record; `payment` is the app's own payment, if known.
    init(record: TransactionRecord, payment: SKPayment?) {
        storedPayment = payment ?? SKPayment(record: record)
        storedState = .purchasing
        super.init()
        update(from: record)
    }

    /// Takes the state, date, original and error of a newer record of the same transaction.
    func update(from record: TransactionRecord) {
        self.record = record
        storedState = SKPaymentTransactionState(record.state)
        storedIdentifier = String(record.id)
        storedDate = Date(timeIntervalSince1970: TimeInterval(record.date) / 1000)
        storedError = SKPaymentTransaction.error(of: record)
        // A purchased or restored transaction of a product with hosted content has its download,
        // made once (the app holds it across updates of the transaction).
        if storedDownloads.isEmpty, record.state == .purchased || record.state == .restored, !record.finished,
           let content = StoreConnection.shared.hostedContent(for: record.productID) {
            storedDownloads = [SKDownload(content: content, transaction: self, transactionID: record.id)]
        }
        if let originalID = record.originalID {
            if storedOriginal?.transactionIdentifier != String(originalID) {
                storedOriginal = SKPaymentTransaction(originalID: originalID, payment: storedPayment)
            }
        } else {
            storedOriginal = nil
        }
    }

    /// The original purchase a restore or renewal refers to: only its identifier is known.
    private init(originalID: UInt64, payment: SKPayment) {
        storedPayment = payment
        storedState = .purchased
        storedIdentifier = String(originalID)
        super.init()
    }

    /// The error a failed record carries: its code (`.unknown` if none) and message.
    private static func error(of record: TransactionRecord) -> SKError? {
        guard record.errorCode != nil || record.state == .failed else { return nil }
        var userInfo: [String: Any] = [:]
        if let message = record.errorMessage {
            userInfo[NSLocalizedDescriptionKey] = message
        }
        // Keep a code this library does not know as it came; `SKError.code` reads it as `.unknown`.
        let code = Int(record.errorCode ?? Int32(SKError.Code.unknown.rawValue))
        return SKError(_nsError: NSError(domain: SKErrorDomain, code: code, userInfo: userInfo))
    }

    /// The payment this transaction processes.
    open var payment: SKPayment { storedPayment }
    /// The transaction's current state.
    open var transactionState: SKPaymentTransactionState { storedState }
    /// The store's identifier of the transaction.
    open var transactionIdentifier: String? { storedIdentifier }
    /// When the store processed the transaction.
    open var transactionDate: Date? { storedDate }
    /// The transaction a restore or renewal refers to; `nil` for a first purchase.
    open var original: SKPaymentTransaction? { storedOriginal }
    /// Why the transaction failed; set when the state is `.failed`.
    open var error: (any Error)? { storedError }
    /// The hosted content of a purchased or restored transaction, to download before it is
    /// finished; empty when its product comes with none.
    open var downloads: [SKDownload] { storedDownloads }
}
