import StoreKitLedger

// How the store keeps Advanced Commerce requests, in the ledger's settings (both ledgers and a
// fleet, no change to their tables): per transaction (`commerce.ID`: `PERIOD\tJSON`, the period
// the transaction is of, 0 the first, and the request as Apple spells it), and a subscription's
// with the subscription (`commerce.running.ORIGINAL`) so that each renewal carries it. An app
// whose first purchase with a request was made is marked (`commerce.app.APP`, in the same unit):
// only a marked app's transactions are looked up, so that an app that never bought so costs no
// read of the ledger per signed transaction (a round trip on PostgreSQL). The mark is the ledger's,
// not the configuration's, so every host of a fleet, and the same host after its keys change,
// signs a transaction alike.

extension PaymentQueueEngine {
    static func commerceKey(_ transactionID: UInt64) -> String { "commerce.\(transactionID)" }
    static func runningCommerceKey(_ originalID: UInt64) -> String { "commerce.running.\(originalID)" }
    static let commerceAppPrefix = "commerce.app."

    /// Whether `app`'s transactions may have been bought with an Advanced Commerce request: the
    /// ledger marks it. The marks are read again when the ledger changed under the engine (a
    /// rollback, another host's change).
    func mayHaveCommerce(app: String) throws(LedgerError) -> Bool {
        let generations = (store.generation, store.externalGeneration)
        if commerceAppsGenerations.map({ $0 != generations }) ?? true {
            commerceApps = Set(try store.settings(prefix: Self.commerceAppPrefix).map { String($0.key.dropFirst(Self.commerceAppPrefix.count)) })
            commerceAppsGenerations = generations
        }
        return commerceApps.contains(app)
    }

    /// Keeps the request transaction `transactionID` of `app` was bought with, of its
    /// `period`th period; marks the app at its first.
    func recordCommerce(_ request: AdvancedCommerceRequest, period: Int, of transactionID: UInt64, app: String) throws(LedgerError) {
        if try !mayHaveCommerce(app: app) {
            try store.setSetting(Self.commerceAppPrefix + app, "1")
            commerceApps.insert(app)
        }
        try store.setSetting(Self.commerceKey(transactionID), Self.storedCommerce(request, period: period))
    }

    static func storedCommerce(_ request: AdvancedCommerceRequest, period: Int) -> String {
        "\(period)\t\(request.json.serialized())"
    }

    static func commerce(stored text: String?) -> (request: AdvancedCommerceRequest, period: Int)? {
        guard let text, let tab = text.firstIndex(of: "\t"), let period = Int(text[..<tab]),
              case .success(let request) = AdvancedCommerceRequest.parse(Array(text[text.index(after: tab)...].utf8)) else { return nil }
        return (request, period)
    }

    /// The request transaction `transactionID` of `app` was bought with, and which period it is of.
    public func advancedCommerce(of transactionID: UInt64, app: String) throws(LedgerError)
        -> (request: AdvancedCommerceRequest, period: Int)?
    {
        guard try mayHaveCommerce(app: app) else { return nil }
        return Self.commerce(stored: try store.setting(Self.commerceKey(transactionID)))
    }

    /// The Advanced Commerce request a subscription of `app` renews with, and the period it is in.
    func runningCommerce(of originalID: UInt64, app: String) throws(LedgerError) -> (request: AdvancedCommerceRequest, period: Int)? {
        guard try mayHaveCommerce(app: app) else { return nil }
        return Self.commerce(stored: try store.setting(Self.runningCommerceKey(originalID)))
    }

    func setRunningCommerce(_ commerce: (request: AdvancedCommerceRequest, period: Int)?, of originalID: UInt64,
                            app: String) throws(LedgerError) {
        guard try mayHaveCommerce(app: app) else { return }
        if commerce == nil, try store.setting(Self.runningCommerceKey(originalID)) == nil { return }
        try store.setSetting(Self.runningCommerceKey(originalID), commerce.map { Self.storedCommerce($0.request, period: $0.period) })
    }
}
