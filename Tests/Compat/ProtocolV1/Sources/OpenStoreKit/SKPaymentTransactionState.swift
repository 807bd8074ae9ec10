import Foundation
import StoreKitWire

/// The state of a payment transaction, with StoreKit's raw values.
///
/// Apps commonly add `CustomDebugStringConvertible` themselves, so this module deliberately does not.
public enum SKPaymentTransactionState: Int, Sendable {
    /// The store is processing the transaction.
    case purchasing = 0
    /// The store charged the user; the app should deliver the content and finish the transaction.
    case purchased = 1
    /// The transaction failed; `error` says why. The app should finish it.
    case failed = 2
    /// The transaction restores content the user bought before; the app should finish it.
    case restored = 3
    /// The transaction waits for an outside action, such as Ask to Buy approval.
    case deferred = 4
}

extension SKPaymentTransactionState {
    /// The StoreKit state of a wire-level transaction state (both use StoreKit's raw values).
    init(_ state: TransactionState) {
        switch state {
        case .purchasing: self = .purchasing
        case .purchased: self = .purchased
        case .failed: self = .failed
        case .restored: self = .restored
        case .deferred: self = .deferred
        }
    }
}
