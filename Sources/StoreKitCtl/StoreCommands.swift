import FoundationEssentials
import StoreKitWire

// The simulated store's commands (what Xcode's SKTestSession can do), one type per command.
// Each turns its command line into `key=value` arguments for the daemon's control plane.

/// Columns of a transaction listing.
let transactionColumns: [(title: String, key: String)] = [
    ("id", "transactionIdentifier"), ("uid", "uid"), ("product", "productIdentifier"), ("state", "state"),
    ("original", "originalTransactionIdentifier"), ("finished", "finished"), ("date", "transactionDate"),
    ("expires", "expiresDate"), ("revoked", "revocationDate"),
]

/// Names a subscription: `TRANSACTION` (any of its transactions) or `APP PRODUCT [--uid N]`.
private func subscriptionArguments(_ list: inout ArgumentList, uid: String? = nil) throws(UsageError) -> [String] {
    var uid = uid
    if uid == nil { uid = try list.number("--uid") }
    guard let first = list.optionalPositional() else { throw UsageError("TRANSACTION or APP PRODUCT is required") }
    if let second = list.optionalPositional() {
        var arguments = ["app=\(first)", "product=\(second)"]
        if let uid { arguments.append("uid=\(uid)") }
        return arguments
    }
    guard UInt64(first) != nil else { throw UsageError("'\(first)' is not a transaction id; to name a subscription by product give APP PRODUCT") }
    guard uid == nil else { throw UsageError("--uid goes with APP PRODUCT, not with a TRANSACTION") }
    return ["id=\(first)"]
}

/// `storekitctl approve TRANSACTION`.
struct ApproveCommand: Subcommand {
    static let name = "approve"
    static let summary = "approve an Ask to Buy request (deferred → purchased)"
    static let usage = """
        Usage: storekitctl approve TRANSACTION [-o json]

        Approves the Ask to Buy request of a deferred transaction, as a parent would: it becomes
        purchased and the app's observers receive it.
        """
    let id: String
    init(_ arguments: inout ArgumentList) throws(UsageError) { id = try arguments.transactionID() }
    var request: (command: ControlCommand, arguments: [String]) { (.approve, ["id=\(id)"]) }
    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}

/// `storekitctl decline TRANSACTION`.
struct DeclineCommand: Subcommand {
    static let name = "decline"
    static let summary = "decline an Ask to Buy request (deferred → failed)"
    static let usage = """
        Usage: storekitctl decline TRANSACTION [-o json]

        Declines the Ask to Buy request of a deferred transaction: it fails with paymentCancelled (2).
        Unanswered requests lapse the same way after a day of store time.
        """
    let id: String
    init(_ arguments: inout ArgumentList) throws(UsageError) { id = try arguments.transactionID() }
    var request: (command: ControlCommand, arguments: [String]) { (.decline, ["id=\(id)"]) }
    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}

/// `storekitctl resolve TRANSACTION`.
struct ResolveCommand: Subcommand {
    static let name = "resolve"
    static let summary = "resolve an interrupted purchase or a billing issue"
    static let usage = """
        Usage: storekitctl resolve TRANSACTION [-o json]

        Resolves the issue of a transaction, as the buyer would:
          - an interrupted purchase (failed): a new purchased transaction follows, whose original is
            the failed one;
          - a subscription in billing retry or grace period (any of its transactions): it renews.
        Prints the new transaction.
        """
    let id: String
    init(_ arguments: inout ArgumentList) throws(UsageError) { id = try arguments.transactionID() }
    var request: (command: ControlCommand, arguments: [String]) { (.resolve, ["id=\(id)"]) }
    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}

/// `storekitctl refund TRANSACTION [--reason N]`.
struct RefundCommand: Subcommand {
    static let name = "refund"
    static let summary = "refund a purchase (revocation date and reason, entitlement revoked)"
    static let usage = """
        Usage: storekitctl refund TRANSACTION [--reason N] [-o json]

        Refunds a purchased (or restored) transaction: it gets a revocation date (now on the store
        clock) and reason (--reason: 0 other, the default; 1 developer issue), a subscription whose
        current transaction it is ends, and the app's observers receive
        paymentQueue(_:didRevokeEntitlementsForProductIdentifiers:).
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        let reason = try list.number("--reason")
        arguments = ["id=\(try list.transactionID())"]
        if let reason { arguments.append("reason=\(reason)") }
    }
    var request: (command: ControlCommand, arguments: [String]) { (.refund, arguments) }
    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}

/// `storekitctl expire`.
struct ExpireCommand: Subcommand {
    static let name = "expire"
    static let summary = "expire an auto-renewable subscription now"
    static let usage = """
        Usage: storekitctl expire TRANSACTION [-o json]
               storekitctl expire APP PRODUCT [--uid N] [-o json]

        Ends a subscription now (SKTestSession.expireSubscription): no more renewals. Name it by any
        of its transactions, or by APP, PRODUCT and buyer (--uid, default 0).
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) { arguments = try subscriptionArguments(&list) }
    var request: (command: ControlCommand, arguments: [String]) { (.expire, arguments) }
    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}

/// `storekitctl renew`.
struct RenewCommand: Subcommand {
    static let name = "renew"
    static let summary = "force the renewal of a subscription now"
    static let usage = """
        Usage: storekitctl renew TRANSACTION [-o json]
               storekitctl renew APP PRODUCT [--uid N] [-o json]

        Renews a subscription at once (SKTestSession.forceRenewalOfSubscription): the current period
        ends, the next starts now, and the app's observers receive a new purchased transaction
        linked to the original. Prints it.
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) { arguments = try subscriptionArguments(&list) }
    var request: (command: ControlCommand, arguments: [String]) { (.renew, arguments) }
    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}

/// `storekitctl auto-renew on|off`.
struct AutoRenewCommand: Subcommand {
    static let name = "auto-renew"
    static let summary = "turn a subscription's auto-renew on or off"
    static let usage = """
        Usage: storekitctl auto-renew on|off TRANSACTION [-o json]
               storekitctl auto-renew on|off APP PRODUCT [--uid N] [-o json]

        With auto-renew off the subscription expires at the end of its period instead of renewing.
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        let uid = try list.number("--uid")
        let on = try list.onOff("auto-renew")
        arguments = ["enabled=\(on ? "on" : "off")"] + (try subscriptionArguments(&list, uid: uid))
    }
    var request: (command: ControlCommand, arguments: [String]) { (.autoRenew, arguments) }
    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}

/// `storekitctl price-increase`.
struct PriceIncreaseCommand: Subcommand {
    static let name = "price-increase"
    static let summary = "raise a subscription's price so that it needs the subscriber's consent"
    static let usage = """
        Usage: storekitctl price-increase TRANSACTION [-o json]
               storekitctl price-increase APP PRODUCT [--uid N] [-o json]

        Raises the price of a renewing subscription in a way that needs the subscriber's consent:
        the app's observers are told (paymentQueueShouldShowPriceConsent(_:); again at each
        launch while unanswered), its renewal info says priceIncreaseStatus 0. Answer with
        price-consent; unanswered at the renewal, the subscription expires (expirationIntent 3).
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        arguments = try subscriptionArguments(&list)
    }
    var request: (command: ControlCommand, arguments: [String]) { (.priceIncrease, arguments) }
    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}

/// `storekitctl price-consent`.
struct PriceConsentCommand: Subcommand {
    static let name = "price-consent"
    static let summary = "the subscriber agrees to or declines a price increase"
    static let usage = """
        Usage: storekitctl price-consent yes|no TRANSACTION [-o json]
               storekitctl price-consent yes|no APP PRODUCT [--uid N] [-o json]

        The subscriber's answer to a price increase (price-increase), as the App Store's consent
        sheet takes it: yes renews at the next renewal (priceIncreaseStatus 1); no turns auto-renew
        off, so the subscription expires at the end of its period (expirationIntent 3).
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        let uid = try list.number("--uid")
        let answer = try list.positional("yes|no")
        switch answer.lowercased() {
        case "yes": arguments = ["agreed=yes"]
        case "no": arguments = ["agreed=no"]
        default: throw UsageError("price-consent takes yes or no, not '\(answer)'")
        }
        arguments += try subscriptionArguments(&list, uid: uid)
    }
    var request: (command: ControlCommand, arguments: [String]) { (.priceConsent, arguments) }
    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}

/// `storekitctl subscriptions`.
struct SubscriptionsCommand: Subcommand {
    static let name = "subscriptions"
    static let summary = "list auto-renewable subscriptions and their renewal state"
    static let usage = """
        Usage: storekitctl subscriptions [APP] [--uid N] [-o json]

        Lists each buyer's subscription per group: state (subscribed, expired, inBillingRetryPeriod,
        inGracePeriod, revoked), expiry, auto-renew and the next scheduled event.
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        if let uid = try list.number("--uid") { arguments.append("uid=\(uid)") }
        if let app = list.optionalPositional() { arguments.append("app=\(app)") }
    }
    var request: (command: ControlCommand, arguments: [String]) { (.subscriptions, arguments) }
    func renderTable(_ json: JSONValue) -> String {
        Table(columns: [("original", "originalTransactionIdentifier"), ("uid", "uid"), ("product", "productIdentifier"),
                        ("state", "state"), ("expires", "expiresDate"), ("renew", "willAutoRenew"),
                        ("renewals", "renewalCount"), ("next event", "nextEventDate")]).render(json)
    }
}

/// A switch command: `NAME on|off`.
private func switchesTable(_ json: JSONValue) -> String { renderKeyValues(json) }

/// `storekitctl billing-issue on|off [--grace on|off]`.
struct BillingIssueCommand: Subcommand {
    static let name = "billing-issue"
    static let summary = "make renewals fail with a billing issue (billing retry, grace period)"
    static let usage = """
        Usage: storekitctl billing-issue on|off [--grace on|off] [-o json]

        While on, renewals fail: the subscription enters billing retry (no access) — or, with
        --grace on, a grace period first (access continues) — until `storekitctl resolve` or the end
        of billing retry (then it expires). Lengths follow the clock's time rate.
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        if let grace = try list.option("--grace") {
            guard grace == "on" || grace == "off" else { throw UsageError("--grace takes on or off, not '\(grace)'") }
            arguments.append("grace=\(grace)")
        }
        arguments.insert("enabled=\(try list.onOff("billing-issue") ? "on" : "off")", at: 0)
    }
    var request: (command: ControlCommand, arguments: [String]) { (.billingIssue, arguments) }
    func renderTable(_ json: JSONValue) -> String { switchesTable(json) }
}

/// `storekitctl interrupted on|off`.
struct InterruptedCommand: Subcommand {
    static let name = "interrupted"
    static let summary = "interrupt purchases (failed until resolved)"
    static let usage = """
        Usage: storekitctl interrupted on|off [-o json]

        While on, every purchase is interrupted: it fails, and `storekitctl resolve TRANSACTION`
        completes it later as a new purchased transaction. Off: no purchase is (whatever the
        catalogue's _interruptedPurchases says); `storekitctl reset` restores the catalogue's list.
        """
    let on: Bool
    init(_ list: inout ArgumentList) throws(UsageError) { on = try list.onOff("interrupted") }
    var request: (command: ControlCommand, arguments: [String]) { (.interrupted, ["enabled=\(on ? "on" : "off")"]) }
    func renderTable(_ json: JSONValue) -> String { switchesTable(json) }
}

/// `storekitctl ask-to-buy on|off [--uid N]`.
struct AskToBuyCommand: Subcommand {
    static let name = "ask-to-buy"
    static let summary = "require a parent's approval for purchases [--uid N]"
    static let usage = """
        Usage: storekitctl ask-to-buy on|off [--uid N] [-o json]

        While on, purchases become deferred until `storekitctl approve` or `decline` (or they lapse
        after a day of store time); a repeated request for the same product joins the open one.
        --uid sets it for one account; without it, for every account. Payments with
        simulatesAskToBuyInSandbox are deferred whatever this says.
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        let uid = try list.number("--uid")
        arguments = ["enabled=\(try list.onOff("ask-to-buy") ? "on" : "off")"]
        if let uid { arguments.append("uid=\(uid)") }
    }
    var request: (command: ControlCommand, arguments: [String]) { (.askToBuy, arguments) }
    func renderTable(_ json: JSONValue) -> String { switchesTable(json) }
}

/// `storekitctl fail-next CODE [--count N]`.
struct FailNextCommand: Subcommand {
    static let name = "fail-next"
    static let summary = "fail the next purchases with an SKError code [--count N|all]"
    static let usage = """
        Usage: storekitctl fail-next CODE [--count N|all] [-o json]

        The next N purchases (default 1; `all` until turned off; 0 turns it off) fail with the
        SKError.Code CODE, given as a number (0…20) or a name (unknown, paymentCancelled,
        paymentInvalid, paymentNotAllowed, storeProductNotAvailable, …).
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        if let count = try list.option("--count") {
            guard count == "all" || UInt32(count) != nil else { throw UsageError("--count needs a number or 'all', not '\(count)'") }
            arguments.append("count=\(count)")
        }
        arguments.insert("code=\(try list.positional("CODE"))", at: 0)
    }
    var request: (command: ControlCommand, arguments: [String]) { (.failNext, arguments) }
    func renderTable(_ json: JSONValue) -> String { switchesTable(json) }
}

/// `storekitctl switches`.
struct SwitchesCommand: Subcommand {
    static let name = "switches"
    static let summary = "show the test switches in effect"
    static let usage = """
        Usage: storekitctl switches [-o json]

        Shows the switches set with storekitctl; null (-) means "as each app's catalogue says".
        """
    init(_ arguments: inout ArgumentList) throws(UsageError) {}
    var request: (command: ControlCommand, arguments: [String]) { (.switches, []) }
    func renderTable(_ json: JSONValue) -> String { switchesTable(json) }
}

/// `storekitctl reset`.
struct ResetCommand: Subcommand {
    static let name = "reset"
    static let summary = "drop every switch override (SKTestSession.resetToDefaultState)"
    static let usage = """
        Usage: storekitctl reset [-o json]

        Clears every override set with storekitctl (Ask to Buy, fail-next, interrupted, billing
        issue, storefront, time rate): the catalogues' settings apply again. Transactions and the
        clock's offset are kept (use `clear` for transactions; store time never goes back).
        """
    init(_ arguments: inout ArgumentList) throws(UsageError) {}
    var request: (command: ControlCommand, arguments: [String]) { (.reset, []) }
    func renderTable(_ json: JSONValue) -> String { switchesTable(json) }
}

/// `storekitctl storefront [show | set CODE]`.
struct StorefrontCommand: Subcommand {
    static let name = "storefront"
    static let summary = "show or set the storefront (set CODE, e.g. GBR)"
    static let usage = """
        Usage: storekitctl storefront [show] [-o json]
               storekitctl storefront set CODE [-o json]

        Sets the App Store storefront (three letters, ISO 3166-1 alpha-3). Connected apps receive
        paymentQueueDidChangeStorefront(_:); prices are shown in the storefront's currency.
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        switch list.optionalPositional() {
        case nil, "show": break
        case "set": arguments = ["set=\(try list.positional("CODE"))"]
        case let other?: throw UsageError("storefront takes show or set CODE, not '\(other)'")
        }
    }
    var request: (command: ControlCommand, arguments: [String]) { (.storefront, arguments) }
    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}

/// `storekitctl promote APP PRODUCT [--uid N]`.
struct PromoteCommand: Subcommand {
    static let name = "promote"
    static let summary = "offer a promoted in-app purchase to the app's observers"
    static let usage = """
        Usage: storekitctl promote APP PRODUCT [--uid N] [-o json]

        As if the buyer (--uid, default 0) tapped the product on the App Store: the app's connected
        observers are asked paymentQueue(_:shouldAddStorePayment:for:). An answer of true adds the
        payment; false leaves it to the app to add the payment later.
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        let uid = try list.number("--uid")
        arguments = ["app=\(try list.positional("APP"))", "product=\(try list.positional("PRODUCT"))"]
        if let uid { arguments.append("uid=\(uid)") }
    }
    var request: (command: ControlCommand, arguments: [String]) { (.promote, arguments) }
    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}

/// `storekitctl clock show | advance DURATION | rate NAME`.
struct ClockCommand: Subcommand {
    static let name = "clock"
    static let summary = "show the store clock, advance it, or set its time rate"
    static let usage = """
        Usage: storekitctl clock [show] [-o json]
               storekitctl clock advance DURATION [-o json]
               storekitctl clock rate NAME [-o json]

        The store clock is real time plus an offset that only grows; every transaction date and
        scheduled event (renewals, expiries, grace and billing retry ends, Ask to Buy lapses) uses
        it. `advance` moves it forward and fires whatever fell due, before it returns.
        DURATION: 30s, 5m, 2h, 3d, 1w, 1mo, 1y, 1h30m, or ISO 8601 (P1M, P3D, PT30S).
        `rate` sets how long subscription periods last, as SKTestSession.TimeRate: realTime,
        monthlyRenewalEveryHour, monthlyRenewalEveryThirtyMinutes, monthlyRenewalEveryFifteenMinutes,
        monthlyRenewalEveryFiveMinutes, monthlyRenewalEveryThirtySeconds, oneRenewalEveryFifteenMinutes,
        oneRenewalEveryFiveMinutes, oneRenewalEveryMinute, oneRenewalEveryThirtySeconds,
        oneRenewalEveryTenSeconds, oneRenewalEveryTwoSeconds (or the raw value, e.g. 15).
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        switch list.optionalPositional() {
        case nil, "show": break
        case "advance": arguments = ["advance=\(try list.positional("DURATION"))"]
        case "rate": arguments = ["rate=\(try list.positional("NAME"))"]
        case let other?: throw UsageError("clock takes show, advance DURATION or rate NAME, not '\(other)'")
        }
    }
    var request: (command: ControlCommand, arguments: [String]) { (.clock, arguments) }
    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}

/// `storekitctl entitlements APP [--uid N]`.
struct EntitlementsCommand: Subcommand {
    static let name = "entitlements"
    static let summary = "list a buyer's current entitlements (StoreKit 2 currentEntitlements)"
    static let usage = """
        Usage: storekitctl entitlements APP [--uid N] [-o json]

        The transactions that entitle the buyer (--uid, default 0) now: the latest unrevoked one of
        each non-consumable and non-renewing subscription, and the current one of each subscription
        group that is subscribed or in its grace period.
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        let uid = try list.number("--uid")
        arguments = ["app=\(try list.positional("APP"))"]
        if let uid { arguments.append("uid=\(uid)") }
    }
    var request: (command: ControlCommand, arguments: [String]) { (.entitlements, arguments) }
    func renderTable(_ json: JSONValue) -> String { Table(columns: transactionColumns).render(json) }
}

/// `storekitctl history [APP] [--uid N] [--product P]`.
struct HistoryCommand: Subcommand {
    static let name = "history"
    static let summary = "list every transaction, finished or not [APP] [--uid N] [--product P]"
    static let usage = """
        Usage: storekitctl history [APP] [--uid N] [--product PRODUCT] [-o json]

        Lists the transaction history, oldest first: purchases, renewals, restores, failures, with
        their originals, expiry and revocation dates.
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        if let uid = try list.number("--uid") { arguments.append("uid=\(uid)") }
        if let product = try list.option("--product") { arguments.append("product=\(product)") }
        if let app = list.optionalPositional() { arguments.append("app=\(app)") }
    }
    var request: (command: ControlCommand, arguments: [String]) { (.history, arguments) }
    func renderTable(_ json: JSONValue) -> String { Table(columns: transactionColumns).render(json) }
}

/// `storekitctl clear (APP | --all) [--uid N]`.
struct ClearCommand: Subcommand {
    static let name = "clear"
    static let summary = "delete transactions and subscriptions (APP, --all or --transaction ID)"
    static let usage = """
        Usage: storekitctl clear APP [--uid N] [-o json]
               storekitctl clear --all [--uid N] [-o json]
               storekitctl clear --transaction TRANSACTION [-o json]

        Deletes the transactions, subscriptions and open requests of APP (or of every app with
        --all), of one buyer with --uid (SKTestSession.clearTransactions). Connected observers
        receive removedTransactions for what was still unfinished. With --transaction, deletes that
        one transaction (SKTestSession.deleteTransaction); its subscription, if any, stays.
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        if let transaction = try list.option("--transaction") {
            guard UInt64(transaction) != nil else { throw UsageError("--transaction needs a transaction id, not '\(transaction)'") }
            guard list.first == nil else { throw UsageError("--transaction goes alone") }
            arguments = ["id=\(transaction)"]
            return
        }
        let all = list.flag("--all")
        if let uid = try list.number("--uid") { arguments.append("uid=\(uid)") }
        let app = list.optionalPositional()
        switch (app, all) {
        case (let app?, false): arguments.append("app=\(app)")
        case (nil, true): break
        case (_?, true): throw UsageError("give APP or --all, not both")
        case (nil, false): throw UsageError("clear needs APP, or --all to clear every app")
        }
    }
    var request: (command: ControlCommand, arguments: [String]) { (.clear, arguments) }
    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}
