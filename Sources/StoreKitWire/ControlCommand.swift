/// The control plane's commands (`storekitctl COMMAND`, protocol.md §10): one list shared by the
/// daemon, which handles each (its `switch` is exhaustive), storekitctl and OpenStoreKitTest,
/// which send them. On the wire a command is its raw value, with `key=value` arguments.
public enum ControlCommand: String, Sendable, CaseIterable {
    case status, apps, products, transactions, buy, backup, migrate, certificate
    case rotateKey = "rotate-key"
    case receipt, approve, decline, resolve, refund, expire, renew
    case autoRenew = "auto-renew"
    case billingIssue = "billing-issue"
    case interrupted
    case askToBuy = "ask-to-buy"
    case failNext = "fail-next"
    case switches, reset, storefront, promote, clock, entitlements, history, subscriptions, clear
    case content
    case priceIncrease = "price-increase"
    case priceConsent = "price-consent"

    /// Commands that only read: they run even while the daemon's writes are stopped. (`clock` and
    /// `storefront` read unless given `advance`/`rate` or `set`.)
    public var onlyReads: Bool {
        switch self {
        case .status, .apps, .products, .content, .transactions, .history, .entitlements, .subscriptions, .switches, .certificate,
             .receipt:
            true
        default:
            false
        }
    }
}
