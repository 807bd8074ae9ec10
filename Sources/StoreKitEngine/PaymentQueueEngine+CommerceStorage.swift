import StoreKitLedger
import StoreKitWire

// How the store keeps Advanced Commerce requests, in the ledger's settings (both ledgers and a
// fleet, no change to their tables): per transaction (`commerce.ID`: `PERIOD\tJSON`, the period
// the transaction is of, 0 the first, and the request as Apple spells it), and a subscription's
// with the subscription (`commerce.running.ORIGINAL`) so that each renewal carries it. A renewal's
// row and the running one point at the purchase's (`PERIOD\t@PURCHASE`) instead of holding the
// request again. An app
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
            // No mark: no request kept (an empty answer), or requests kept before apps were marked.
            commerceUnmarked = commerceApps.isEmpty ? try !store.settings(prefix: "commerce.").isEmpty : false
            commerceAppsGenerations = generations
        }
        return commerceUnmarked || commerceApps.contains(app)
    }

    /// Marks `app`; on a ledger that kept requests before apps were marked, first the apps of
    /// every transaction kept with one.
    private func markCommerceApp(_ app: String) throws(LedgerError) {
        if commerceUnmarked {
            var apps: Set<String> = []
            for setting in try store.settings(prefix: "commerce.") {
                guard let id = UInt64(setting.key.dropFirst("commerce.".count)), let record = try store.transaction(id: id) else { continue }
                apps.insert(record.app)
            }
            for marked in apps.subtracting([app]) { try store.setSetting(Self.commerceAppPrefix + marked, "1") }
            commerceApps.formUnion(apps)
            commerceUnmarked = false
        }
        try store.setSetting(Self.commerceAppPrefix + app, "1")
        commerceApps.insert(app)
    }

    /// Keeps the request transaction `transactionID` of `app` was bought with, of its
    /// `period`th period; marks the app at its first.
    func recordCommerce(_ request: AdvancedCommerceRequest, period: Int, of transactionID: UInt64, app: String) throws(LedgerError) {
        if try !mayHaveCommerce(app: app) || commerceUnmarked { try markCommerceApp(app) }
        try store.setSetting(Self.commerceKey(transactionID), Self.storedCommerce(request, period: period))
    }

    /// Keeps that transaction `transactionID` of `app` (a renewal) is of `commerce`'s period:
    /// pointing at the row that holds the request (`PERIOD\t@SOURCE`), so that a renewal does not
    /// store the request again; the request itself when no row holds it (a subscription kept so
    /// before renewals pointed).
    func recordCommerce(_ commerce: KeptCommerce, of transactionID: UInt64) throws(LedgerError) {
        try store.setSetting(Self.commerceKey(transactionID), Self.stored(commerce))
    }

    /// A request as the ledger keeps it for a transaction or a subscription: the request, the
    /// period, and the transaction whose row holds the request's JSON (nil: this row holds it,
    /// with no transaction to point at).
    typealias KeptCommerce = (request: AdvancedCommerceRequest, period: Int, source: UInt64?)

    static func storedCommerce(_ request: AdvancedCommerceRequest, period: Int) -> String {
        "\(period)\t\(request.json.serialized())"
    }

    static func stored(_ commerce: KeptCommerce) -> String {
        commerce.source.map { "\(commerce.period)\t@\($0)" } ?? storedCommerce(commerce.request, period: commerce.period)
    }

    /// Reads a kept row (`id`: the transaction whose row it is, nil for a subscription's): the
    /// request itself, or a pointer to the row that holds it.
    func commerce(stored text: String?, id: UInt64?) throws(LedgerError) -> KeptCommerce? {
        guard let text, let tab = text.firstIndex(of: "\t"), let period = Int(text[..<tab]) else { return nil }
        let rest = text[text.index(after: tab)...]
        if rest.first == "@" {
            guard let source = UInt64(rest.dropFirst()), let held = Self.inlineRequest(try store.setting(Self.commerceKey(source))) else { return nil }
            return (held, period, source)
        }
        guard case .success(let request) = AdvancedCommerceRequest.parse(Array(rest.utf8)) else { return nil }
        return (request, period, id)
    }

    /// The request a row holds itself (nil for a pointer).
    static func inlineRequest(_ text: String?) -> AdvancedCommerceRequest? {
        guard let text, let tab = text.firstIndex(of: "\t"), text[text.index(after: tab)...].first != "@",
              case .success(let request) = AdvancedCommerceRequest.parse(Array(text[text.index(after: tab)...].utf8)) else { return nil }
        return request
    }

    /// The request transaction `transactionID` of `app` was bought with, and which period it is of.
    func advancedCommerce(of transactionID: UInt64, app: String) throws(LedgerError) -> KeptCommerce? {
        guard try mayHaveCommerce(app: app) else { return nil }
        return try commerce(stored: try store.setting(Self.commerceKey(transactionID)), id: transactionID)
    }

    /// The Advanced Commerce request a subscription of `app` renews with, and the period it is in.
    func runningCommerce(of originalID: UInt64, app: String) throws(LedgerError) -> KeptCommerce? {
        guard try mayHaveCommerce(app: app) else { return nil }
        return try commerce(stored: try store.setting(Self.runningCommerceKey(originalID)), id: nil)
    }

    func setRunningCommerce(_ commerce: KeptCommerce?, of originalID: UInt64, app: String) throws(LedgerError) {
        guard try mayHaveCommerce(app: app) else { return }
        if commerce == nil, try store.setting(Self.runningCommerceKey(originalID)) == nil { return }
        try store.setSetting(Self.runningCommerceKey(originalID), commerce.map(Self.stored))
    }

    /// Before `record`'s row goes (the transaction deleted while its subscription stays), a
    /// subscription renewing with the request it holds keeps the request itself, so that its
    /// renewals are still priced by it.
    func keepRunningCommerce(of record: TransactionRecord) throws(LedgerError) {
        guard try mayHaveCommerce(app: record.app),
              let request = Self.inlineRequest(try store.setting(Self.commerceKey(record.id))),
              let running = try runningCommerce(of: record.originalID ?? record.id, app: record.app),
              running.source == record.id else { return }
        try setRunningCommerce((request, running.period, nil), of: record.originalID ?? record.id, app: record.app)
    }
}
