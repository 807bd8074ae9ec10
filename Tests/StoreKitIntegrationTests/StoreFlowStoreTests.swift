import Foundation
import StoreKitTestSupport
import Testing

/// Refunds, storefront, promoted purchases, entitlements, history, clear and reset end to end,
/// and the storekitctl contract of every store command (help, exit codes, errors).
@Suite struct StoreFlowStoreTests {
    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func refundsReachTheObserverAndMarkTheTransactions() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let app = try daemon.observer()

        let coins = try daemon.buyOutsideApp(Sample.coins)
        let levelPack = try daemon.buyOutsideApp(Sample.levelPack)
        let yearly = try daemon.buyOutsideApp(Sample.yearly)
        #expect(app.waitForUpdate { $0[string: "transactionIdentifier"] == yearly.id && $0["granted"] as? Bool == true })
        #expect(try daemon.ctlArray(["entitlements", Sample.app]).count == 2, "level pack and the subscription")

        for (transaction, reason) in [(coins, "0"), (levelPack, "1"), (yearly, "0")] {
            let refunded = try daemon.ctlObject(["refund", transaction.id, "--reason", reason])
            #expect(refunded[string: "revocationDate"] != nil)
            #expect(refunded["revocationReason"] as? Int == Int(reason))
            #expect(app.waitForOutput { output in
                events(output).contains {
                    $0[string: "event"] == "revoked" && ($0["productIdentifiers"] as? [String]) == [transaction.productIdentifier]
                }
            }, "no revocation of \(transaction.productIdentifier): \(app.transcript)")
        }
        #expect(try daemon.ctlArray(["entitlements", Sample.app]).isEmpty)
        #expect(try daemon.ctlArray(["subscriptions", Sample.app]).first?[string: "state"] == "revoked")
        try daemon.ctlOK(["clock", "advance", "2y"])
        #expect(try daemon.history().count == 3, "a refunded subscription does not renew")

        let twice = try daemon.ctl(["refund", coins.id])
        #expect(twice.status == 1 && twice.stderr.contains("already refunded"))
        let unknown = try daemon.ctl(["refund", "2000000000999999"])
        #expect(unknown.status == 1 && unknown.stderr.contains("does not exist"))
        // A restore skips refunded purchases.
        let restore = try daemon.app(["restore"], ledger: daemon.directory.file("restore-ledger"))
        #expect(updates(restore.stdout).filter { $0[string: "state"] == "restored" }.isEmpty, "\(restore.stdout)")
    }

    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func storefrontChangeAndPromotedPurchases() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let app = try daemon.observer()
        let deferring = try daemon.observer(extra: ["--app", Sample.app, "--promoted", "defer"])

        let storefront = try daemon.ctlObject(["storefront", "set", "GBR"])
        #expect(storefront[string: "storefront"] == "GBR" && storefront[string: "currencyCode"] == "GBP")
        #expect(app.waitForOutput { _ in app.events("storefrontChanged").contains { $0[string: "countryCode"] == "GBR" } },
                "\(app.transcript)")
        #expect(try daemon.ctlObject(["status"])[string: "storefront"] == "GBR")
        let products = try daemon.ctlArray(["products", Sample.app])
        #expect(products.allSatisfy { $0[string: "currencyCode"] == "GBP" })
        #expect(try daemon.ctl(["storefront", "set", "ATLANTIS"]).status == 1)

        // A promoted purchase: the accepting app adds the payment at once, the deferring one a bit
        // later; either way one purchase each, made by the app itself.
        let promoted = try daemon.ctlObject(["promote", Sample.app, Sample.levelPack])
        #expect(promoted[string: "productIdentifier"] == Sample.levelPack)
        #expect(app.waitForOutput { _ in !app.events("promoted").isEmpty }, "\(app.transcript)")
        #expect(deferring.waitForOutput { _ in !deferring.events("promotedAdded").isEmpty }, "\(deferring.transcript)")
        #expect(eventually {
            ((try? daemon.history())?.filter { $0[string: "productIdentifier"] == Sample.levelPack }.count ?? 0) == 2
        }, "both apps bought: \((try? daemon.history()) ?? [])")
        #expect(try daemon.ctl(["promote", Sample.app, "no.such.product"]).status == 1)
        #expect(try daemon.ctl(["promote", "no.such.app", Sample.levelPack]).status == 1)

        // Reset drops the override: back to the configured storefront, announced again.
        let reset = try daemon.ctlObject(["reset"])
        #expect(reset[string: "storefront"] == "USA")
        #expect(app.waitForOutput { _ in app.events("storefrontChanged").contains { $0[string: "countryCode"] == "USA" } })
    }

    @Test func entitlementsHistoryAndClear() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()

        let coins = try daemon.buyOutsideApp(Sample.coins)
        let levelPack = try daemon.buyOutsideApp(Sample.levelPack)
        let season = try daemon.buyOutsideApp(Sample.seasonPass)
        let monthly = try daemon.buyOutsideApp(Sample.monthly)
        let other = try daemon.buyOutsideApp(Sample.levelPack, uid: 504)

        let entitlements = try daemon.ctlArray(["entitlements", Sample.app]).compactMap { $0[string: "transactionIdentifier"] }
        #expect(entitlements == [levelPack.id, season.id, monthly.id], "no consumables, no other buyers")
        #expect(try daemon.ctlArray(["entitlements", Sample.app, "--uid", "504"]).compactMap { $0[string: "transactionIdentifier"] } == [other.id])

        let history = try daemon.history([Sample.app, "--uid", "0"]).compactMap { $0[string: "transactionIdentifier"] }
        #expect(history == [coins.id, levelPack.id, season.id, monthly.id])
        #expect(try daemon.history([Sample.app, "--product", Sample.coins]).count == 1)
        #expect(try daemon.ctl(["history", "no.such.app"]).status == 1)
        #expect(try daemon.ctl(["history", Sample.app, "--product", "nope"]).status == 1)

        let cleared = try daemon.ctlObject(["clear", Sample.app, "--uid", "0"])
        #expect(cleared["deletedTransactions"] as? Int == 4)
        #expect(try daemon.history().compactMap { $0[string: "transactionIdentifier"] } == [other.id])
        #expect(try daemon.ctlArray(["subscriptions", Sample.app]).isEmpty)
        #expect(try daemon.ctl(["clear"]).status == 64, "clear needs APP or --all")
        try daemon.ctlOK(["clear", "--all"])
        #expect(try daemon.history().isEmpty)
        // Ids and sequence numbers never go back after a clear.
        let after = try daemon.buyOutsideApp(Sample.coins)
        #expect(UInt64(after.id)! > UInt64(other.id)!)
    }

    @Test func everyStoreCommandHasHelpAndExitCodes() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()

        let commands = ["approve", "decline", "refund", "expire", "renew", "auto-renew", "billing-issue", "resolve",
                        "fail-next", "interrupted", "ask-to-buy", "storefront", "promote", "clock", "entitlements",
                        "history", "subscriptions", "switches", "clear", "reset"]
        let global = try daemon.ctl(["--help"])
        for command in commands {
            let help = try daemon.ctl([command, "--help"])
            #expect(help.status == 0 && help.stdout.contains("Usage: storekitctl \(command)"), "\(command) --help")
            #expect(global.stdout.contains("  \(command) "), "\(command) in the global help")
        }
        // Usage errors: 64.
        for arguments in [["approve"], ["refund", "abc"], ["auto-renew", "maybe", "1"], ["clock", "backwards"],
                          ["storefront", "move"], ["ask-to-buy"], ["expire"], ["interrupted", "sometimes"]] {
            #expect(try daemon.ctl(arguments).status == 64, "\(arguments)")
        }
        // Failures: 1, with a clear message.
        let cases: [([String], String)] = [
            (["expire", Sample.app, "no.such.product"], "not in the catalogue"),
            (["expire", "no.such.app", Sample.monthly], "not registered"),
            (["renew", Sample.app, Sample.monthly], "has no subscription"),
            (["expire", Sample.app, Sample.coins], "not an auto-renewable subscription"),
            (["entitlements", "no.such.app"], "not registered"),
            (["decline", "2000000000000777"], "does not exist"),
            (["clock", "advance", "soon"], "not a duration"),
            (["buy", Sample.app, "no.such.product"], "not in the catalogue"),
        ]
        for (arguments, message) in cases {
            let result = try daemon.ctl(arguments)
            #expect(result.status == 1 && result.stderr.contains(message), "\(arguments): \(result.status) \(result.stderr)")
        }
        let clock = try daemon.ctlObject(["clock"])
        #expect(clock[string: "rate"] == "realTime" && clock["nextEvent"] is NSNull)
        let table = try daemon.ctl(["clock", "show"])
        #expect(table.status == 0 && table.stdout.contains("offsetMilliseconds"))
    }
}

/// A purchase promoted while the app was not running waits for its next observer.
@Suite struct PromotionQueueTests {
    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: it buys for uid 0 (storekitctl's default), and its clients, which must see those purchases, have this process's uid"))
    func aPromotionWithNoObserverIsOfferedToTheNextOne() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        _ = try daemon.ctlObject(["promote", Sample.app, Sample.levelPack])
        // Nobody observed: the promotion is kept, and offered once when the app starts observing.
        let app = try daemon.observer()
        #expect(app.waitForOutput { output in
            events(output).contains { $0[string: "event"] == "promoted" && $0[string: "productIdentifier"] == Sample.levelPack }
        }, "\(app.transcript)")
        #expect(app.waitForUpdate { $0[string: "productIdentifier"] == Sample.levelPack && $0[string: "state"] == "purchased" })
        // A promotion is offered with the answer to subscribe, before anything pushed later on the
        // same connection: once the next observer has printed a purchase made after it
        // subscribed, it has been offered everything it will be.
        let second = try daemon.observer()
        let later = try daemon.buyOutsideApp(Sample.coins)
        #expect(second.waitForUpdate { $0[string: "transactionIdentifier"] == later.id }, "\(second.transcript)")
        #expect(!events(second.transcript).contains { $0[string: "event"] == "promoted" }, "offered twice")
    }
}
