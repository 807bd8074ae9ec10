import StoreKitLedger
import StoreKitWire

/// Something the daemon must do after the unit of work that produced it has been committed.
public enum Effect: Equatable, Sendable {
    /// Push `paymentQueue(_:updatedTransactions:)` to every observer of the queue.
    case updated(QueueKey, [TransactionRecord])
    /// Push `paymentQueue(_:removedTransactions:)` to every observer of the queue.
    case removed(QueueKey, [TransactionRecord])
    /// Push `paymentQueue(_:didRevokeEntitlementsForProductIdentifiers:)`.
    case revoked(QueueKey, [String])
    /// Push `paymentQueueDidChangeStorefront(_:)` to every connected client.
    case storefrontChanged(countryCode: String, identifier: String)
    /// Offer a promoted purchase (`paymentQueue(_:shouldAddStorePayment:for:)`) to the queue's observers.
    case promoted(QueueKey, ProductRecord)
    /// A price increase of the queue's subscription to a product waits for the subscriber's consent
    /// (`paymentQueueShouldShowPriceConsent(_:)`).
    case priceConsent(QueueKey, String)
}

/// The answer to one request plus the effects to deliver once it is durable.
public struct Outcome: Equatable, Sendable {
    public var code: ResultCode
    public var detail: Int32
    public var value: UInt64
    public var message: String
    public var effects: [Effect]

    public init(code: ResultCode, detail: Int32 = 0, value: UInt64 = 0, message: String = "", effects: [Effect] = []) {
        self.code = code
        self.detail = detail
        self.value = value
        self.message = message
        self.effects = effects
    }

    public static func ok(value: UInt64 = 0, _ effects: [Effect] = []) -> Outcome {
        Outcome(code: .ok, value: value, effects: effects)
    }

    public static func refused(_ code: ResultCode, _ message: String) -> Outcome {
        Outcome(code: code, message: message)
    }

    public static func storeKit(_ code: StoreKitErrorCode, _ message: String) -> Outcome {
        Outcome(code: .storeKit, detail: code.rawValue, message: message)
    }
}
