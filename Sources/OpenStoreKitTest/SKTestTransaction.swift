import Foundation
import OpenStoreKit
import StoreKitWire

/// Apple's `SKTestTransaction`: the test environment's record of one transaction, as
/// `SKTestSession.allTransactions()` returns them.
open class SKTestTransaction: @unchecked Sendable {
    /// The transaction's identifier (an `Int`, as Apple's: `Int(transaction.id)` of StoreKit 2).
    public let identifier: Int
    /// The identifier of the original purchase (itself for a first purchase).
    public let originalTransactionIdentifier: Int
    /// The product bought.
    public let productIdentifier: String
    /// When it was made.
    public let purchaseDate: Date
    /// When its subscription period ends (auto-renewable subscriptions).
    public let expirationDate: Date?
    /// When it was refunded or revoked (StoreKit 2's `revocationDate`); nil otherwise, also when
    /// auto-renew was only turned off.
    public let cancelDate: Date?
    /// Its state in the payment queue.
    public let state: SKPaymentTransactionState
    /// Its subscription renews automatically.
    public let autoRenewingEnabled: Bool
    /// It waits for a parent's approval (Ask to Buy).
    public let pendingAskToBuyConfirmation: Bool
    /// It was interrupted, or its subscription has a billing issue, until resolved.
    public let hasPurchaseIssue: Bool
    /// Whether the subscription it belongs to has a price increase waiting for the subscriber's
    /// consent (`storekitctl price-increase`, answered with `price-consent`).
    public let isPendingPriceIncreaseConsent: Bool
    // Beyond Apple's SKTestTransaction (docs/storekittest.md):
    /// It was refunded (`cancelDate` is set).
    public let refunded: Bool
    /// The app finished it.
    public let isFinished: Bool
    /// How many units it bought.
    public let quantity: Int

    init?(json: JSONValue, subscriptions: JSONValue) {
        guard let id = json["transactionIdentifier"]?.string.flatMap({ Int($0) }),
              let product = json["productIdentifier"]?.string,
              let date = json["transactionDate"]?.string.flatMap(Self.date)
        else { return nil }
        identifier = id
        originalTransactionIdentifier = json["originalTransactionIdentifier"]?.string.flatMap({ Int($0) }) ?? id
        productIdentifier = product
        purchaseDate = date
        expirationDate = json["expiresDate"]?.string.flatMap(Self.date)
        cancelDate = json["revocationDate"]?.string.flatMap(Self.date)
        let stateName = json["state"]?.string ?? ""
        state = switch stateName {
        case "purchasing": .purchasing
        case "purchased": .purchased
        case "failed": .failed
        case "restored": .restored
        case "deferred": .deferred
        default: .failed
        }
        pendingAskToBuyConfirmation = state == .deferred
        refunded = cancelDate != nil
        isFinished = json["finished"] == .bool(true)
        if case .int(let units)? = json["quantity"] { quantity = Int(units) } else { quantity = 1 }
        // The subscription this transaction belongs to, for its renewal state.
        var subscription: JSONValue?
        let original = String(originalTransactionIdentifier)
        if case .array(let all) = subscriptions {
            subscription = all.first { $0["originalTransactionIdentifier"]?.string == original }
        }
        autoRenewingEnabled = subscription?["willAutoRenew"] == .bool(true)
        let subscriptionState = subscription?["state"]?.string
        // An interrupted purchase is failed with storekitd's "interrupted" message until resolved.
        let interrupted = stateName == "failed" && (json["error"]?["message"]?.string?.contains("interrupted") ?? false)
        hasPurchaseIssue = interrupted || subscriptionState == "billingRetry" || subscriptionState == "gracePeriod"
        isPendingPriceIncreaseConsent = subscription?["priceIncrease"]?.string == "pending"
    }

    private static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}
