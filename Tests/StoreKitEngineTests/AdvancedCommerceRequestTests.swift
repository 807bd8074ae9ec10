import StoreKitEngine
import StoreKitLedger
import StoreKitTestSupport
import StoreKitWire
import Testing

/// Advanced Commerce API requests: read from their JSON (Apple's names and limits), every form
/// refused with what is wrong; bought through the engine on each ledger, kept with the
/// transaction (an Ask to Buy request's until approved, a subscription's for its renewals, a
/// restored copy's from its original) and told in the signed payload's `advancedCommerceInfo`.
@Suite struct AdvancedCommerceRequestTests {
    static let app = "com.example.game"
    static let buyer: UInt32 = 1000

    static func json(_ text: String) -> [UInt8] { Array(text.utf8) }

    static let charge = """
        {"operation":"CREATE_ONE_TIME_CHARGE","version":"1","requestInfo":{"requestReferenceId":"7F0C5D8E-0D9A-4D3B-9D49-2C3F1B6A9E01"},
         "currency":"USD","taxCode":"C003-00-2","storefront":"USA",
         "item":{"SKU":"BOOK-1","displayName":"A book","description":"The first volume","price":4990}}
        """
    static let subscription = """
        {"operation":"CREATE_SUBSCRIPTION","version":"1","requestInfo":{"requestReferenceId":"1b4e28ba-2fa1-11d2-883f-0016d3cca427",
         "appAccountToken":"9c4ac6a2-5f1e-4a77-8e5c-3a1d1b7c2e10"},"currency":"USD","taxCode":"C003-00-2","period":"P1Y",
         "descriptors":{"displayName":"News","description":"Daily news"},
         "items":[{"SKU":"A","displayName":"The Daily","description":"Mornings","price":30000,
                   "offer":{"period":"P1Y","periodCount":2,"price":10000,"reason":"RETENTION"}},
                  {"SKU":"B","displayName":"The Weekly","description":"Sundays","price":5000}]}
        """

    @Test("a one-time charge and a subscription are read in Apple's names, and read back the same from what the ledger keeps")
    func reads() throws {
        guard case .success(let charge) = AdvancedCommerceRequest.parse(Self.json(Self.charge)) else { Issue.record("refused"); return }
        #expect(charge.operation == .oneTimeCharge && charge.requestReferenceID == "7f0c5d8e-0d9a-4d3b-9d49-2c3f1b6a9e01")
        #expect(charge.currency == "USD" && charge.taxCode == "C003-00-2" && charge.storefront == "USA" && charge.period == nil)
        let item = try #require(charge.items.first)
        #expect(charge.items.count == 1 && item.sku == "BOOK-1" && item.displayName == "A book" && item.description == "The first volume"
                && item.priceMillis == 4990 && item.offer == nil)
        #expect(charge.taxExclusivePriceMillis(period: 0) == 4990)

        guard case .success(let subscription) = AdvancedCommerceRequest.parse(Self.json(Self.subscription)) else { Issue.record("refused"); return }
        #expect(subscription.operation == .subscription && subscription.period == SubscriptionPeriod(value: 1, unit: .year))
        #expect(subscription.appAccountToken == "9c4ac6a2-5f1e-4a77-8e5c-3a1d1b7c2e10")
        #expect(subscription.displayName == "News" && subscription.description == "Daily news" && subscription.items.count == 2)
        let offer = try #require(subscription.items[0].offer)
        #expect(offer.period == "P1Y" && offer.periodCount == 2 && offer.priceMillis == 10000 && offer.reason == "RETENTION")
        // The offer lasts its two periods.
        #expect([0, 1, 2].map { subscription.taxExclusivePriceMillis(period: $0) } == [15000, 15000, 35000])
        for request in [charge, subscription] {
            #expect(AdvancedCommerceRequest.parse(Array(request.json.serialized().utf8)) == .success(request))
        }
        let info = subscription.transactionInfo(period: 2, revocationDate: 77)
        #expect(info["requestReferenceId"]?.string == "1b4e28ba-2fa1-11d2-883f-0016d3cca427" && info["period"]?.string == "P1Y")
        #expect(info["taxExclusivePrice"] == .int(35000) && info["estimatedTax"] == .int(0) && info["taxRate"]?.string == "0")
        guard case .array(let items)? = info["items"] else { Issue.record("no items"); return }
        #expect(items.map { $0["price"] } == [.int(30000), .int(5000)] && items.allSatisfy { $0["offer"] == nil && $0["revocationDate"] == .int(77) })
    }

    /// Requests with one thing wrong, and what the refusal must name.
    static var malformed: [(String, String)] {
        var list: [(String, String)] = []
        list.append(("[1]", "not a JSON object"))
        list.append(("{\"operation\":\"CREATE_ONE_TIME_CHARGE\"", "not a JSON object"))
        list.append((charge.replacingOccurrences(of: "CREATE_ONE_TIME_CHARGE", with: "SUBSCRIPTION_MODIFY_IN_APP"), "operation"))
        list.append((charge.replacingOccurrences(of: "\"version\":\"1\"", with: "\"version\":1"), "version"))
        list.append((charge.replacingOccurrences(of: "\"requestReferenceId\":\"7F0C5D8E-0D9A-4D3B-9D49-2C3F1B6A9E01\"", with: "\"x\":1"), "requestInfo.requestReferenceId"))
        list.append((charge.replacingOccurrences(of: "7F0C5D8E-0D9A-4D3B-9D49-2C3F1B6A9E01", with: "not-a-uuid"), "is not a UUID"))
        list.append((charge.replacingOccurrences(of: "\"USD\"", with: "\"US$\""), "ISO 4217"))
        list.append((charge.replacingOccurrences(of: "\"taxCode\":\"C003-00-2\",", with: ""), "taxCode"))
        list.append((charge.replacingOccurrences(of: "\"price\":4990", with: "\"price\":-5"), "item.price"))
        list.append((charge.replacingOccurrences(of: "\"price\":4990", with: "\"price\":49.9"), "item.price"))
        list.append((charge.replacingOccurrences(of: "\"price\":4990", with: "\"price\":1e30"), "item.price"))
        list.append((charge.replacingOccurrences(of: "\"SKU\":\"BOOK-1\"", with: "\"SKU\":\"\(String(repeating: "s", count: 129))\""), "item.SKU"))
        list.append((charge.replacingOccurrences(of: "\"A book\"", with: "\"\(String(repeating: "n", count: 31))\""), "item.displayName"))
        list.append((charge.replacingOccurrences(of: "\"The first volume\"", with: "\"\(String(repeating: "d", count: 46))\""), "item.description"))
        list.append((charge.replacingOccurrences(of: "\"price\":4990}", with: "\"price\":4990,\"offer\":{}}"), "not an offer of a subscription item"))
        list.append((subscription.replacingOccurrences(of: "\"period\":\"P1Y\"", with: "\"period\":\"P2Y\""), "period"))
        list.append((subscription.replacingOccurrences(of: "\"periodCount\":2", with: "\"periodCount\":13"), "periodCount"))
        list.append((subscription.replacingOccurrences(of: "RETENTION", with: "LOYALTY"), "reason"))
        list.append((subscription.replacingOccurrences(of: "\"price\":10000", with: "\"price\":40000"), "more than the item's price"))
        list.append((subscription.replacingOccurrences(of: "\"SKU\":\"B\"", with: "\"SKU\":\"A\""), "same SKU"))
        list.append((subscription.replacingOccurrences(of: "\"descriptors\":{\"displayName\":\"News\",\"description\":\"Daily news\"},", with: ""), "descriptors"))
        // One character of many combining marks counts once, but its bytes are bounded.
        list.append((charge.replacingOccurrences(of: "\"A book\"", with: "\"a\(String(repeating: "\u{301}", count: 200))\""),
                     "item.displayName is longer than 120 bytes"))
        let items = (0...AdvancedCommerceRequest.itemLimit).map { "{\"SKU\":\"S\($0)\",\"displayName\":\"n\",\"description\":\"d\",\"price\":1}" }
        list.append((subscription.replacingOccurrences(of: "{\"SKU\":\"B\",\"displayName\":\"The Weekly\",\"description\":\"Sundays\",\"price\":5000}",
                                                       with: items.joined(separator: ",")), "102 items, more than 100"))
        return list
    }

    @Test("every malformed request is refused, saying what is wrong", arguments: malformed)
    func refuses(_ text: String, _ reason: String) {
        guard case .failure(let invalid) = AdvancedCommerceRequest.parse(Self.json(text)) else {
            Issue.record("accepted: \(text)")
            return
        }
        #expect(invalid.message.contains(reason), "\(invalid.message)")
    }

    final class Store {
        let directory = TemporaryDirectory("skcommerce")
        let store: any Ledger
        let engine: PaymentQueueEngine

        init(_ backend: LedgerBackend) throws {
            store = try backend.place(in: directory).open()
            engine = PaymentQueueEngine(store: store, catalogs: [app: try Catalog.load(path: SampleCatalog.path)])
        }

        deinit {
            try? LedgerBackend.close(store)
            directory.remove()
        }

        func pay(_ productID: String, _ text: String, askingParent: Bool = false, uid: UInt32 = buyer) throws -> Outcome {
            guard case .success(let request) = AdvancedCommerceRequest.parse(AdvancedCommerceRequestTests.json(text)) else {
                throw IntegrationError()
            }
            let payment = ClientMessage.AddPayment(requestID: 1, key: "", productID: productID, quantity: 1, simulatesAskToBuy: askingParent)
            return try store.inUnit { try engine.addPayment(uid: uid, app: app, payment: payment, advancedCommerce: request) }
        }

        func payload(_ id: UInt64) throws -> JSONValue {
            let record = try #require(try store.transaction(id: id))
            return try #require(try engine.transactionPayload(record, environment: "Xcode", signedDate: 0))
        }
    }

    struct IntegrationError: Error {}

    @Test(arguments: LedgerBackend.allCases)
    func aChargeIsKeptWithItsTransaction(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let outcome = try store.pay(SampleCatalog.levelPack, Self.charge)
        #expect(outcome.code == .ok, "\(outcome.message)")
        let payload = try store.payload(outcome.value)
        #expect(payload["price"] == .int(4990) && payload["advancedCommerceInfo"]?["taxExclusivePrice"] == .int(4990))
        #expect(try store.store.setting("commerce.\(outcome.value)")?.hasPrefix("0\t{\"operation\":\"CREATE_ONE_TIME_CHARGE\"") == true)
        // Finished and restored, the copy tells its original's purchase.
        #expect(try store.store.inUnit { try store.engine.finish(uid: Self.buyer, app: Self.app, transactionID: outcome.value) }.code == .ok)
        let restored = try store.store.inUnit { try store.engine.restore(uid: Self.buyer, app: Self.app, applicationUsername: nil) }
        let copy = try #require(restored.effects.compactMap { effect -> TransactionRecord? in
            if case .updated(_, let records) = effect { return records.first { $0.state == .restored } } else { return nil }
        }.first)
        #expect(try store.payload(copy.id)["advancedCommerceInfo"]?["requestReferenceId"]?.string == "7f0c5d8e-0d9a-4d3b-9d49-2c3f1b6a9e01")
        // The app is marked in the ledger at its first purchase with a request: an engine started
        // on the ledger later (a restart, another host) signs the same; one on a ledger that does
        // not mark the app looks nothing up.
        #expect(try store.store.setting("commerce.app.\(Self.app)") == "1")
        let catalogs = [Self.app: try Catalog.load(path: SampleCatalog.path)]
        let record = try #require(try store.store.transaction(id: outcome.value))
        #expect(try PaymentQueueEngine(store: store.store, catalogs: catalogs)
            .transactionPayload(record, environment: "Xcode", signedDate: 0)?["advancedCommerceInfo"] != nil)
        // Another app marked, this one not: its transactions are not looked up.
        try store.store.inUnit {
            try store.store.setSetting("commerce.app.\(Self.app)", nil)
            try store.store.setSetting("commerce.app.com.example.other", "1")
        }
        #expect(try PaymentQueueEngine(store: store.store, catalogs: catalogs)
            .transactionPayload(record, environment: "Xcode", signedDate: 0)?["advancedCommerceInfo"] == nil)
        // A ledger that kept requests before apps were marked (no mark at all): every app is looked
        // up, and the first purchase with a request marks the apps of those kept before.
        try store.store.inUnit { try store.store.setSetting("commerce.app.com.example.other", nil) }
        let unmarked = PaymentQueueEngine(store: store.store, catalogs: catalogs)
        #expect(try unmarked.transactionPayload(record, environment: "Xcode", signedDate: 0)?["advancedCommerceInfo"] != nil)
        guard case .success(let book) = AdvancedCommerceRequest.parse(Self.json(Self.charge.replacingOccurrences(of: "9E01", with: "9E05"))) else {
            Issue.record("refused")
            return
        }
        let payment = ClientMessage.AddPayment(requestID: 1, key: "", productID: SampleCatalog.coins, quantity: 1)
        #expect(try store.store.inUnit { try unmarked.addPayment(uid: Self.buyer, app: Self.app, payment: payment, advancedCommerce: book) }.code == .ok)
        #expect(try store.store.setting("commerce.app.\(Self.app)") == "1")
        // The request goes with its transaction.
        #expect(try store.store.inUnit { try store.engine.deleteTransaction(id: outcome.value) }.code == .ok)
        #expect(try store.store.setting("commerce.\(outcome.value)") == nil)
        // Another storefront's currency is refused, and nothing is recorded.
        try store.store.inUnit { store.engine.storefront = "FRA" }
        let refused = try store.pay(SampleCatalog.coins, Self.charge.replacingOccurrences(of: "\"storefront\":\"USA\",", with: ""))
        #expect(refused.code == .storeKit && refused.detail == StoreKitErrorCode.paymentInvalid.rawValue && refused.message.contains("EUR"),
                "\(refused.message)")
    }

    @Test(arguments: LedgerBackend.allCases)
    func anAskedSubscriptionStartsInItsRequestsPeriodAndRenewsWithIt(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let asked = try store.pay(SampleCatalog.monthly, Self.subscription, askingParent: true)
        #expect(asked.code == .ok, "\(asked.message)")
        #expect(try store.store.transaction(id: asked.value)?.state == .deferred)
        #expect(try store.store.inUnit { try store.engine.approve(transactionID: asked.value) }.code == .ok)
        let approved = try #require(try store.store.transaction(id: asked.value))
        #expect(approved.applicationUsername == "9c4ac6a2-5f1e-4a77-8e5c-3a1d1b7c2e10", "the request's appAccountToken")
        let expires = try #require(approved.expiresDate)
        #expect(expires - approved.date >= 365 * 86_400_000, "the request's year, not the product's month or free trial")
        #expect(try store.payload(approved.id)["price"] == .int(15000))
        #expect(try store.payload(approved.id)["offerType"] == nil)
        // The renewal info tells the next period's items: the offer's second period.
        let subscription = try #require(try store.store.subscriptions(uid: Self.buyer, app: Self.app).first)
        let next = try #require(try store.engine.renewalCommerceInfo(of: subscription))
        #expect(store.engine.renewalInfoPayload(subscription, environment: "Xcode", signedDate: 0, advancedCommerce: next)["advancedCommerceInfo"] == next)
        guard case .array(let nextItems)? = next["items"] else { Issue.record("no items"); return }
        #expect(nextItems.map { $0["price"] } == [.int(10000), .int(5000)] && nextItems[0]["offer"]?["periodCount"] == .int(2))
        #expect(next["period"]?.string == "P1Y" && next["descriptors"]?["displayName"]?.string == "News")
        var prices: [JSONValue?] = []
        for _ in 0..<2 {
            let renewal = try store.store.inUnit { try store.engine.advanceClock(by: ClockDuration("P1Y")!) }
            let renewed = try #require(renewal.effects.compactMap { effect -> TransactionRecord? in
                if case .updated(_, let records) = effect { return records.first } else { return nil }
            }.first)
            prices.append(try store.payload(renewed.id)["advancedCommerceInfo"]?["taxExclusivePrice"])
        }
        #expect(prices == [.int(15000), .int(35000)], "the offer's two periods, then the items' prices")

        // A declined request forgets its Advanced Commerce request with it.
        let declined = try store.pay(SampleCatalog.levelPack, Self.charge, askingParent: true)
        #expect(try store.store.setting("commerce.\(declined.value)") != nil)
        #expect(try store.store.inUnit { try store.engine.decline(transactionID: declined.value) }.code == .ok)
        #expect(try store.store.setting("commerce.\(declined.value)") == nil)
    }

    @Test(arguments: LedgerBackend.allCases)
    func aRequestBuysOnceARetryGetsItsTransactionBackAndAnotherBuyerIsRefused(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let bought = try store.pay(SampleCatalog.coins, Self.charge)
        #expect(bought.code == .ok, "\(bought.message)")
        let reference = "commerce.ref.\(Self.app).7f0c5d8e-0d9a-4d3b-9d49-2c3f1b6a9e01"
        #expect(try store.store.setting(reference) == "\(Self.buyer)\t\(bought.value)")
        // A retry (a new payment key, the same request) is the purchase made: nothing charged again.
        let retried = try store.pay(SampleCatalog.coins, Self.charge)
        #expect(retried.code == .ok && retried.value == bought.value && retried.effects.isEmpty, "\(retried.message)")
        // Another buyer replaying the request is refused.
        let replayed = try store.pay(SampleCatalog.coins, Self.charge, uid: Self.buyer + 1)
        #expect(replayed.code == .storeKit && replayed.detail == StoreKitErrorCode.paymentInvalid.rawValue
                && replayed.message.contains("another buyer"), "\(replayed.message)")
        #expect(try store.store.all(uid: Self.buyer, app: Self.app).count == 1)
        #expect(try store.store.all(uid: Self.buyer + 1, app: Self.app).isEmpty)
        // The reference goes with its transaction; a declined request's too (nothing was charged).
        #expect(try store.store.inUnit { try store.engine.deleteTransaction(id: bought.value) }.code == .ok)
        #expect(try store.store.setting(reference) == nil)
        let asked = try store.pay(SampleCatalog.coins, Self.charge, askingParent: true)
        #expect(asked.code == .ok && asked.value != bought.value)
        #expect(try store.store.inUnit { try store.engine.decline(transactionID: asked.value) }.code == .ok)
        #expect(try store.store.setting(reference) == nil)
        let again = try store.pay(SampleCatalog.coins, Self.charge)
        #expect(again.code == .ok && again.value != asked.value)
        #expect(try store.store.inUnit { try store.engine.clear(uid: nil, app: nil) }.code == .ok)
        #expect(try store.store.setting(reference) == nil, "clear forgets it")
    }

    @Test(arguments: LedgerBackend.allCases)
    func aResolvedInterruptedPurchaseKeepsItsRequest(backend: LedgerBackend) throws {
        let store = try Store(backend)
        _ = try store.store.inUnit { try store.engine.updateSwitches { $0.interrupted = true } }
        let charge = try store.pay(SampleCatalog.coins, Self.charge)
        let subscribing = try store.pay(SampleCatalog.monthly, Self.subscription)
        #expect(charge.code == .ok && subscribing.code == .ok)
        #expect(try store.store.transaction(id: charge.value)?.state == .failed)
        _ = try store.store.inUnit { try store.engine.updateSwitches { $0.interrupted = false } }

        let resolved = try store.store.inUnit { try store.engine.resolve(transactionID: charge.value) }
        #expect(resolved.code == .ok && resolved.value != charge.value, "\(resolved.message)")
        let payload = try store.payload(resolved.value)
        #expect(payload["price"] == .int(4990) && payload["advancedCommerceInfo"]?["taxExclusivePrice"] == .int(4990), "the request's price")
        #expect(try store.store.setting("commerce.\(charge.value)") == nil, "the failed transaction keeps no request")
        #expect(try store.store.setting("commerce.ref.\(Self.app).7f0c5d8e-0d9a-4d3b-9d49-2c3f1b6a9e01") == "\(Self.buyer)\t\(resolved.value)")

        let started = try store.store.inUnit { try store.engine.resolve(transactionID: subscribing.value) }
        #expect(started.code == .ok, "\(started.message)")
        let purchase = try #require(try store.store.transaction(id: started.value))
        let expires = try #require(purchase.expiresDate)
        #expect(expires - purchase.date >= 365 * 86_400_000, "the request's year, not the product's month or free trial")
        #expect(try store.payload(purchase.id)["price"] == .int(15000))
        let subscription = try #require(try store.store.subscriptions(uid: Self.buyer, app: Self.app).first)
        #expect(try store.engine.renewalCommerceInfo(of: subscription)?["period"]?.string == "P1Y", "it renews with the request")
    }

    @Test(arguments: LedgerBackend.allCases)
    func anOfferOfAnotherPeriodThanItsSubscriptionsIsRefused(backend: LedgerBackend) throws {
        let store = try Store(backend)
        for period in ["P1M", "P3D", "P9M"] {
            let refused = try store.pay(SampleCatalog.monthly, Self.subscription.replacingOccurrences(of: "\"period\":\"P1Y\",\"periodCount\"",
                                                                                                      with: "\"period\":\"\(period)\",\"periodCount\""))
            #expect(refused.code == .storeKit && refused.detail == StoreKitErrorCode.paymentInvalid.rawValue
                    && refused.message.contains("items[0].offer.period \(period)"), "\(period): \(refused.message)")
        }
        #expect(try store.store.all(uid: Self.buyer, app: Self.app).isEmpty, "nothing recorded")
        #expect(try store.pay(SampleCatalog.monthly, Self.subscription).code == .ok, "an offer in the subscription's period buys")
    }

    @Test(arguments: LedgerBackend.allCases)
    func askToBuyKeepsEachRequestAndAnApprovalRechecksIt(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let second = Self.charge.replacingOccurrences(of: "7F0C5D8E-0D9A-4D3B-9D49-2C3F1B6A9E01", with: "7F0C5D8E-0D9A-4D3B-9D49-2C3F1B6A9E02")
            .replacingOccurrences(of: "BOOK-1", with: "BOOK-2").replacingOccurrences(of: "4990", with: "2990")
        let first = try store.pay(SampleCatalog.coins, Self.charge, askingParent: true)
        let other = try store.pay(SampleCatalog.coins, second, askingParent: true)
        #expect(first.code == .ok && other.code == .ok && first.value != other.value, "the second request is its own purchase")
        let plain = ClientMessage.AddPayment(requestID: 1, key: "", productID: SampleCatalog.coins, quantity: 1, simulatesAskToBuy: true)
        let ordinary = try store.store.inUnit { try store.engine.addPayment(uid: Self.buyer, app: Self.app, payment: plain) }
        #expect(ordinary.code == .ok && ![first.value, other.value].contains(ordinary.value), "an ordinary payment does not join a request")
        for id in [first.value, other.value] {
            #expect(try store.store.inUnit { try store.engine.approve(transactionID: id) }.code == .ok)
        }
        #expect(try store.payload(first.value)["price"] == .int(4990) && store.payload(other.value)["price"] == .int(2990))
        guard case .array(let items)? = try store.payload(other.value)["advancedCommerceInfo"]?["items"] else { Issue.record("no items"); return }
        #expect(items.first?["SKU"]?.string == "BOOK-2")

        // A subscription asked for, then another bought directly in the group: the approval fails it.
        let asked = try store.pay(SampleCatalog.monthly, Self.subscription, askingParent: true)
        let direct = try store.pay(SampleCatalog.monthly, Self.subscription.replacingOccurrences(of: "1b4e28ba-2fa1", with: "2b4e28ba-2fa1"))
        #expect(asked.code == .ok && direct.code == .ok, "\(direct.message)")
        let approved = try store.store.inUnit { try store.engine.approve(transactionID: asked.value) }
        #expect(approved.code == .ok)
        let failed = try #require(try store.store.transaction(id: asked.value))
        #expect(failed.state == .failed && failed.errorCode == StoreKitErrorCode.paymentInvalid.rawValue
                && failed.errorMessage?.contains("subscribed in group") == true, "\(failed)")
        #expect(try store.store.setting("commerce.\(asked.value)") == nil)
        let subscriptions = try store.store.subscriptions(uid: Self.buyer, app: Self.app)
        #expect(subscriptions.count == 1 && subscriptions.first?.originalID == direct.value)
    }

    @Test(arguments: LedgerBackend.allCases)
    func aPurchaseIsSignedInItsRequestsCurrencyAfterTheStorefrontChanges(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let bought = try store.pay(SampleCatalog.coins, Self.charge.replacingOccurrences(of: "\"storefront\":\"USA\",", with: ""))
        #expect(bought.code == .ok, "\(bought.message)")
        try store.store.inUnit { store.engine.storefront = "FRA" }
        let payload = try store.payload(bought.value)
        #expect(payload["currency"]?.string == "USD" && payload["price"] == .int(4990), "the request's currency beside its price")
        let plain = ClientMessage.AddPayment(requestID: 1, key: "", productID: SampleCatalog.coins, quantity: 1)
        let ordinary = try store.store.inUnit { try store.engine.addPayment(uid: Self.buyer, app: Self.app, payment: plain) }
        #expect(try store.payload(ordinary.value)["currency"]?.string == "EUR", "an ordinary purchase says the storefront's")
    }

    @Test(arguments: LedgerBackend.allCases)
    func eachChargeOfANonConsumableIsItsOwnInRestoreAndEntitlementsAndIsNotFamilyShared(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let member: UInt32 = Self.buyer + 1
        store.engine.families = FamilyGroups([[Self.buyer, member]])
        _ = try store.store.inUnit { try store.engine.applyFamilies() }
        let second = Self.charge.replacingOccurrences(of: "7F0C5D8E-0D9A-4D3B-9D49-2C3F1B6A9E01", with: "7F0C5D8E-0D9A-4D3B-9D49-2C3F1B6A9E02")
            .replacingOccurrences(of: "BOOK-1", with: "BOOK-2")
        let first = try store.pay(SampleCatalog.levelPack, Self.charge)
        let other = try store.pay(SampleCatalog.levelPack, second)
        #expect(first.code == .ok && other.code == .ok && first.value != other.value)
        #expect(first.effects.count == 2 && other.effects.count == 2, "purchasing and purchased, no family copy")
        #expect(try store.store.all(uid: member, app: Self.app).isEmpty, "not shared with the family")
        for id in [first.value, other.value] {
            #expect(try store.store.inUnit { try store.engine.finish(uid: Self.buyer, app: Self.app, transactionID: id) }.code == .ok)
        }
        func skus(_ records: [TransactionRecord]) throws -> [String] {
            try records.map { record in
                guard case .array(let items)? = try store.payload(record.id)["advancedCommerceInfo"]?["items"] else { return "" }
                return items.first?["SKU"]?.string ?? ""
            }.sorted()
        }
        #expect(try skus(try store.engine.entitlements(uid: Self.buyer, app: Self.app)) == ["BOOK-1", "BOOK-2"])
        let restored = try store.store.inUnit { try store.engine.restore(uid: Self.buyer, app: Self.app, applicationUsername: nil) }
        let copies = restored.effects.flatMap { effect -> [TransactionRecord] in
            if case .updated(let queue, let records) = effect, queue.uid == Self.buyer { return records } else { return [] }
        }
        #expect(Set(copies.compactMap(\.originalID)) == [first.value, other.value], "a copy of each purchase")
        #expect(try skus(copies) == ["BOOK-1", "BOOK-2"])
        #expect(try skus(try store.engine.entitlements(uid: Self.buyer, app: Self.app)) == ["BOOK-1", "BOOK-2"])
        #expect(try store.store.all(uid: member, app: Self.app).isEmpty, "nor restored to the family")
    }

    @Test(arguments: LedgerBackend.allCases)
    func aMonthlyBillingPlanIsRefused(backend: LedgerBackend) throws {
        let store = try Store(backend)
        guard case .success(let request) = AdvancedCommerceRequest.parse(Self.json(Self.subscription)) else { Issue.record("refused"); return }
        let payment = ClientMessage.AddPayment(requestID: 1, key: "", productID: SampleCatalog.monthly, quantity: 1, billingPlanType: .monthly)
        let refused = try store.store.inUnit { try store.engine.addPayment(uid: Self.buyer, app: Self.app, payment: payment, advancedCommerce: request) }
        #expect(refused.code == .storeKit && refused.detail == StoreKitErrorCode.paymentInvalid.rawValue
                && refused.message.contains("monthly billing plan"), "\(refused.message)")
        #expect(try store.store.all(uid: Self.buyer, app: Self.app).isEmpty)
    }

    @Test(arguments: LedgerBackend.allCases)
    func renewalsPointAtTheRequestInsteadOfStoringItAgain(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let bought = try store.pay(SampleCatalog.monthly, Self.subscription)
        #expect(bought.code == .ok, "\(bought.message)")
        let subscription = try #require(try store.store.subscriptions(uid: Self.buyer, app: Self.app).first)
        #expect(try store.store.setting("commerce.running.\(subscription.originalID)") == "0\t@\(bought.value)")
        func renew() throws -> TransactionRecord {
            let renewal = try store.store.inUnit { try store.engine.advanceClock(by: ClockDuration("P1Y")!) }
            return try #require(renewal.effects.compactMap { effect -> TransactionRecord? in
                if case .updated(_, let records) = effect { return records.first } else { return nil }
            }.first)
        }
        let renewed = try renew()
        #expect(try store.store.setting("commerce.\(renewed.id)") == "1\t@\(bought.value)", "the period and where the request is")
        #expect(try store.payload(renewed.id)["advancedCommerceInfo"]?["taxExclusivePrice"] == .int(15000))
        // The purchase deleted (its renewals with it) while the subscription lives: it renews with the request still.
        #expect(try store.store.inUnit { try store.engine.deleteTransaction(id: bought.value) }.code == .ok)
        #expect(try store.store.setting("commerce.running.\(subscription.originalID)")?.hasPrefix("1\t{\"operation\"") == true)
        let later = try renew()
        let payload = try store.payload(later.id)
        #expect(payload["price"] == .int(35000) && payload["advancedCommerceInfo"]?["requestReferenceId"]?.string == "1b4e28ba-2fa1-11d2-883f-0016d3cca427",
                "\(payload)")
        #expect(try store.store.setting("commerce.\(later.id)")?.hasPrefix("2\t{") == true, "no row to point at: the request itself")
    }
}
