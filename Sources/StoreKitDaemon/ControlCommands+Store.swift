import StoreKitEngine
import StoreKitLedger
import StoreKitWire

// The simulated store's control commands (SKTestSession parity): Ask to Buy answers, refunds,
// subscriptions, interrupted purchases, failures, storefront, promoted purchases, the clock,
// read-outs, clear and reset. Arguments are `key=value`; see docs/protocol.md §11.

extension ControlCommands {
    /// Runs a store command (the simulated store's; the daemon's own are answered by `execute`).
    func storeCommand(_ command: ControlCommand, _ arguments: Arguments) throws(LedgerError) -> Result {
        switch command {
        case .approve: return try onTransaction(arguments) { id throws(LedgerError) in try engine.approve(transactionID: id) }
        case .decline: return try onTransaction(arguments) { id throws(LedgerError) in try engine.decline(transactionID: id) }
        case .resolve: return try onTransaction(arguments) { id throws(LedgerError) in try engine.resolve(transactionID: id) }
        case .refund: return try refund(arguments)
        case .expire: return try onSubscription(arguments, returning: .subscription) { selector throws(LedgerError) in
            try engine.expire(selector)
        }
        case .renew: return try onSubscription(arguments, returning: .transaction) { selector throws(LedgerError) in
            try engine.forceRenewal(selector)
        }
        case .autoRenew:
            guard let on = flag(arguments, "enabled") else { return .failure(.invalidArgument, "auto-renew needs enabled=on|off") }
            return try onSubscription(arguments, returning: .subscription) { selector throws(LedgerError) in
                try engine.setAutoRenew(on, selector)
            }
        case .priceIncrease:
            return try onSubscription(arguments, returning: .subscription) { selector throws(LedgerError) in
                try engine.requestPriceConsent(selector)
            }
        case .priceConsent:
            guard let agreed = flag(arguments, "agreed") else { return .failure(.invalidArgument, "price-consent needs agreed=yes|no") }
            return try onSubscription(arguments, returning: .subscription) { selector throws(LedgerError) in
                try engine.answerPriceConsent(agreed, selector)
            }
        case .billingIssue:
            guard let on = flag(arguments, "enabled") else { return .failure(.invalidArgument, "billing-issue needs enabled=on|off") }
            let grace = flag(arguments, "grace")
            return try switches { switches in
                switches.billingIssue = on
                if let grace { switches.billingGracePeriod = grace }
            }
        case .interrupted:
            guard let on = flag(arguments, "enabled") else { return .failure(.invalidArgument, "interrupted needs enabled=on|off") }
            return try switches { $0.interrupted = on }
        case .askToBuy:
            guard let on = flag(arguments, "enabled") else { return .failure(.invalidArgument, "ask-to-buy needs enabled=on|off") }
            if let text = arguments["uid"] {
                guard let uid = UInt32(text) else { return .failure(.invalidArgument, "uid '\(text)' is not a number") }
                return try switches { $0.askToBuyByUID[uid] = on }
            }
            return try switches { switches in
                switches.askToBuy = on
                switches.askToBuyByUID.removeAll()
            }
        case .failNext: return try failNext(arguments)
        case .switches: return Result(json: switchesJSON())
        case .reset: return try switches { $0 = StoreSwitches() }
        case .storefront: return try storefront(arguments)
        case .promote: return try promote(arguments)
        case .clock: return try clock(arguments)
        case .entitlements: return try entitlements(arguments)
        case .history: return try history(arguments)
        case .subscriptions: return try subscriptions(arguments)
        case .clear: return try clear(arguments)
        case .status, .apps, .products, .content, .transactions, .buy, .backup, .migrate, .certificate, .rotateKey, .receipt:
            return .failure(.invalidArgument, "'\(command.rawValue)' is not a store command")
        }
    }

    // MARK: Argument helpers

    /// `key=on|off` (also 1/0, true/false, yes/no); nil when absent or anything else.
    private func flag(_ arguments: Arguments, _ key: String) -> Bool? {
        switch arguments[key]?.lowercased() {
        case "on", "1", "true", "yes": true
        case "off", "0", "false", "no": false
        default: nil
        }
    }

    private enum Parsed<T> {
        case value(T)
        case failure(Result)
    }

    private func uid(_ arguments: Arguments, default fallback: UInt32? = 0) -> Parsed<UInt32?> {
        guard let text = arguments["uid"] else { return .value(fallback) }
        guard let uid = UInt32(text) else { return .failure(.failure(.invalidArgument, "uid '\(text)' is not a number")) }
        return .value(uid)
    }

    private func transactionID(_ arguments: Arguments, command: String) -> Parsed<UInt64> {
        guard let text = arguments["id"] else { return .failure(.failure(.invalidArgument, "\(command) needs a TRANSACTION id")) }
        guard let id = UInt64(text) else {
            return .failure(.failure(.invalidArgument, "transaction id '\(text)' is not a number"))
        }
        guard id <= UInt64(Int64.max) else {
            return .failure(.failure(.transactionNotFound, "transaction id \(text) is out of range (at most \(Int64.max))"))
        }
        return .value(id)
    }

    /// `app=ID` must name a registered app (when `required`, it must be there).
    private func app(_ arguments: Arguments, required: Bool) -> Parsed<String?> {
        guard let app = arguments["app"] else {
            return required ? .failure(.failure(.invalidArgument, "an APP is required")) : .value(nil)
        }
        guard engine.isRegistered(app: app) else { return .failure(.failure(.unknownApp, "app \(app) is not registered")) }
        return .value(app)
    }

    /// Turns an engine refusal into a control failure with the engine's code.
    private func failure(_ outcome: Outcome) -> Result {
        var result = Result.failure(outcome.code, outcome.message)
        if outcome.code == .storeKit {
            result.json = .object([("error", .string(outcome.message)), ("code", .int(Int64(outcome.detail)))])
        }
        return result
    }

    private func transactionResult(_ outcome: Outcome) throws(LedgerError) -> Result {
        guard outcome.code == .ok else { return failure(outcome) }
        let record = try engine.store.transaction(id: outcome.value)
        return Result(json: record?.json ?? .null, effects: outcome.effects)
    }

    // MARK: Transactions

    private func onTransaction(_ arguments: Arguments, _ body: (UInt64) throws(LedgerError) -> Outcome) throws(LedgerError) -> Result {
        switch transactionID(arguments, command: "this command") {
        case .failure(let result): return result
        case .value(let id): return try transactionResult(try body(id))
        }
    }

    private func refund(_ arguments: Arguments) throws(LedgerError) -> Result {
        var reason: Int32 = 0
        if let text = arguments["reason"] {
            guard let value = Int32(text), value >= 0 else {
                return .failure(.invalidArgument, "reason '\(text)' is not a number (0 other, 1 developer issue)")
            }
            reason = value
        }
        return try onTransaction(arguments) { id throws(LedgerError) in try engine.refund(transactionID: id, reason: reason) }
    }

    // MARK: Subscriptions

    private enum Answer {
        case subscription
        case transaction
    }

    /// Runs `body` on the subscription named by `id=` (one of its transactions) or by
    /// `app=` + `product=` (+ `uid=`, default 0).
    private func onSubscription(
        _ arguments: Arguments, returning answer: Answer, _ body: (SubscriptionSelector) throws(LedgerError) -> Outcome
    ) throws(LedgerError) -> Result {
        let selector: SubscriptionSelector
        if arguments["id"] != nil {
            switch transactionID(arguments, command: "this command") {
            case .failure(let result): return result
            case .value(let id): selector = .transaction(id)
            }
        } else {
            guard let app = arguments["app"], let product = arguments["product"] else {
                return .failure(.invalidArgument, "name the subscription by TRANSACTION id, or by APP and PRODUCT")
            }
            guard case .value(let uid) = uid(arguments) else { return .failure(.invalidArgument, "uid is not a number") }
            selector = .product(uid: uid ?? 0, app: app, productID: product)
        }
        let outcome = try body(selector)
        guard outcome.code == .ok else { return failure(outcome) }
        switch answer {
        case .transaction:
            return try transactionResult(outcome)
        case .subscription:
            let subscription = try engine.store.subscription(originalID: outcome.value)
            return Result(json: subscription.map(subscriptionJSON) ?? .null, effects: outcome.effects)
        }
    }

    private func subscriptions(_ arguments: Arguments) throws(LedgerError) -> Result {
        guard case .value(let app) = app(arguments, required: false) else {
            return failureOf(app(arguments, required: false))
        }
        guard case .value(let uid) = uid(arguments, default: nil) else { return .failure(.invalidArgument, "uid is not a number") }
        return Result(json: .array(try engine.subscriptions(uid: uid, app: app).map(subscriptionJSON)))
    }

    private func failureOf<T>(_ parsed: Parsed<T>) -> Result {
        if case .failure(let result) = parsed { return result }
        return .failure(.invalidArgument, "bad arguments")
    }

    /// A subscription as `-o json` shows it, with StoreKit 2's renewal-info names.
    func subscriptionJSON(_ subscription: Subscription) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("originalTransactionIdentifier", .string(String(subscription.originalID))),
            ("productIdentifier", .string(subscription.productID)),
            ("subscriptionGroupIdentifier", .string(subscription.groupID)),
            ("uid", .int(Int64(subscription.uid))),
            ("app", .string(subscription.app)),
            ("state", .string(subscription.status.name)),
            ("expiresDate", .string(RFC3339.string(milliseconds: subscription.expiresDate))),
            ("willAutoRenew", .bool(subscription.autoRenew && subscription.status.isLive)),
            ("autoRenewProductIdentifier", .string(subscription.nextProductID ?? subscription.productID)),
            ("latestTransactionIdentifier", .string(String(subscription.lastTransactionID))),
            ("renewalCount", .int(Int64(subscription.renewals))),
        ]
        if let grace = subscription.gracePeriodEnd, subscription.status == .gracePeriod {
            members.append(("gracePeriodExpiresDate", .string(RFC3339.string(milliseconds: grace))))
        }
        if let retry = subscription.billingRetryEnd, subscription.status.isLive, subscription.status != .active {
            members.append(("billingRetryExpiresDate", .string(RFC3339.string(milliseconds: retry))))
        }
        if let due = subscription.due { members.append(("nextEventDate", .string(RFC3339.string(milliseconds: due)))) }
        if let increase = try? engine.priceIncrease(of: subscription.originalID) {
            members.append(("priceIncrease", .string(increase.rawValue)))
        }
        do {
            members.append(("signedRenewalInfo", .string(try server.proof.signedRenewalInfo(
                subscription, engine: engine, configuration: configuration))))
        } catch {
            server.logger.error("Failed to sign the renewal info of \(subscription.originalID): \(error)", id: .signingKey)
        }
        return .object(members)
    }

    // MARK: Switches

    private func switches(_ change: (inout StoreSwitches) -> Void) throws(LedgerError) -> Result {
        let effects = try engine.updateSwitches(change)
        return Result(json: switchesJSON(), effects: effects)
    }

    private func failNext(_ arguments: Arguments) throws(LedgerError) -> Result {
        guard let text = arguments["code"] else { return .failure(.invalidArgument, "fail-next needs an SKError CODE") }
        guard let code = StoreKitErrorCode(text: text)?.rawValue else {
            return .failure(.invalidArgument, "'\(text)' is not an SKError.Code (0…20 or a name such as paymentCancelled)")
        }
        var count = 1
        if let countText = arguments["count"] {
            if countText == "all" {
                count = -1
            } else {
                guard let value = Int(countText), value >= 0, value <= 1_000_000 else {
                    return .failure(.invalidArgument, "count '\(countText)' must be a number (0 turns failing off) or 'all'")
                }
                count = value
            }
        }
        return try switches { $0.failure = count == 0 ? nil : (code, count) }
    }

    /// The switches in effect: null members mean "as each app's catalogue says".
    func switchesJSON() -> JSONValue {
        let switches = engine.switches
        func flag(_ value: Bool?) -> JSONValue { value.map { .bool($0) } ?? .null }
        let perUID: [(String, JSONValue)] = switches.askToBuyByUID.keys.sorted().map { (String($0), .bool(switches.askToBuyByUID[$0]!)) }
        var failNext: JSONValue = .null
        if let failure = switches.failure {
            failNext = .object([
                ("code", .int(Int64(failure.code))), ("name", .string(StoreKitErrorCode.name(of: failure.code))),
                ("remaining", failure.remaining < 0 ? .null : .int(Int64(failure.remaining))),
            ])
        }
        return .object([
            ("askToBuy", flag(switches.askToBuy)),
            ("askToBuyByUID", .object(perUID)),
            ("failNext", failNext),
            ("interrupted", flag(switches.interrupted)),
            ("billingIssue", flag(switches.billingIssue)),
            ("billingGracePeriod", flag(switches.billingGracePeriod)),
            ("storefront", .string(engine.storefront)),
            ("timeRate", .string(engine.clock.rate.name)),
        ])
    }

    // MARK: Storefront, promoted purchases

    private func storefront(_ arguments: Arguments) throws(LedgerError) -> Result {
        var effects: [Effect] = []
        if let code = arguments["set"]?.uppercased() {
            guard Storefronts.isKnown(code) else {
                return .failure(.invalidArgument, "unknown storefront '\(code)' (known: \(Storefronts.known.joined(separator: ", ")))")
            }
            effects = try engine.updateSwitches { $0.storefront = code }
        }
        let storefront = engine.storefront
        return Result(json: .object([
            ("storefront", .string(storefront)),
            ("identifier", .string(Storefronts.identifier(for: storefront))),
            ("currencyCode", .string(Storefronts.currency(for: storefront))),
        ]), effects: effects)
    }

    private func promote(_ arguments: Arguments) throws(LedgerError) -> Result {
        guard case .value(let app?) = app(arguments, required: true) else { return failureOf(app(arguments, required: true)) }
        guard let product = arguments["product"] else { return .failure(.invalidArgument, "promote needs a PRODUCT") }
        guard case .value(let uid) = uid(arguments) else { return .failure(.invalidArgument, "uid is not a number") }
        let outcome = engine.promote(uid: uid ?? 0, app: app, productID: product)
        guard outcome.code == .ok else { return failure(outcome) }
        let record = engine.product(app: app, id: product)?.record(locale: engine.locale, currencyCode: engine.currencyCode)
        return Result(json: record?.json ?? .null, effects: outcome.effects)
    }

    // MARK: Clock

    private func clock(_ arguments: Arguments) throws(LedgerError) -> Result {
        var effects: [Effect] = []
        var fired: Int64?
        if let text = arguments["advance"] {
            guard let duration = ClockDuration(text) else {
                return .failure(.invalidArgument,
                                "'\(text)' is not a duration (examples: 30s, 5m, 2h, 3d, 1w, 1mo, 1y, P1M, PT30S)")
            }
            let outcome = try engine.advanceClock(by: duration)
            // Refused past the end of the clock's range: said, not answered as a move by nothing.
            guard outcome.code == .ok else { return failure(outcome) }
            effects = outcome.effects
            fired = Int64(outcome.value)
        }
        if let text = arguments["rate"] {
            guard let rate = TimeRate(name: text) else {
                return .failure(.invalidArgument,
                                "unknown time rate '\(text)' (known: \(TimeRate.allCases.map(\.name).joined(separator: ", ")))")
            }
            effects += try engine.updateSwitches { $0.timeRate = rate }
        }
        var members: [(String, JSONValue)] = [
            ("now", .string(RFC3339.string(milliseconds: engine.clock.now()))),
            ("offsetMilliseconds", .int(engine.clock.offsetMilliseconds)),
            ("rate", .string(engine.clock.rate.name)),
            ("rateValue", .int(Int64(engine.clock.rate.rawValue))),
            ("nextEvent", .optional(try engine.nextEventDate().map { RFC3339.string(milliseconds: $0) })),
        ]
        if let fired { members.append(("firedEvents", .int(fired))) }
        return Result(json: .object(members), effects: effects)
    }

    // MARK: Read-outs and clear

    private func entitlements(_ arguments: Arguments) throws(LedgerError) -> Result {
        guard case .value(let app?) = app(arguments, required: true) else { return failureOf(app(arguments, required: true)) }
        guard case .value(let uid) = uid(arguments) else { return .failure(.invalidArgument, "uid is not a number") }
        return Result(json: .array(try signed(try engine.entitlements(uid: uid ?? 0, app: app)).map(\.json)))
    }

    private func history(_ arguments: Arguments) throws(LedgerError) -> Result {
        guard case .value(let app) = app(arguments, required: false) else { return failureOf(app(arguments, required: false)) }
        guard case .value(let uid) = uid(arguments, default: nil) else { return .failure(.invalidArgument, "uid is not a number") }
        if let product = arguments["product"], let app, engine.product(app: app, id: product) == nil {
            return .failure(.invalidArgument, "product \(product) is not in the catalogue of \(app)")
        }
        return Result(json: .array(try signed(try engine.history(uid: uid, app: app, productID: arguments["product"])).map(\.json)))
    }

    private func clear(_ arguments: Arguments) throws(LedgerError) -> Result {
        if arguments["id"] != nil {
            // One transaction and its children (SKTestSession.deleteTransaction): answered with it as it was.
            let parsed = transactionID(arguments, command: "clear")
            guard case .value(let id) = parsed else { return failureOf(parsed) }
            let before = try engine.store.transaction(id: id)
            let outcome = try engine.deleteTransaction(id: id)
            guard outcome.code == .ok else { return failure(outcome) }
            return Result(json: .object([("deletedTransactions", .int(Int64(outcome.value))), ("transaction", before?.json ?? .null)]), effects: outcome.effects)
        }
        guard case .value(let app) = app(arguments, required: false) else { return failureOf(app(arguments, required: false)) }
        guard case .value(let uid) = uid(arguments, default: nil) else { return .failure(.invalidArgument, "uid is not a number") }
        let outcome = try engine.clear(uid: uid, app: app)
        return Result(json: .object([("deletedTransactions", .int(Int64(outcome.value)))]), effects: outcome.effects)
    }
}
