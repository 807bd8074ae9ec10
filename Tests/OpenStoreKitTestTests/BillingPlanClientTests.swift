// Monthly subscriptions with a 12-month commitment as an app's own code meets them, in this
// process against a real storekitd: `SubscriptionInfo.pricingTerms` from the catalogue's billing
// plans, a purchase with `.billingPlanType(.monthly)`, the verified transaction's and renewal
// info's commitment, the next month's renewal, and the refusal of a plan a product lacks.
import Foundation
@_spi(StoreKitTest) import OpenStoreKit
@testable import OpenStoreKitTest
import StoreKitTestSupport
import Testing

extension OpenStoreKitTestSuites {
@Suite("Billing plans, in the app's process")
struct BillingPlanClientTests {
    static let yearly = "com.example.game.premium.yearly.monthly_billing"
    static let monthly = "com.example.game.premium.monthly.plain"

    static let catalog = """
    { "subscriptionGroups" : [ { "id" : "21482456", "name" : "Premium", "subscriptions" : [
        { "productID" : "\(yearly)", "type" : "RecurringSubscription", "displayPrice" : "11.88",
          "recurringSubscriptionPeriod" : "P1Y", "groupNumber" : 1, "referenceName" : "Premium yearly",
          "billingPlans" : [
            { "billingPlanType" : "BILLED_UPFRONT", "commitmentDisplayPrice" : "11.88", "displayPrice" : "11.88", "isEnabled" : true },
            { "billingPlanType" : "MONTHLY", "commitmentDisplayPrice" : "6.00", "displayPrice" : "0.5", "isEnabled" : true } ],
          "introductoryOffers" : [
            { "billingPlanType" : "MONTHLY", "paymentMode" : "payAsYouGo", "displayPrice" : "0.25", "numberOfPeriods" : 1,
              "subscriptionPeriod" : "P1M" } ] },
        { "productID" : "\(monthly)", "type" : "RecurringSubscription", "displayPrice" : "0.99",
          "recurringSubscriptionPeriod" : "P1M", "groupNumber" : 2, "referenceName" : "Premium monthly" } ] } ],
      "settings" : { "_storefront" : "USA", "_locale" : "en_US" } }
    """

    /// A daemon selling `catalog`, with this process bound to it.
    final class Store {
        let daemon: DaemonProcess

        init(catalog: String = BillingPlanClientTests.catalog) throws {
            daemon = try DaemonProcess()
            let config = (daemon.configFile as NSString).deletingLastPathComponent
            try catalog.write(toFile: config + "/catalog/commitment.storekit", atomically: true, encoding: .utf8)
            try "[App]\nID=\(TestStoreBinding.appIdentifier)\nCatalog=catalog/commitment.storekit\n"
                .write(toFile: config + "/apps.d/com.example.game.conf", atomically: true, encoding: .utf8)
            try daemon.start()
            TestStoreBinding.bind(socketPath: daemon.clientSocket, dataHome: daemon.dataHome)
        }

        deinit {
            TestStoreBinding.unbind()
            daemon.remove()
        }
    }

    @Test("pricingTerms lists the catalogue's plans with Apple's types, priced and formatted as the product")
    func pricingTerms() async throws {
        let store = try Store()
        let products = try await Product.products(for: [Self.yearly, Self.monthly])
        let product = try #require(products.first { $0.id == Self.yearly })
        let terms = try #require(product.subscription?.pricingTerms)
        #expect(terms.map(\.billingPlanType) == [.upFront, .monthly])
        #expect(terms[0].billingPrice == product.price && terms[0].billingDisplayPrice == product.displayPrice)
        #expect(terms[0].billingPeriod == product.subscription?.subscriptionPeriod)
        #expect(terms[0].commitmentInfo.price == Decimal(string: "11.88") && terms[0].subscriptionOffers.isEmpty)

        // As Apple's sample code finds the monthly plan.
        let term = try #require(product.subscription?.pricingTerms.first { $0.billingPlanType == .monthly })
        #expect(term.billingPrice == Decimal(string: "0.5") && term.billingDisplayPrice == "$0.50")
        #expect(term.billingPeriod.unit == .month && term.billingPeriod.value == 1)
        #expect(term.commitmentInfo.price == Decimal(6) && term.commitmentInfo.displayPrice == "$6.00")
        #expect(term.commitmentInfo.period.unit == .year && term.commitmentInfo.period.value == 1)
        // The monthly plan's own introductory offer, not the product's (it has none).
        #expect(product.subscription?.introductoryOffer == nil)
        #expect(term[offers: .introductory].map(\.displayPrice) == ["$0.25"])
        #expect(term[offers: .promotional].isEmpty)
        #expect(Product.SubscriptionInfo.BillingPlanType.monthly.rawValue == "MONTHLY")
        // iOS 27.3's shape of the same terms: a single price, its billing and its commitment.
        guard case .singlePrice(let single) = term.pricingModel else { return }
        #expect(single.billingInfo.price == term.billingPrice && single.billingInfo.displayPrice == "$0.50")
        #expect(single.billingInfo.period == term.billingPeriod && single.commitmentInfo == term.commitmentInfo)

        // A subscription whose catalogue lists no plans is billed up front, at its price.
        let plain = try #require(products.first { $0.id == Self.monthly })
        let plainTerms = try #require(plain.subscription?.pricingTerms)
        #expect(plainTerms.count == 1 && plainTerms[0].billingPlanType == .upFront)
        #expect(plainTerms[0].billingDisplayPrice == "$0.99" && plainTerms[0].commitmentInfo.period == plain.subscription?.subscriptionPeriod)

        // storekitctl shows the plans.
        let table = try store.daemon.ctl(["products", TestStoreBinding.appIdentifier])
        #expect(table.stdout.contains("BILLED_UPFRONT 11.88/P1Y, MONTHLY 0.5/P1M for P1Y (6.00)"), "\(table.stdout)")
        let json = try #require(try store.daemon.ctlJSON(["products", TestStoreBinding.appIdentifier]) as? [[String: Any]])
        let plans = try #require(json.first { $0["productIdentifier"] as? String == Self.yearly }?["billingPlans"] as? [[String: Any]])
        #expect(plans.map { $0["billingPlanType"] as? String } == ["BILLED_UPFRONT", "MONTHLY"])
        #expect(plans[1]["commitmentDisplayPrice"] as? String == "6.00" && plans[1]["billingPeriod"] as? String == "P1M")
        #expect(json.first { $0["productIdentifier"] as? String == Self.monthly }?["billingPlans"] == nil)
    }

    @Test("purchase(options: [.billingPlanType(.monthly)]): a month at a time, the commitment in the verified transaction and renewal info")
    func monthlyPurchase() async throws {
        let store = try Store()
        let product = try #require(try await Product.products(for: [Self.yearly]).first)
        guard product.subscription?.pricingTerms.first(where: { $0.billingPlanType == .monthly }) != nil else {
            Issue.record("no monthly plan")
            return
        }
        guard case .success(let verification) = try await product.purchase(options: [.billingPlanType(.monthly)]) else {
            Issue.record("the purchase did not succeed")
            return
        }
        let transaction = try verification.payloadValue
        #expect(transaction.billingPlanType == .monthly)
        let commitment = try #require(transaction.commitmentInfo)
        #expect(commitment.billingPeriodNumber == 1 && commitment.totalBillingPeriods == 12)
        #expect(commitment.price == Decimal(6))
        // The first month is the plan's introductory offer, at 0.25; one month, not a year.
        #expect(transaction.offer?.type == .introductory && transaction.price == Decimal(string: "0.25"))
        let expires = try #require(transaction.expirationDate)
        #expect(expires.timeIntervalSince(transaction.purchaseDate) < 32 * 86_400)
        #expect(commitment.expirationDate.timeIntervalSince(transaction.purchaseDate) > 364 * 86_400)
        await transaction.finish()

        let status = try #require(try await product.subscription?.status.first)
        let renewal = try status.renewalInfo.payloadValue
        #expect(renewal.willAutoRenew && renewal.renewalBillingPlanType == .monthly)
        let next = try #require(renewal.commitmentInfo)
        #expect(next.willAutoRenew && next.renewalDate == commitment.expirationDate)
        #expect(next.renewalPrice == Decimal(6) && next.autoRenewPreference == Self.yearly && next.renewalBillingPlanType == .monthly)

        // Auto-renew off: the commitment will not renew, but the next month still comes, at 0.50.
        #expect(try store.daemon.ctl(["auto-renew", "off", String(transaction.id)]).status == 0)
        let off = try #require(try await product.subscription?.status.first).renewalInfo.payloadValue
        #expect(off.willAutoRenew && off.commitmentInfo?.willAutoRenew == false)
        #expect(try store.daemon.ctl(["clock", "advance", "1mo"]).status == 0)
        var second: Transaction?
        for await result in Transaction.all {
            if case .verified(let candidate) = result, candidate.id != transaction.id { second = candidate }
        }
        let renewed = try #require(second)
        #expect(renewed.commitmentInfo?.billingPeriodNumber == 2 && renewed.commitmentInfo?.expirationDate == commitment.expirationDate)
        #expect(renewed.price == Decimal(string: "0.5") && renewed.reason == .renewal && renewed.billingPlanType == .monthly)
    }

    @Test("a plan the product does not have throws productUnavailable, and buys nothing")
    func unavailablePlan() async throws {
        let store = try Store()
        defer { withExtendedLifetime(store) {} }
        let product = try #require(try await Product.products(for: [Self.monthly]).first)
        await #expect(throws: Product.PurchaseError.productUnavailable) {
            _ = try await product.purchase(options: [.billingPlanType(.monthly)])
        }
        #expect(await Transaction.all.reduce(0) { count, _ in count + 1 } == 0)
        // Up front is what the product is sold as anyway.
        guard case .success(let verification) = try await product.purchase(options: [.billingPlanType(.upFront)]) else {
            Issue.record("an up-front purchase did not succeed")
            return
        }
        let transaction = try verification.payloadValue
        #expect(transaction.billingPlanType == .upFront && transaction.commitmentInfo == nil)
        #expect(try await product.subscription?.status.first?.renewalInfo.payloadValue.commitmentInfo == nil)
    }

    @Test("a catalogue that disables the up-front plan still lists it, and sells it, at the product's price")
    func upFrontIsAlwaysAPlan() async throws {
        let catalog = Self.catalog.replacingOccurrences(
            of: #""displayPrice" : "11.88", "isEnabled" : true"#, with: #""displayPrice" : "11.88", "isEnabled" : false"#)
        #expect(catalog != Self.catalog)
        let store = try Store(catalog: catalog)
        defer { withExtendedLifetime(store) {} }
        let product = try #require(try await Product.products(for: [Self.yearly]).first)
        let terms = try #require(product.subscription?.pricingTerms)
        #expect(terms.map(\.billingPlanType) == [.upFront, .monthly])
        #expect(terms.first?.billingDisplayPrice == product.displayPrice && terms.first?.billingPeriod == product.subscription?.subscriptionPeriod)
        guard case .success(let verification) = try await product.purchase(options: [.billingPlanType(.upFront)]) else {
            Issue.record("an up-front purchase did not succeed")
            return
        }
        let transaction = try verification.payloadValue
        #expect(transaction.billingPlanType == .upFront && transaction.price == Decimal(string: "11.88"))
    }
}
}
