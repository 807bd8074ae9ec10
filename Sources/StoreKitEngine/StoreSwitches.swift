import StoreKitLedger
import StoreKitWire

/// The test switches `storekitctl` sets, over the defaults of each app's catalogue (`settings` in
/// its `.storekit` file). A nil switch means "as the catalogue says"; `storekitctl reset` clears
/// them all. Persisted in the store's `settings` table, so they survive a restart, and changed only
/// inside a unit of work (a rollback reloads them).
public struct StoreSwitches: Sendable, Equatable {
    /// Ask to Buy for every account, or nil.
    public var askToBuy: Bool?
    /// Ask to Buy for one account (uid), over `askToBuy`.
    public var askToBuyByUID: [UInt32: Bool] = [:]
    /// Failing purchases: the `SKError.Code` and how many more (-1: all of them); nil: catalogue.
    public var failure: (code: Int32, remaining: Int)?
    /// Interrupted purchases for every product, or none; nil: the catalogue's product list.
    public var interrupted: Bool?
    /// Renewals fail with a billing issue (`SKTestSession.shouldEnterBillingRetryOnRenewal`).
    public var billingIssue: Bool?
    /// A billing issue starts with a grace period (`billingGracePeriodIsEnabled`).
    public var billingGracePeriod: Bool?
    /// Storefront override (three letters), over the configured one.
    public var storefront: String?
    /// Time rate override, over the catalogue's `_timeRate`.
    public var timeRate: TimeRate?

    public init() {}

    public static func == (lhs: StoreSwitches, rhs: StoreSwitches) -> Bool {
        lhs.askToBuy == rhs.askToBuy && lhs.askToBuyByUID == rhs.askToBuyByUID
            && lhs.failure?.code == rhs.failure?.code && lhs.failure?.remaining == rhs.failure?.remaining
            && lhs.interrupted == rhs.interrupted && lhs.billingIssue == rhs.billingIssue
            && lhs.billingGracePeriod == rhs.billingGracePeriod && lhs.storefront == rhs.storefront
            && lhs.timeRate == rhs.timeRate
    }

    // MARK: Persistence (settings keys `switch.*`)

    static let prefix = "switch."

    static func load(from store: any Ledger) throws(LedgerError) -> StoreSwitches {
        var switches = StoreSwitches()
        var failCode: Int32?
        var failRemaining: Int?
        for (key, value) in try store.settings(prefix: prefix) {
            let name = key.dropFirst(prefix.count)
            switch name {
            case "askToBuy": switches.askToBuy = value == "1"
            case "interrupted": switches.interrupted = value == "1"
            case "billingIssue": switches.billingIssue = value == "1"
            case "billingGracePeriod": switches.billingGracePeriod = value == "1"
            case "storefront": switches.storefront = value
            case "timeRate": switches.timeRate = Int(value).flatMap(TimeRate.init(rawValue:))
            case "fail.code": failCode = Int32(value)
            case "fail.remaining": failRemaining = Int(value)
            default:
                if name.hasPrefix("askToBuy."), let uid = UInt32(name.dropFirst("askToBuy.".count)) {
                    switches.askToBuyByUID[uid] = value == "1"
                }
            }
        }
        if let failCode, let failRemaining { switches.failure = (failCode, failRemaining) }
        return switches
    }

    /// Writes every switch (removing the unset ones) in the caller's unit of work.
    func save(to store: any Ledger) throws(LedgerError) {
        for (key, _) in try store.settings(prefix: Self.prefix) { try store.setSetting(key, nil) }
        func flag(_ value: Bool?) -> String? { value.map { $0 ? "1" : "0" } }
        try store.setSetting(Self.prefix + "askToBuy", flag(askToBuy))
        for (uid, value) in askToBuyByUID { try store.setSetting(Self.prefix + "askToBuy.\(uid)", flag(value)) }
        try store.setSetting(Self.prefix + "interrupted", flag(interrupted))
        try store.setSetting(Self.prefix + "billingIssue", flag(billingIssue))
        try store.setSetting(Self.prefix + "billingGracePeriod", flag(billingGracePeriod))
        try store.setSetting(Self.prefix + "storefront", storefront)
        try store.setSetting(Self.prefix + "timeRate", timeRate.map { String($0.rawValue) })
        try store.setSetting(Self.prefix + "fail.code", failure.map { String($0.code) })
        try store.setSetting(Self.prefix + "fail.remaining", failure.map { String($0.remaining) })
    }
}
