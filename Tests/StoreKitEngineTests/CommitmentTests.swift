import Foundation
import StoreKitEngine
import StoreKitLedger
import StoreKitTestSupport
import StoreKitWire
import Testing

/// Monthly billing with a 12-month commitment (a `MONTHLY` billing plan), on each ledger: the
/// commitment's twelve monthly transactions, auto-renew turned off in the middle (billing goes on
/// to its end), the renewal into a new commitment, a plan the product does not have, and what the
/// signed transaction and renewal info say.
@Suite struct CommitmentTests {
    static let app = "com.example.news"
    static let buyer: UInt32 = 1000
    static let yearly = "news.yearly"
    static let monthly = "news.monthly"

    static let catalogJSON = """
    { "subscriptionGroups" : [ { "id" : "G1", "name" : "News", "subscriptions" : [
        { "productID" : "news.yearly", "type" : "RecurringSubscription", "displayPrice" : "11.88",
          "recurringSubscriptionPeriod" : "P1Y", "groupNumber" : 2,
          "billingPlans" : [
            { "billingPlanType" : "BILLED_UPFRONT", "displayPrice" : "11.88", "commitmentDisplayPrice" : "11.88", "isEnabled" : true },
            { "billingPlanType" : "MONTHLY", "displayPrice" : "0.5", "commitmentDisplayPrice" : "6.00", "isEnabled" : true } ] },
        { "productID" : "news.monthly", "type" : "RecurringSubscription", "displayPrice" : "0.99",
          "recurringSubscriptionPeriod" : "P1M", "groupNumber" : 3 },
        { "productID" : "news.premium", "type" : "RecurringSubscription", "displayPrice" : "1.99",
          "recurringSubscriptionPeriod" : "P1M", "groupNumber" : 1 },
        { "productID" : "news.basic", "type" : "RecurringSubscription", "displayPrice" : "5.88",
          "recurringSubscriptionPeriod" : "P1Y", "groupNumber" : 4,
          "billingPlans" : [
            { "billingPlanType" : "BILLED_UPFRONT", "displayPrice" : "5.88", "isEnabled" : true },
            { "billingPlanType" : "MONTHLY", "displayPrice" : "0.25", "commitmentDisplayPrice" : "3.00", "isEnabled" : true } ] } ] } ] }
    """

    /// The catalogue with the yearly product's monthly plan turned off (`isEnabled` false).
    static var withoutMonthlyPlan: Catalog {
        get throws {
            let json = catalogJSON.replacingOccurrences(
                of: #""displayPrice" : "0.5", "commitmentDisplayPrice" : "6.00", "isEnabled" : true"#,
                with: #""displayPrice" : "0.5", "commitmentDisplayPrice" : "6.00", "isEnabled" : false"#)
            precondition(json != catalogJSON)
            return try Catalog(json: Data(json.utf8), path: "news.storekit")
        }
    }

    final class Store {
        let directory = TemporaryDirectory("skcommitment")
        let store: any Ledger
        let engine: PaymentQueueEngine

        init(_ backend: LedgerBackend) throws {
            store = try backend.place(in: directory).open()
            engine = PaymentQueueEngine(store: store, catalogs: [app: try Catalog(json: Data(catalogJSON.utf8), path: "news.storekit")])
        }

        deinit {
            try? LedgerBackend.close(store)
            directory.remove()
        }

        func buy(_ productID: String = yearly, plan: ProductRecord.BillingPlan.PlanType? = .monthly, askToBuy: Bool = false) throws -> Outcome {
            let payment = ClientMessage.AddPayment(requestID: 1, key: "", productID: productID, quantity: 1, simulatesAskToBuy: askToBuy,
                                                   billingPlanType: plan)
            return try store.inUnit { try engine.addPayment(uid: buyer, app: app, payment: payment) }
        }

        func advance(_ text: String) throws {
            _ = try store.inUnit { try engine.advanceClock(by: ClockDuration(text)!) }
        }

        func subscription() throws -> Subscription { try #require(try store.subscriptions(uid: buyer, app: app).first) }

        /// The purchased transactions of the buyer, oldest first.
        func purchases() throws -> [TransactionRecord] {
            try store.all(uid: buyer, app: app).filter { $0.state == .purchased }
        }

        func payload(_ record: TransactionRecord) throws -> [String: JSONValue] {
            guard case .object(let members)? = try engine.transactionPayload(record, environment: "Xcode", signedDate: 0) else { return [:] }
            return Dictionary(members, uniquingKeysWith: { first, _ in first })
        }

        func renewalInfo() throws -> [String: JSONValue] {
            let subscription = try subscription()
            guard case .object(let members) = engine.renewalInfoPayload(
                subscription, environment: "Xcode", signedDate: 0, priceIncrease: try engine.priceIncrease(of: subscription.originalID)) else {
                return [:]
            }
            return Dictionary(members, uniquingKeysWith: { first, _ in first })
        }

        func setAutoRenew(_ on: Bool) throws {
            let outcome = try store.inUnit { try engine.setAutoRenew(on, .transaction(try subscription().originalID)) }
            #expect(outcome.code == .ok, "\(outcome.message)")
        }
    }

    /// A JSON object's members by name.
    static func members(_ value: JSONValue?) -> [String: JSONValue] {
        guard case .object(let members)? = value else { return [:] }
        return Dictionary(members, uniquingKeysWith: { first, _ in first })
    }

    static func int(_ value: JSONValue?) -> Int64? {
        guard case .int(let number)? = value else { return nil }
        return number
    }

    @Test("the catalogue's plans reach clients: up front at the product's price, monthly at 0.50 for 12 months, 6.00 committed")
    func plansInTheRecord() throws {
        let catalog = try Catalog(json: Data(Self.catalogJSON.utf8), path: "news.storekit")
        let record = try #require(catalog.product(Self.yearly)).record(locale: "en_US", currencyCode: "USD")
        #expect(record.billingPlans.map(\.type) == [.upFront, .monthly])
        #expect(record.billingPlans[0].priceCents == 1188 && record.billingPlans[0].billingPeriod == "P1Y")
        #expect(record.billingPlans[1] == ProductRecord.BillingPlan(
            type: .monthly, billingPeriod: "P1M", priceCents: 50, displayPrice: "0.5", commitmentPeriod: "P1Y",
            commitmentPriceCents: 600, commitmentDisplayPrice: "6.00"))
        #expect(try #require(catalog.product(Self.monthly)).record(locale: "en_US", currencyCode: "USD").billingPlans.isEmpty)
    }

    @Test(arguments: LedgerBackend.allCases)
    func twelveMonthlyTransactionsThenANewCommitment(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let bought = try store.buy()
        #expect(bought.code == .ok, "\(bought.message)")
        let first = try #require(try store.store.transaction(id: bought.value))
        let firstPayload = try store.payload(first)
        #expect(firstPayload["billingPlanType"] == .string("MONTHLY"))
        #expect(firstPayload["price"] == .int(500), "the month's price, 0.50, in milliunits")
        let commitment = Self.members(firstPayload["commitmentInfo"])
        #expect(commitment["billingPeriodNumber"] == .int(1) && commitment["totalBillingPeriods"] == .int(12))
        #expect(commitment["commitmentPrice"] == .int(6000))
        let commitmentEnd = try #require(Self.int(commitment["commitmentExpiresDate"]))
        // One month granted, not the product's year.
        let firstEnd = try #require(first.expiresDate)
        #expect(firstEnd < first.date + 32 * 86_400_000 && firstEnd > first.date + 27 * 86_400_000)
        #expect(commitmentEnd > first.date + 364 * 86_400_000 && commitmentEnd < first.date + 367 * 86_400_000)

        let renewal = try store.renewalInfo()
        #expect(renewal["renewalBillingPlanType"] == .string("MONTHLY") && renewal["autoRenewStatus"] == .int(1))
        let renewalCommitment = Self.members(renewal["commitmentInfo"])
        #expect(renewalCommitment["commitmentRenewalDate"] == .int(commitmentEnd))
        #expect(renewalCommitment["commitmentAutoRenewStatus"] == .int(1) && renewalCommitment["commitmentRenewalPrice"] == .int(6000))
        #expect(renewalCommitment["commitmentAutoRenewProductId"] == .string(Self.yearly))
        #expect(renewalCommitment["commitmentRenewalBillingPlanType"] == .string("MONTHLY"))

        // Eleven more months: each its own transaction, the next billing period of the same commitment.
        try store.advance("P11M")
        let purchases = try store.purchases()
        #expect(purchases.count == 12)
        for (index, record) in purchases.enumerated() {
            let payload = try store.payload(record)
            let info = Self.members(payload["commitmentInfo"])
            #expect(info["billingPeriodNumber"] == .int(Int64(index + 1)), "transaction \(index)")
            #expect(info["commitmentExpiresDate"] == .int(commitmentEnd), "transaction \(index)")
            #expect(payload["price"] == .int(500) && payload["billingPlanType"] == .string("MONTHLY"))
            #expect(record.originalID ?? record.id == first.id)
            if index > 0 { #expect(record.date == purchases[index - 1].expiresDate, "each month follows the last") }
        }
        #expect(purchases.last?.expiresDate == commitmentEnd, "the twelfth month ends the commitment")

        // The commitment's end renews into a new one: billing period 1 of another 12.
        try store.advance("P1M")
        let renewed = try store.purchases()
        #expect(renewed.count == 13)
        let next = Self.members(try store.payload(try #require(renewed.last))["commitmentInfo"])
        #expect(next["billingPeriodNumber"] == .int(1) && next["totalBillingPeriods"] == .int(12))
        #expect(try #require(Self.int(next["commitmentExpiresDate"])) > commitmentEnd + 364 * 86_400_000)
        #expect(try store.subscription().status == .active)
    }

    @Test(arguments: LedgerBackend.allCases)
    func autoRenewOffBillsToTheCommitmentsEnd(backend: LedgerBackend) throws {
        let store = try Store(backend)
        #expect(try store.buy().code == .ok)
        try store.advance("P2M")
        try store.setAutoRenew(false)
        // The next billing period still comes; the commitment will not renew.
        let renewal = try store.renewalInfo()
        #expect(renewal["autoRenewStatus"] == .int(1), "the next month is billed whatever auto-renew says")
        #expect(renewal["renewalDate"] != nil)
        #expect(Self.members(renewal["commitmentInfo"])["commitmentAutoRenewStatus"] == .int(0))

        try store.advance("P9M")
        #expect(try store.purchases().count == 12, "billing continued through all 12 months")
        #expect(try store.subscription().status == .active)
        let last = Self.members(try store.payload(try #require(try store.purchases().last))["commitmentInfo"])
        #expect(last["billingPeriodNumber"] == .int(12))
        // In the last month, auto-renew off means what it always does.
        #expect(try store.renewalInfo()["autoRenewStatus"] == .int(0))

        try store.advance("P1M")
        let subscription = try store.subscription()
        #expect(subscription.status == .expired)
        #expect(try store.purchases().count == 12, "no new commitment")
        #expect(try store.renewalInfo()["expirationIntent"] == .int(1))
        #expect(try store.renewalInfo()["commitmentInfo"] == nil)

        // Turned back on within a commitment, it renews into a new one at its end, as if never off.
        let again = try Store(backend)
        #expect(try again.buy().code == .ok)
        try again.setAutoRenew(false)
        try again.advance("P3M")
        try again.setAutoRenew(true)
        try again.advance("P9M")
        #expect(try again.purchases().count == 13)
        #expect(try again.subscription().status == .active)
    }

    @Test(arguments: LedgerBackend.allCases)
    func aDowngradeWaitsForTheCommitmentsEndAnUpgradeEndsIt(backend: LedgerBackend) throws {
        let store = try Store(backend)
        #expect(try store.buy().code == .ok)
        try store.advance("P1M")
        // A lower level: it waits, and the commitment's months go on billing the yearly product.
        #expect(try store.buy(Self.monthly, plan: nil).code == .ok)
        #expect(try store.subscription().nextProductID == Self.monthly)
        try store.advance("P10M")
        let yearlyMonths = try store.purchases().filter { try $0.productID == Self.yearly && store.store.isRenewal(transactionID: $0.id) }
        #expect(yearlyMonths.count == 11, "months 2 to 12 renewed the yearly product")
        let renewal = try store.renewalInfo()
        let commitment = Self.members(renewal["commitmentInfo"])
        #expect(commitment["commitmentAutoRenewProductId"] == .string(Self.monthly))
        #expect(commitment["commitmentRenewalBillingPlanType"] == .string("BILLED_UPFRONT") && commitment["commitmentRenewalPrice"] == .int(990))
        #expect(renewal["renewalBillingPlanType"] == .string("BILLED_UPFRONT"), "the twelfth month is the last billed monthly")
        // The commitment's end: the downgrade, billed up front, no commitment.
        try store.advance("P1M")
        let subscription = try store.subscription()
        #expect(subscription.productID == Self.monthly && subscription.nextProductID == nil)
        let last = try #require(try store.purchases().last)
        #expect(last.productID == Self.monthly)
        let payload = try store.payload(last)
        #expect(payload["billingPlanType"] == .string("BILLED_UPFRONT") && payload["commitmentInfo"] == nil && payload["price"] == .int(990))

        // A higher level switches at once and ends the commitment.
        let upgrading = try Store(backend)
        #expect(try upgrading.buy().code == .ok)
        try upgrading.advance("P2M")
        let upgraded = try upgrading.buy("news.premium", plan: nil)
        #expect(upgraded.code == .ok)
        let upgrade = try #require(try upgrading.store.transaction(id: upgraded.value))
        #expect(try upgrading.payload(upgrade)["commitmentInfo"] == nil)
        #expect(try upgrading.renewalInfo()["commitmentInfo"] == nil)
        try upgrading.setAutoRenew(false)
        try upgrading.advance("P1M")
        #expect(try upgrading.subscription().status == .expired, "no commitment holds it any more")
    }

    @Test(arguments: LedgerBackend.allCases)
    func anExpiredSubscriptionHasNoCommitmentLeft(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let bought = try store.buy()
        #expect(bought.code == .ok)
        try store.advance("P1M")
        // Ended on demand (SKTestSession.expireSubscription) in the second month: nothing renews.
        #expect(try store.store.inUnit { try store.engine.expire(.transaction(bought.value)) }.code == .ok)
        let renewal = try store.renewalInfo()
        #expect(renewal["autoRenewStatus"] == .int(0) && renewal["commitmentInfo"] == nil && renewal["renewalDate"] == nil)
        try store.advance("P2M")
        #expect(try store.purchases().count == 2)
        // Renewed again, it starts over up front, as a purchase without a plan does.
        let renewed = try store.store.inUnit { try store.engine.forceRenewal(.transaction(bought.value)) }
        #expect(renewed.code == .ok, "\(renewed.message)")
        let record = try #require(try store.store.transaction(id: renewed.value))
        let payload = try store.payload(record)
        #expect(payload["billingPlanType"] == .string("BILLED_UPFRONT") && payload["commitmentInfo"] == nil)
        #expect(try #require(record.expiresDate) > record.date + 364 * 86_400_000)
    }

    @Test(arguments: LedgerBackend.allCases)
    func plansAProductDoesNotHaveAreRefused(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let refused = try store.buy(Self.monthly, plan: .monthly)
        #expect(refused.code == .storeKit && refused.detail == StoreKitErrorCode.storeProductNotAvailable.rawValue)
        #expect(refused.message.contains("no MONTHLY billing plan"), "\(refused.message)")
        #expect(try store.store.all(uid: Self.buyer, app: Self.app).isEmpty, "no transaction for a refused plan")

        // Up front, asked or not, is the product's price and period; so is a product without plans.
        let upFront = try store.buy(Self.yearly, plan: .upFront)
        #expect(upFront.code == .ok)
        let record = try #require(try store.store.transaction(id: upFront.value))
        let payload = try store.payload(record)
        #expect(payload["billingPlanType"] == .string("BILLED_UPFRONT") && payload["commitmentInfo"] == nil)
        #expect(payload["price"] == .int(11_880))
        #expect(try #require(record.expiresDate) > record.date + 364 * 86_400_000)
        #expect(try store.renewalInfo()["renewalBillingPlanType"] == .string("BILLED_UPFRONT"))
        #expect(try store.renewalInfo()["commitmentInfo"] == nil)

        let other = try Store(backend)
        #expect(try other.buy(Self.monthly, plan: .upFront).code == .ok, "a subscription whose file lists no plans is billed up front")
    }

    @Test(arguments: LedgerBackend.allCases)
    func anAskToBuyRequestKeepsItsPlan(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let asked = try store.buy(askToBuy: true)
        #expect(asked.code == .ok)
        #expect(try store.store.transaction(id: asked.value)?.state == .deferred)
        let approved = try store.store.inUnit { try store.engine.approve(transactionID: asked.value) }
        #expect(approved.code == .ok, "\(approved.message)")
        let record = try #require(try store.store.transaction(id: asked.value))
        let payload = try store.payload(record)
        #expect(payload["billingPlanType"] == .string("MONTHLY") && payload["price"] == .int(500))
        #expect(Self.members(payload["commitmentInfo"])["billingPeriodNumber"] == .int(1))
        #expect(try #require(record.expiresDate) < record.date + 32 * 86_400_000)
    }

    @Test(arguments: LedgerBackend.allCases)
    func aPriceIncreaseWaitsForTheCommitmentsEnd(backend: LedgerBackend) throws {
        // Unanswered: the commitment's months go on; its end, not month 3's, expires it.
        let store = try Store(backend)
        #expect(try store.buy().code == .ok)
        try store.advance("P2M")
        let original = try store.subscription().originalID
        #expect(try store.store.inUnit { try store.engine.requestPriceConsent(.transaction(original)) }.code == .ok)
        try store.advance("P1M")
        #expect(try store.subscription().status == .active, "month 4 is billed at the commitment's price")
        #expect(try store.engine.priceIncrease(of: original) == .pending, "the increase still waits for an answer")
        try store.advance("P8M")
        #expect(try store.purchases().count == 12)
        #expect(try store.purchases().allSatisfy { try store.payload($0)["price"] == .int(500) })
        try store.advance("P1M")
        #expect(try store.subscription().status == .expired, "unanswered at the commitment's end")
        #expect(try store.purchases().count == 12)
        #expect(try store.renewalInfo()["expirationIntent"] == .int(3))

        // Declined: the same, and the reason survives the months billed meanwhile.
        let declining = try Store(backend)
        #expect(try declining.buy().code == .ok)
        try declining.advance("P2M")
        let id = try declining.subscription().originalID
        #expect(try declining.store.inUnit { try declining.engine.requestPriceConsent(.transaction(id)) }.code == .ok)
        #expect(try declining.store.inUnit { try declining.engine.answerPriceConsent(false, .transaction(id)) }.code == .ok)
        try declining.advance("P9M")
        #expect(try declining.purchases().count == 12 && declining.subscription().status == .active)
        #expect(try declining.engine.priceIncrease(of: id) == .declined)
        try declining.advance("P1M")
        #expect(try declining.subscription().status == .expired)
        #expect(try declining.renewalInfo()["expirationIntent"] == .int(3))

        // Agreed: the renewal into a new commitment happens, and the increase is done.
        let agreeing = try Store(backend)
        #expect(try agreeing.buy().code == .ok)
        try agreeing.advance("P2M")
        let agreed = try agreeing.subscription().originalID
        #expect(try agreeing.store.inUnit { try agreeing.engine.requestPriceConsent(.transaction(agreed)) }.code == .ok)
        #expect(try agreeing.store.inUnit { try agreeing.engine.answerPriceConsent(true, .transaction(agreed)) }.code == .ok)
        try agreeing.advance("P1M")
        #expect(try agreeing.engine.priceIncrease(of: agreed) == .agreed, "kept until the new commitment")
        try agreeing.advance("P9M")
        #expect(try agreeing.purchases().count == 13 && agreeing.subscription().status == .active)
        #expect(try agreeing.engine.priceIncrease(of: agreed) == nil)
    }

    @Test(arguments: LedgerBackend.allCases)
    func aCommitmentGoesOnWhenTheCatalogueLosesThePlan(backend: LedgerBackend) throws {
        let store = try Store(backend)
        #expect(try store.buy().code == .ok)
        try store.advance("P3M")
        try store.setAutoRenew(false)
        store.engine.replaceCatalogs([Self.app: try Self.withoutMonthlyPlan])
        try store.advance("P1M")
        let purchases = try store.purchases()
        #expect(purchases.count == 5)
        let fifth = try store.payload(try #require(purchases.last))
        #expect(fifth["price"] == .int(500) && fifth["billingPlanType"] == .string("MONTHLY"), "month 5 at the commitment's price")
        #expect(Self.members(fifth["commitmentInfo"])["billingPeriodNumber"] == .int(5))
        let fifthRecord = try #require(purchases.last)
        #expect(try #require(fifthRecord.expiresDate) < fifthRecord.date + 32 * 86_400_000, "a month, not a year")
        try store.advance("P7M")
        #expect(try store.purchases().count == 12)
        #expect(try store.purchases().allSatisfy { try store.payload($0)["price"] == .int(500) })
        try store.advance("P1M")
        #expect(try store.subscription().status == .expired, "auto-renew off: nothing after the commitment")
        #expect(try store.purchases().count == 12)
    }

    @Test(arguments: LedgerBackend.allCases)
    func aWaitingPurchaseWhosePlanIsGoneFails(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let asked = try store.buy(askToBuy: true)
        #expect(asked.code == .ok)
        store.engine.replaceCatalogs([Self.app: try Self.withoutMonthlyPlan])
        let approved = try store.store.inUnit { try store.engine.approve(transactionID: asked.value) }
        #expect(approved.code == .ok, "\(approved.message)")
        let record = try #require(try store.store.transaction(id: asked.value))
        #expect(record.state == .failed && record.errorCode == StoreKitErrorCode.storeProductNotAvailable.rawValue)
        #expect(try store.store.subscriptions(uid: Self.buyer, app: Self.app).isEmpty, "nothing billed up front")
        #expect(try store.store.setting("commitment.wait.\(asked.value)") == nil)

        // An interrupted one is not resolved into an up-front purchase either.
        let interrupting = try Store(backend)
        _ = try interrupting.store.inUnit { try interrupting.engine.updateSwitches { $0.interrupted = true } }
        let interrupted = try interrupting.buy()
        #expect(try interrupting.store.transaction(id: interrupted.value)?.state == .failed)
        _ = try interrupting.store.inUnit { try interrupting.engine.updateSwitches { $0.interrupted = nil } }
        interrupting.engine.replaceCatalogs([Self.app: try Self.withoutMonthlyPlan])
        let resolved = try interrupting.store.inUnit { try interrupting.engine.resolve(transactionID: interrupted.value) }
        #expect(resolved.code == .storeKit && resolved.detail == StoreKitErrorCode.storeProductNotAvailable.rawValue, "\(resolved.message)")
        #expect(try interrupting.purchases().isEmpty && interrupting.store.subscriptions(uid: Self.buyer, app: Self.app).isEmpty)
        #expect(try interrupting.store.purchaseRequest(transactionID: interrupted.value) == nil)
    }

    @Test(arguments: LedgerBackend.allCases)
    func aDowngradeBoughtMonthlyRenewsMonthlyAfterTheCommitment(backend: LedgerBackend) throws {
        let store = try Store(backend)
        #expect(try store.buy().code == .ok)
        try store.advance("P1M")
        let bought = try store.buy("news.basic", plan: .monthly)
        #expect(bought.code == .ok, "\(bought.message)")
        let commitmentEnd = try #require(try store.engine.runningCommitment(of: try store.subscription().originalID)?.expires)
        // The downgrade's transaction: its first month, after the commitment.
        let downgrade = try #require(try store.store.transaction(id: bought.value))
        let downgradeEnd = try #require(downgrade.expiresDate)
        #expect(downgradeEnd > commitmentEnd + 27 * 86_400_000 && downgradeEnd < commitmentEnd + 32 * 86_400_000)
        // Months 2 to 12 still renew the yearly product, and say so.
        let renewal = try store.renewalInfo()
        #expect(renewal["autoRenewProductId"] == .string(Self.yearly))
        let commitment = Self.members(renewal["commitmentInfo"])
        #expect(commitment["commitmentAutoRenewProductId"] == .string("news.basic"))
        #expect(commitment["commitmentRenewalBillingPlanType"] == .string("MONTHLY") && commitment["commitmentRenewalPrice"] == .int(3000))
        try store.advance("P10M")
        #expect(try store.renewalInfo()["autoRenewProductId"] == .string("news.basic"), "the last month: the downgrade is next")
        #expect(try store.renewalInfo()["renewalBillingPlanType"] == .string("MONTHLY"))
        try store.advance("P1M")
        let last = try #require(try store.purchases().last)
        #expect(last.productID == "news.basic")
        let payload = try store.payload(last)
        #expect(payload["billingPlanType"] == .string("MONTHLY") && payload["price"] == .int(250))
        #expect(Self.members(payload["commitmentInfo"])["billingPeriodNumber"] == .int(1))
        #expect(try #require(last.expiresDate) < last.date + 32 * 86_400_000)
        #expect(try store.store.setting("commitment.next.\(try store.subscription().originalID)") == nil)
    }

    @Test(arguments: LedgerBackend.allCases)
    func theSettingsGoWithTheTransactionsAndTheHistory(backend: LedgerBackend) throws {
        let store = try Store(backend)
        let bought = try store.buy()
        try store.advance("P3M")
        #expect(try store.store.settings(prefix: "commitment.").count == 5, "4 billing periods and the running commitment")
        // Deleting the purchase deletes its renewals, and their billing periods; the subscription stays.
        #expect(try store.store.inUnit { try store.engine.deleteTransaction(id: bought.value) }.code == .ok)
        #expect(try store.store.settings(prefix: "commitment.").map(\.key) == ["commitment.running.\(bought.value)"])

        // Clearing the history deletes every setting of its transactions, subscriptions and waiting purchases.
        let cleared = try Store(backend)
        #expect(try cleared.buy().code == .ok)
        try cleared.advance("P2M")
        let original = try cleared.subscription().originalID
        #expect(try cleared.store.inUnit { try cleared.engine.requestPriceConsent(.transaction(original)) }.code == .ok)
        #expect(try cleared.buy("news.basic", plan: .monthly).code == .ok, "a downgrade bought monthly")
        let asking = ClientMessage.AddPayment(requestID: 2, key: "", productID: Self.yearly, quantity: 1, simulatesAskToBuy: true,
                                              billingPlanType: .monthly)
        let asked = try cleared.store.inUnit { try cleared.engine.addPayment(uid: Self.buyer + 1, app: Self.app, payment: asking) }
        #expect(asked.code == .ok)
        #expect(try cleared.store.setting("commitment.wait.\(asked.value)") != nil)
        #expect(try cleared.store.setting("commitment.next.\(original)") != nil)
        #expect(try cleared.store.inUnit { try cleared.engine.clear(uid: nil, app: Self.app) }.code == .ok)
        #expect(try cleared.store.settings(prefix: "commitment.").isEmpty)
        #expect(try cleared.store.settings(prefix: "priceIncrease.").isEmpty)
    }

    @Test(arguments: LedgerBackend.allCases)
    func theUpFrontPlanIsAlwaysThere(backend: LedgerBackend) throws {
        // A file that disables BILLED_UPFRONT still sells the product at its price, and says so.
        let json = Self.catalogJSON.replacingOccurrences(
            of: #""displayPrice" : "11.88", "commitmentDisplayPrice" : "11.88", "isEnabled" : true"#,
            with: #""displayPrice" : "11.88", "commitmentDisplayPrice" : "11.88", "isEnabled" : false"#)
        #expect(json != Self.catalogJSON)
        let catalog = try Catalog(json: Data(json.utf8), path: "news.storekit")
        let record = try #require(catalog.product(Self.yearly)).record(locale: "en_US", currencyCode: "USD")
        #expect(record.billingPlans.map(\.type) == [.upFront, .monthly])
        #expect(record.billingPlans.first?.priceCents == 1188 && record.billingPlans.first?.billingPeriod == "P1Y")

        let store = try Store(backend)
        store.engine.replaceCatalogs([Self.app: catalog])
        let upFront = try store.buy(plan: .upFront)
        #expect(upFront.code == .ok, "\(upFront.message)")
        let payload = try store.payload(try #require(try store.store.transaction(id: upFront.value)))
        #expect(payload["billingPlanType"] == .string("BILLED_UPFRONT") && payload["price"] == .int(11_880))
    }

    /// The catalogue with an introductory offer for the yearly product's monthly plan.
    static func withIntroductoryOffer(_ offer: String) throws -> Catalog {
        let json = catalogJSON.replacingOccurrences(
            of: #""recurringSubscriptionPeriod" : "P1Y", "groupNumber" : 2,"#,
            with: #""recurringSubscriptionPeriod" : "P1Y", "groupNumber" : 2, "introductoryOffers" : [ { "billingPlanType" : "MONTHLY", "#
                + offer + " } ],")
        precondition(json != catalogJSON)
        return try Catalog(json: Data(json.utf8), path: "news.storekit")
    }

    @Test(arguments: LedgerBackend.allCases)
    func anOfferPeriodOfAnotherLengthComesBeforeTheCommitment(backend: LedgerBackend) throws {
        let day: Int64 = 86_400_000
        // A week's free trial: not a billing period; the 12 months at 0.50 follow it.
        let store = try Store(backend)
        store.engine.replaceCatalogs([Self.app: try Self.withIntroductoryOffer(#""paymentMode" : "free", "subscriptionPeriod" : "P1W""#)])
        let bought = try store.buy()
        #expect(bought.code == .ok, "\(bought.message)")
        let trial = try #require(try store.store.transaction(id: bought.value))
        let trialEnd = try #require(trial.expiresDate)
        #expect(trialEnd == trial.date + 7 * day)
        let trialInfo = Self.members(try store.payload(trial)["commitmentInfo"])
        #expect(trialInfo["billingPeriodNumber"] == .int(0) && trialInfo["totalBillingPeriods"] == .int(12))
        let commitmentEnd = try #require(Self.int(trialInfo["commitmentExpiresDate"]))
        #expect(commitmentEnd > trialEnd + 364 * day && commitmentEnd < trialEnd + 367 * day, "12 months after the trial")
        try store.advance("P1W")
        let first = try #require(try store.purchases().last)
        let firstInfo = Self.members(try store.payload(first)["commitmentInfo"])
        #expect(firstInfo["billingPeriodNumber"] == .int(1) && firstInfo["commitmentExpiresDate"] == .int(commitmentEnd))
        try store.setAutoRenew(false)
        try store.advance("P11M")
        let paid = try store.purchases().filter { $0.id != trial.id }
        #expect(paid.count == 12, "12 billing periods")
        #expect(try paid.allSatisfy { try store.payload($0)["price"] == .int(500) }, "12 × 0.50: the commitment's price")
        #expect(paid.last?.expiresDate == commitmentEnd)
        try store.advance("P1M")
        #expect(try store.subscription().status == .expired && store.purchases().count == 13)

        // The buyer is not committed before the first billing period: auto-renew off in the trial ends it there.
        let trying = try Store(backend)
        trying.engine.replaceCatalogs([Self.app: try Self.withIntroductoryOffer(#""paymentMode" : "free", "subscriptionPeriod" : "P1W""#)])
        #expect(try trying.buy().code == .ok)
        try trying.setAutoRenew(false)
        #expect(try trying.renewalInfo()["autoRenewStatus"] == .int(0))
        try trying.advance("P1W")
        #expect(try trying.subscription().status == .expired && trying.purchases().count == 1, "nothing billed")

        // Three months paid up front: the commitment is those months and 12 more, 12 of them billed at 0.50.
        let upFront = try Store(backend)
        upFront.engine.replaceCatalogs([Self.app: try Self.withIntroductoryOffer(
            #""paymentMode" : "payUpFront", "displayPrice" : "1.00", "subscriptionPeriod" : "P3M""#)])
        let offer = try upFront.buy()
        #expect(offer.code == .ok)
        let offerRecord = try #require(try upFront.store.transaction(id: offer.value))
        let offerInfo = Self.members(try upFront.payload(offerRecord)["commitmentInfo"])
        #expect(offerInfo["billingPeriodNumber"] == .int(0))
        let end = try #require(Self.int(offerInfo["commitmentExpiresDate"]))
        #expect(end > offerRecord.date + (15 * 30 - 5) * day && end < offerRecord.date + (15 * 31 + 2) * day)
        try upFront.advance("P14M")
        let months = try upFront.purchases().filter { $0.id != offer.value }
        #expect(months.count == 12 && months.last?.expiresDate == end)
        #expect(Self.members(try upFront.payload(try #require(months.last))["commitmentInfo"])["billingPeriodNumber"] == .int(12))
    }
}
