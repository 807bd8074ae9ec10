import Foundation
import StoreKitTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Auto-renewable subscriptions on the store clock, end to end: the real daemon, the example app
/// observing, storekitctl moving time with `clock advance`.
@Suite struct StoreFlowSubscriptionTests {
    /// The sample's monthly subscription starts with a free week (its introductory offer), then
    /// renews monthly: three advances of a month are three renewals.
    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func monthlySubscriptionRenewsThreeTimesAndTheAppSeesEachRenewal() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let app = try daemon.observer()

        let purchase = try ListedTransaction(json: daemon.ctlOK(["buy", Sample.app, Sample.monthly]))
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == purchase.id && $0["granted"] as? Bool == true },
                "\(app.transcript)")
        for month in 1...3 {
            let clock = try daemon.ctlObject(["clock", "advance", "1mo"])
            #expect(clock["firedEvents"] as? Int == 1, "month \(month): \(clock)")
        }
        let renewals = try daemon.history().filter { $0[string: "transactionIdentifier"] != purchase.id }
        try #require(renewals.count == 3, "\(renewals)")
        for renewal in renewals {
            #expect(renewal[string: "state"] == "purchased")
            #expect(renewal[string: "originalTransactionIdentifier"] == purchase.id, "linked to the original")
            #expect(renewal[string: "expiresDate"] != nil)
        }
        // Each renewal reached the app as a new purchased transaction, which it granted and finished.
        for renewal in renewals {
            let id = renewal[string: "transactionIdentifier"] ?? ""
            #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == id && $0[string: "state"] == "purchased" },
                    "renewal \(id) not seen: \(app.transcript)")
            #expect(app.updates(of: id).first?[string: "originalTransactionIdentifier"] == purchase.id)
        }
        #expect(eventually { (try? daemon.transactions(["--unfinished"]).isEmpty) == true })

        // Periods follow each other: each renewal starts where the previous period ended.
        let all = try daemon.history()
        for (previous, next) in zip(all, all.dropFirst()) {
            #expect(next[string: "transactionDate"] == previous[string: "expiresDate"], "\(previous) → \(next)")
        }
        let subscription = try #require(try daemon.ctlArray(["subscriptions", Sample.app]).first)
        #expect(subscription["renewalCount"] as? Int == 3)
        #expect(subscription[string: "state"] == "subscribed")
        #expect(subscription[string: "latestTransactionIdentifier"] == renewals.last?[string: "transactionIdentifier"])
    }

    @Test func autoRenewOffExpiresAtTheEndOfThePeriod() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()

        let purchase = try daemon.buyOutsideApp(Sample.yearly)
        let off = try daemon.ctlObject(["auto-renew", "off", purchase.id])
        #expect(off["willAutoRenew"] as? Bool == false)
        #expect(try daemon.ctlArray(["entitlements", Sample.app]).count == 1, "still entitled until the period ends")

        try daemon.ctlOK(["clock", "advance", "P1Y"])
        #expect(try daemon.history().count == 1, "no renewal")
        let subscription = try #require(try daemon.ctlArray(["subscriptions", Sample.app]).first)
        #expect(subscription[string: "state"] == "expired")
        #expect(try daemon.ctlArray(["entitlements", Sample.app]).isEmpty)

        // Buying again resubscribes: same original transaction, no second introductory offer.
        let again = try daemon.buyOutsideApp(Sample.yearly)
        #expect(again.originalTransactionIdentifier == purchase.id)
        #expect(try daemon.ctlArray(["subscriptions", Sample.app]).first?[string: "state"] == "subscribed")
    }

    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func forcedRenewalAndExpiryOnDemand() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let app = try daemon.observer()

        let purchase = try daemon.buyOutsideApp(Sample.yearly, uid: 501)
        let renewal = try daemon.ctlObject(["renew", Sample.app, Sample.yearly, "--uid", "501"])
        let renewalID = try #require(renewal[string: "transactionIdentifier"])
        #expect(renewalID != purchase.id)
        #expect(renewal[string: "originalTransactionIdentifier"] == purchase.id)
        #expect(renewal["uid"] as? Int == 501)
        // The observer runs as this test's uid, not 501: it must not see uid 501's renewal.
        let mine = try daemon.buyOutsideApp(Sample.coins)
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == mine.id })
        #expect(app.updates(of: renewalID).isEmpty)

        let expired = try daemon.ctlObject(["expire", renewalID])
        #expect(expired[string: "state"] == "expired")
        #expect(try daemon.ctlArray(["entitlements", Sample.app, "--uid", "501"]).isEmpty)
        let again = try daemon.ctl(["expire", Sample.app, Sample.yearly, "--uid", "501"])
        #expect(again.status == 1 && again.stderr.contains("already expired"), "\(again.stderr)")
        try daemon.ctlOK(["clock", "advance", "2y"])
        #expect(try daemon.history([Sample.app, "--uid", "501"]).count == 2, "an expired subscription never renews")
    }

    /// Billing issue with a grace period: access continues during grace, stops in billing retry,
    /// and `resolve` renews; without resolution billing retry ends in expiry.
    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func billingRetryAndGracePeriod() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let app = try daemon.observer()

        let purchase = try daemon.buyOutsideApp(Sample.yearly)
        let switches = try daemon.ctlObject(["billing-issue", "on", "--grace", "on"])
        #expect(switches["billingIssue"] as? Bool == true && switches["billingGracePeriod"] as? Bool == true)

        try daemon.ctlOK(["clock", "advance", "1y"])
        var subscription = try #require(try daemon.ctlArray(["subscriptions", Sample.app]).first)
        #expect(subscription[string: "state"] == "inGracePeriod", "\(subscription)")
        #expect(subscription[string: "gracePeriodExpiresDate"] != nil)
        #expect(try daemon.ctlArray(["entitlements", Sample.app]).count == 1, "entitled during the grace period")

        try daemon.ctlOK(["clock", "advance", "17d"])
        subscription = try #require(try daemon.ctlArray(["subscriptions", Sample.app]).first)
        #expect(subscription[string: "state"] == "inBillingRetryPeriod", "\(subscription)")
        #expect(try daemon.ctlArray(["entitlements", Sample.app]).isEmpty, "no access in billing retry")
        #expect(try daemon.history().count == 1, "no renewal while the billing issue lasts")

        let recovered = try daemon.ctlObject(["resolve", purchase.id])
        let recoveredID = try #require(recovered[string: "transactionIdentifier"])
        #expect(recovered[string: "originalTransactionIdentifier"] == purchase.id)
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == recoveredID && $0[string: "state"] == "purchased" },
                "\(app.transcript)")
        #expect(try daemon.ctlArray(["subscriptions", Sample.app]).first?[string: "state"] == "subscribed")

        // Without resolution: billing retry runs out (60 days) and the subscription expires.
        try daemon.ctlOK(["billing-issue", "on", "--grace", "off"])
        try daemon.ctlOK(["clock", "advance", "1y"])
        #expect(try daemon.ctlArray(["subscriptions", Sample.app]).first?[string: "state"] == "inBillingRetryPeriod")
        try daemon.ctlOK(["clock", "advance", "61d"])
        #expect(try daemon.ctlArray(["subscriptions", Sample.app]).first?[string: "state"] == "expired")
        let resolveLate = try daemon.ctl(["resolve", recoveredID])
        #expect(resolveLate.status == 1, "billing retry is over: nothing to resolve")
    }

    /// Within a group, an upgrade (higher level) starts at once; a downgrade waits for the renewal.
    @Test func upgradeIsImmediateAndDowngradeWaitsForTheRenewal() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()

        // Yearly is level 2, monthly level 1 (the higher level of service).
        let yearly = try daemon.buyOutsideApp(Sample.yearly)
        let upgrade = try daemon.buyOutsideApp(Sample.monthly)
        #expect(upgrade.originalTransactionIdentifier == yearly.id, "one subscription per group, one original")
        var subscription = try #require(try daemon.ctlArray(["subscriptions", Sample.app]).first)
        #expect(subscription[string: "productIdentifier"] == Sample.monthly)
        #expect(subscription[string: "latestTransactionIdentifier"] == upgrade.id)
        // The upgrade bought no introductory offer: the group was used before.
        let upgraded = try #require(try daemon.history().last)
        #expect(upgraded[string: "expiresDate"] != nil)

        let downgrade = try daemon.buyOutsideApp(Sample.yearly)
        subscription = try #require(try daemon.ctlArray(["subscriptions", Sample.app]).first)
        #expect(subscription[string: "productIdentifier"] == Sample.monthly, "a downgrade waits")
        #expect(subscription[string: "autoRenewProductIdentifier"] == Sample.yearly)
        #expect(downgrade.originalTransactionIdentifier == yearly.id)

        let clock = try daemon.ctlObject(["clock", "advance", "1mo"])
        #expect(clock["firedEvents"] as? Int == 1)
        subscription = try #require(try daemon.ctlArray(["subscriptions", Sample.app]).first)
        #expect(subscription[string: "productIdentifier"] == Sample.yearly, "the renewal is the downgrade")
        let renewal = try #require(try daemon.history().last)
        #expect(renewal[string: "productIdentifier"] == Sample.yearly)
        #expect(renewal[string: "originalTransactionIdentifier"] == yearly.id)
    }

    /// The introductory offer (a free week) is used once per group: a resubscription pays from the start.
    @Test func introductoryOfferOncePerGroup() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()

        let first = try daemon.ctlObject(["buy", Sample.app, Sample.monthly])
        let week = try #require(duration(from: first[string: "transactionDate"], to: first[string: "expiresDate"]))
        #expect(abs(week - 7 * 86_400) < 1, "free week: \(first)")
        try daemon.ctlOK(["expire", Sample.app, Sample.monthly])
        let second = try daemon.ctlObject(["buy", Sample.app, Sample.monthly])
        let month = try #require(duration(from: second[string: "transactionDate"], to: second[string: "expiresDate"]))
        #expect(month >= 28 * 86_400 && month <= 31 * 86_400, "a full month: \(second)")
        // Another buyer is still eligible.
        let other = try daemon.ctlObject(["buy", Sample.app, Sample.monthly, "--uid", "502"])
        #expect(duration(from: other[string: "transactionDate"], to: other[string: "expiresDate"]).map { abs($0 - 7 * 86_400) < 1 } == true)
    }

    /// A time rate compresses periods: monthly renewals every 30 s of store time.
    @Test func timeRateCompressesPeriods() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()

        let clock = try daemon.ctlObject(["clock", "rate", "monthlyRenewalEveryThirtySeconds"])
        #expect(clock[string: "rate"] == "monthlyRenewalEveryThirtySeconds" && clock["rateValue"] as? Int == 15)
        let yearly = try daemon.ctlObject(["buy", Sample.app, Sample.yearly])
        #expect(duration(from: yearly[string: "transactionDate"], to: yearly[string: "expiresDate"]) == 360, "a year is 6 minutes")
        let advanced = try daemon.ctlObject(["clock", "advance", "12m"])
        #expect(advanced["firedEvents"] as? Int == 2, "\(advanced)")
        #expect(try daemon.history().count == 3)
        let unknown = try daemon.ctl(["clock", "rate", "warpSpeed"])
        #expect(unknown.status == 1 && unknown.stderr.contains("unknown time rate"))
    }

    /// Scheduled events that fell due while the daemon was down fire when it starts again, and the
    /// app (which reconnects by itself) receives them.
    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func eventsDueWhileTheDaemonWasDownFireAfterRestart() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let app = try daemon.observer()

        try daemon.ctlOK(["clock", "rate", "oneRenewalEveryTwoSeconds"])
        let purchase = try daemon.ctlObject(["buy", Sample.app, Sample.yearly])
        let purchaseID = try #require(purchase[string: "transactionIdentifier"])
        let due = try #require(date(purchase[string: "expiresDate"]), "\(purchase)")
        daemon.stop()
        let stopped = Date()
        try #require(stopped < due, "the daemon took until after the renewal was due to stop: nothing to test")
        // The renewal falls due while the daemon is down.
        try #require(eventually { Date() > due })
        let restarted = Date()
        try daemon.start()
        // Stop the renewals at once, so that only those due during the downtime are counted.
        try daemon.ctlOK(["auto-renew", "off", purchaseID])

        let renewals = try daemon.history().filter { $0[string: "transactionIdentifier"] != purchaseID }
        try #require(!renewals.isEmpty, "nothing fired after the restart: \(daemon.log(tail: 30))")
        let first = try #require(renewals.first)
        let firstDate = try #require(date(first[string: "transactionDate"]))
        // Dated when it fell due (the end of the paid period, while the daemon was down), not when
        // the restarted daemon got to it.
        #expect(abs(firstDate.timeIntervalSince(due)) < 0.002, "dated \(firstDate), due \(due)")
        #expect(firstDate > stopped && firstDate < restarted,
                "the renewal fell due during the downtime (\(stopped) to \(restarted)), not at \(firstDate)")
        #expect(first[string: "originalTransactionIdentifier"] == purchaseID)
        let id = try #require(first[string: "transactionIdentifier"])
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == id }, "the app reconnected and got it: \(app.transcript)")
    }
}

// MARK: - Dates

func date(_ text: String?) -> Date? {
    guard let text else { return nil }
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.date(from: text)
}

/// Seconds between two RFC 3339 timestamps.
func duration(from start: String?, to end: String?) -> Double? {
    guard let start = date(start), let end = date(end) else { return nil }
    return end.timeIntervalSince(start)
}
