import Foundation
import StoreKitEngine
import StoreKitLedger
import StoreKitTestSupport
import StoreKitWire
import Testing

/// Where the catalogue files used by these tests live.
enum CatalogFiles {
    /// The package root: three levels up from this file (Tests/StoreKitEngineTests/CatalogTests.swift).
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The project's own `.storekit` files, one per format version (see Fixtures/README.md).
    static let projectFixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

    static func projectFixture(_ name: String) -> String { projectFixtures.appendingPathComponent(name).path }

    /// The project fixtures by format version: `format-1.storekit` … `format-5.storekit`.
    static let formatVersions = [1, 2, 3, 4, 5]

    static func formatFixture(_ major: Int) -> String { projectFixture("format-\(major).storekit") }

    /// Real `.storekit` files from public projects, shared by the team (read-only). The directory
    /// sits next to CI's checkout only; a clone on its own does not have it.
    static let sharedFixtures = root.appendingPathComponent("../shared/fixtures/storekit").standardizedFileURL

    /// Whether `sharedFixtures` is there: the tests that read it run only then.
    static var sharedFixturesPresent: Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: sharedFixtures.path, isDirectory: &isDirectory) && isDirectory.boolValue
    }

    static func sharedFixture(_ name: String) -> String { sharedFixtures.appendingPathComponent(name).path }

    static let example = root.appendingPathComponent("config/catalog/example.storekit").path

    static func allSharedFixtures() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: sharedFixtures.path)) ?? []
        return names.filter { $0.hasSuffix(".storekit") }.sorted()
    }
}

/// What holds for every catalogue loaded from a file, whatever its format version.
private func expectConsistent(_ catalog: Catalog, loadedFrom path: String, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(!catalog.products.isEmpty, sourceLocation: sourceLocation)
    #expect(catalog.path == path, sourceLocation: sourceLocation)
    for product in catalog.products {
        #expect(catalog.product(product.id) == product, sourceLocation: sourceLocation)
        #expect((product.kind == .autoRenewable) == (product.subscriptionPeriod != nil), "\(product.id)", sourceLocation: sourceLocation)
        #expect((product.kind == .autoRenewable) == (product.subscriptionGroupID != nil), "\(product.id)", sourceLocation: sourceLocation)
        #expect((product.kind == .autoRenewable) == (product.groupLevel != nil), "\(product.id)", sourceLocation: sourceLocation)
        let record = product.record(locale: catalog.settings.locale, currencyCode: catalog.settings.currencyCode)
        #expect(record.productID == product.id, sourceLocation: sourceLocation)
        #expect(!record.localizedTitle.isEmpty, "\(product.id)", sourceLocation: sourceLocation)
    }
    for group in catalog.subscriptionGroups {
        for id in group.productIDs {
            #expect(catalog.product(id)?.subscriptionGroupID == group.id, sourceLocation: sourceLocation)
        }
    }
    let grouped = catalog.subscriptionGroups.flatMap(\.productIDs).sorted()
    #expect(grouped == catalog.products.filter { $0.kind == .autoRenewable }.map(\.id).sorted(), sourceLocation: sourceLocation)
}

/// Parses an inline catalogue, recording an issue instead of throwing.
private func parse(_ json: String, path: String = "inline.storekit") -> Result<Catalog, CatalogError> {
    Result { () throws(CatalogError) -> Catalog in try Catalog(json: Data(json.utf8), path: path) }
}

/// The error an inline catalogue must produce.
private func failure(_ json: String, path: String = "inline.storekit", sourceLocation: SourceLocation = #_sourceLocation) throws -> CatalogError {
    switch parse(json, path: path) {
    case .success:
        Issue.record("expected the catalogue to be rejected", sourceLocation: sourceLocation)
        throw CancellationError()
    case .failure(let error):
        return error
    }
}

/// One consumable with `extra` spliced into the product object.
private func oneProduct(_ extra: String = "", id: String = "com.example.x") -> String {
    """
    { "products" : [ { "productID" : "\(id)", "type" : "Consumable", "displayPrice" : "0.99", "referenceName" : "X"\(extra) } ] }
    """
}

@Suite(
    "Catalog: real .storekit files",
    .enabled(
        if: CatalogFiles.sharedFixturesPresent,
        "\(CatalogFiles.sharedFixtures.path) is absent (it sits next to CI's checkout only); Tests/StoreKitEngineTests/Fixtures covers every format version"))
struct CatalogSharedFileTests {
    @Test("the fixture directory is where the tests expect it")
    func fixturesExist() {
        #expect(CatalogFiles.allSharedFixtures().count >= 3, "no fixtures under \(CatalogFiles.sharedFixtures.path)")
    }

    @Test("every fixture loads", arguments: CatalogFiles.allSharedFixtures())
    func everyFixtureLoads(name: String) throws {
        let catalog = try Catalog.load(path: CatalogFiles.sharedFixture(name))
        expectConsistent(catalog, loadedFrom: CatalogFiles.sharedFixture(name))
    }

    @Test("format 5.0 (RevenueCat unit tests): a yearly subscription billed monthly, 0.5 a month, 6.00 committed")
    func revenueCatCommitment() throws {
        let catalog = try Catalog.load(path: CatalogFiles.sharedFixture("revenuecat-unit-tests.storekit"))
        let product = try #require(catalog.product("com.revenuecat.annual_with_commitment"))
        #expect(product.displayPrice == "11.88" && product.billingPlans.map(\.kind) == [.upFront, .monthly])
        // The up-front plan bills the product's price, whatever the file's copy of it says.
        #expect(product.billingPlans[0].priceCents == 1188)
        let plan = try #require(product.billingPlan(.monthly))
        #expect(plan.displayPrice == "0.5" && plan.priceCents == 50 && plan.billingPeriodCount == 12)
        #expect(plan.commitmentDisplayPrice == "6.00" && plan.commitmentPriceCents == 600)
    }

    @Test("format 5.0 (RevenueCat unit tests): all kinds, two groups, offers")
    func revenueCat() throws {
        let catalog = try Catalog.load(path: CatalogFiles.sharedFixture("revenuecat-unit-tests.storekit"))
        #expect(catalog.products.map(\.id) == [
            "lifetime",
            "com.revenuecat.consumable",
            "com.revenuecat.monthly_4.99.1_week_intro",
            "com.revenuecat.annual_39.99.2_week_intro",
            "com.revenuecat.annual_with_commitment",
            "com.revenuecat.annual_39.99_no_trial",
            "com.revenuecat.non_renewable",
        ])
        #expect(catalog.products.map(\.kind) == [
            .nonConsumable, .consumable, .autoRenewable, .autoRenewable, .autoRenewable, .autoRenewable, .nonRenewing,
        ])
        #expect(catalog.products.map { $0.subscriptionPeriod?.description } == [nil, nil, "P1M", "P1Y", "P1Y", "P1Y", nil])

        let lifetime = try #require(catalog.product("lifetime"))
        #expect(lifetime.displayPrice == "199.99")
        #expect(lifetime.priceCents == 19999)
        #expect(lifetime.price == Decimal(string: "199.99"))
        #expect(lifetime.familyShareable)
        #expect(lifetime.localizations == [.init(locale: "en_US", displayName: "Lifetime subscription", description: "")])

        #expect(catalog.subscriptionGroups.map(\.id) == ["7096FF06", "4BB746BD"])
        #expect(catalog.subscriptionGroups.map(\.name) == ["subscription_group_1", "subscription_group_2"])
        #expect(catalog.subscriptionGroups[0].productIDs == [
            "com.revenuecat.monthly_4.99.1_week_intro",
            "com.revenuecat.annual_39.99.2_week_intro",
            "com.revenuecat.annual_with_commitment",
        ])
        #expect(catalog.subscriptionGroups[1].productIDs == ["com.revenuecat.annual_39.99_no_trial"])

        let monthly = try #require(catalog.product("com.revenuecat.monthly_4.99.1_week_intro"))
        #expect(monthly.subscriptionGroupID == "7096FF06")
        #expect(monthly.groupLevel == 1)
        #expect(monthly.priceCents == 499)
        #expect(monthly.introductoryOffer == SubscriptionOffer(
            id: nil, paymentMode: "freeTrial", period: SubscriptionPeriod(iso8601: "P3M"), periodCount: 1,
            displayPrice: "0.00", priceCents: 0))
        #expect(monthly.promotionalOffers == [
            SubscriptionOffer(
                id: "com.revenuecat.monthly_4.99.1_week_intro.year_discount", paymentMode: "payUpFront",
                period: SubscriptionPeriod(iso8601: "P1Y"), periodCount: 1, displayPrice: "40.99", priceCents: 4099),
            SubscriptionOffer(
                id: "com.revenuecat.monthly_4.99.1_week_intro.pay_as_you_go", paymentMode: "payAsYouGo",
                period: SubscriptionPeriod(iso8601: "P1M"), periodCount: 2, displayPrice: "20.15", priceCents: 2015),
        ])
        let annual = try #require(catalog.product("com.revenuecat.annual_39.99.2_week_intro"))
        #expect(annual.introductoryOffer?.period == SubscriptionPeriod(value: 2, unit: .week))
        #expect(catalog.product("com.revenuecat.annual_with_commitment")?.introductoryOffer == nil)
        #expect(catalog.product("com.revenuecat.annual_with_commitment")?.priceCents == 1188)

        let nonRenewing = try #require(catalog.product("com.revenuecat.non_renewable"))
        #expect(nonRenewing.subscriptionGroupID == nil)
        #expect(nonRenewing.priceCents == 169)

        #expect(catalog.settings == CatalogSettings(
            askToBuyEnabled: false, failTransactionsEnabled: false, failErrorCode: nil, interruptedPurchases: [],
            storefront: "USA", locale: "en_US", timeRate: 0, billingGracePeriodEnabled: false,
            renewalBillingIssuesEnabled: false))
    }

    @Test("format 4.0 (Ritualist): one group on three levels, settings switched on")
    func ritualist() throws {
        let catalog = try Catalog.load(path: CatalogFiles.sharedFixture("ritualist-products.storekit"))
        #expect(catalog.products.map(\.id) == [
            "com.vladblajovan.ritualist.weekly", "com.vladblajovan.ritualist.monthly", "com.vladblajovan.ritualist.annual",
        ])
        #expect(catalog.products.allSatisfy { $0.kind == .autoRenewable })
        #expect(catalog.products.map { $0.subscriptionPeriod?.description } == ["P1W", "P1M", "P1Y"])
        #expect(catalog.products.map(\.groupLevel) == [1, 2, 3])
        #expect(catalog.products.map(\.displayPrice) == ["2.99", "9.99", "49.99"])

        #expect(catalog.subscriptionGroups.count == 1)
        let group = try #require(catalog.subscriptionGroup("21542332"))
        #expect(group.name == "Ritualist Pro")
        #expect(group.productIDs == catalog.products.map(\.id))
        #expect(group.localizations.first?.displayName == "Ritualist Pro")

        // "introductoryOffer" : null on the first two.
        #expect(catalog.products[0].introductoryOffer == nil)
        #expect(catalog.products[1].introductoryOffer == nil)
        let annualIntro = try #require(catalog.products[2].introductoryOffer)
        #expect(annualIntro.paymentMode == SubscriptionOffer.freeTrial)
        #expect(annualIntro.period?.description == "P1W")

        #expect(catalog.settings.billingGracePeriodEnabled)
        #expect(catalog.settings.renewalBillingIssuesEnabled)
        #expect(!catalog.settings.askToBuyEnabled)
        #expect(catalog.settings.storefront == "USA")
        #expect(catalog.settings.timeRate == 0)

        let record = try #require(catalog.record("com.vladblajovan.ritualist.monthly"))
        #expect(record == ProductRecord(
            productID: "com.vladblajovan.ritualist.monthly", kind: .autoRenewable,
            localizedTitle: "Ritualist Pro Monthly",
            localizedDescription: "Monthly subscription with all premium features", priceCents: 999,
            displayPrice: "9.99", currencyCode: "USD", locale: "en_US", subscriptionGroupID: "21542332",
            subscriptionPeriod: "P1M", familyShareable: false, subscriptionGroupLevel: 2, subscriptionGroupDisplayName: "Ritualist Pro"))
    }

    @Test("format 1.2 (StoreKitTesting): empty settings give the defaults")
    func storeKitTesting() throws {
        let catalog = try Catalog.load(path: CatalogFiles.sharedFixture("storekittesting-configuration.storekit"))
        #expect(catalog.products.map(\.id) == ["ID_1", "ID_2"])
        #expect(catalog.products.map(\.kind) == [.autoRenewable, .autoRenewable])
        #expect(catalog.products.map { $0.subscriptionPeriod?.description } == ["P1Y", "P1M"])
        #expect(catalog.products.map(\.priceCents) == [11999, 1199])
        #expect(catalog.products.map(\.referenceName) == ["Name 1", "Name 2"])
        #expect(catalog.subscriptionGroups == [SubscriptionGroup(id: "0D4D641A", name: "Subscriptions", productIDs: ["ID_1", "ID_2"])])
        #expect(catalog.settings == CatalogSettings())
    }
}

@Suite("Catalog: the project's .storekit fixtures, one per format version")
struct CatalogFormatVersionTests {
    /// `version` as the file states it, `major.minor` (the loader does not keep it).
    private static func version(of path: String) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let root = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let version = try #require(root["version"] as? [String: Any])
        return "\(try #require(version["major"] as? Int)).\(try #require(version["minor"] as? Int))"
    }

    private static func offer(
        id: String? = nil, _ mode: String, _ period: String, count: Int = 1, price: String = "0.00", cents: Int64 = 0
    ) -> SubscriptionOffer {
        SubscriptionOffer(id: id, paymentMode: mode, period: SubscriptionPeriod(iso8601: period), periodCount: count, displayPrice: price, priceCents: cents)
    }

    @Test("each fixture is the format version its name says, and loads consistently", arguments: CatalogFiles.formatVersions)
    func everyVersion(major: Int) throws {
        let path = CatalogFiles.formatFixture(major)
        #expect(try Self.version(of: path).hasPrefix("\(major)."))
        expectConsistent(try Catalog.load(path: path), loadedFrom: path)
    }

    @Test("format 1.1: settings at the top level, a non-renewing subscription among the products, intro and promotional offers")
    func format1() throws {
        let path = CatalogFiles.formatFixture(1)
        #expect(try Self.version(of: path) == "1.1")
        let catalog = try Catalog.load(path: path)
        #expect(catalog.products.map(\.id) == [
            "com.lanternfish.reader.tokens10",
            "com.lanternfish.reader.fonts",
            "com.lanternfish.reader.summer_shelf",
            "com.lanternfish.reader.plus.monthly",
            "com.lanternfish.reader.plus.yearly",
        ])
        #expect(catalog.products.map(\.kind) == [.consumable, .nonConsumable, .nonRenewing, .autoRenewable, .autoRenewable])
        #expect(catalog.products.map(\.displayPrice) == ["0.99", "2.49", "5.99", "3.99", "34.99"])
        #expect(catalog.products.map(\.priceCents) == [99, 249, 599, 399, 3499])
        #expect(catalog.products.map(\.familyShareable) == [false, true, false, false, false])
        #expect(catalog.products.map { $0.subscriptionPeriod?.description } == [nil, nil, nil, "P1M", "P1Y"])

        #expect(catalog.subscriptionGroups == [SubscriptionGroup(
            id: "3F9B2D10", name: "Lanternfish Plus",
            productIDs: ["com.lanternfish.reader.plus.monthly", "com.lanternfish.reader.plus.yearly"])])
        let monthly = try #require(catalog.product("com.lanternfish.reader.plus.monthly"))
        #expect(monthly.groupLevel == 1)
        // An introductory free trial without numberOfPeriods lasts one period.
        #expect(monthly.introductoryOffer == Self.offer(SubscriptionOffer.freeTrial, "P1W"))
        #expect(monthly.promotionalOffers == [Self.offer(
            id: "com.lanternfish.reader.plus.monthly.comeback", SubscriptionOffer.payAsYouGo, "P1M", count: 3, price: "1.99", cents: 199)])
        let yearly = try #require(catalog.product("com.lanternfish.reader.plus.yearly"))
        #expect(yearly.groupLevel == 1)
        #expect(yearly.introductoryOffer == nil)   // "introductoryOffer" : null
        #expect(yearly.promotionalOffers.isEmpty)

        // `settings` is empty; the switches sit at the top level, as in the oldest files.
        #expect(catalog.settings == CatalogSettings(
            askToBuyEnabled: true, failTransactionsEnabled: false, failErrorCode: nil,
            interruptedPurchases: ["com.lanternfish.reader.fonts"], storefront: "CAN", locale: "en_CA",
            timeRate: TimeRate.fiveMinutesIsOneDay.rawValue, billingGracePeriodEnabled: false, renewalBillingIssuesEnabled: false))
        #expect(catalog.settings.currencyCode == "CAD")

        #expect(catalog.record("com.lanternfish.reader.tokens10") == ProductRecord(
            productID: "com.lanternfish.reader.tokens10", kind: .consumable, localizedTitle: "10 Reading Tokens",
            localizedDescription: "Ten tokens to unlock single chapters.", priceCents: 99, displayPrice: "0.99",
            currencyCode: "CAD", locale: "en_CA"))
        let tokens = try #require(catalog.product("com.lanternfish.reader.tokens10"))
        #expect(tokens.record(locale: "fr_CA", currencyCode: "CAD").localizedTitle == "10 jetons de lecture")
        #expect(catalog.record("com.lanternfish.reader.summer_shelf")?.subscriptionPeriod == nil)
    }

    @Test("format 2.0: nonRenewingSubscriptions, a settings object with failing and interrupted purchases, group levels, code offers read past")
    func format2() throws {
        let path = CatalogFiles.formatFixture(2)
        #expect(try Self.version(of: path) == "2.0")
        let catalog = try Catalog.load(path: path)
        #expect(catalog.products.map(\.id) == [
            "com.lanternfish.reader.tokens10",
            "com.lanternfish.reader.tokens50",
            "com.lanternfish.reader.fonts",
            "com.lanternfish.reader.plus.monthly",
            "com.lanternfish.reader.plus.yearly",
            "com.lanternfish.reader.premium.monthly",
            "com.lanternfish.reader.book_club.autumn",
        ])
        #expect(catalog.products.map(\.kind) == [
            .consumable, .consumable, .nonConsumable, .autoRenewable, .autoRenewable, .autoRenewable, .nonRenewing,
        ])
        #expect(catalog.products.map(\.priceCents) == [99, 399, 249, 399, 3499, 899, 799])
        #expect(catalog.products.map(\.groupLevel) == [nil, nil, nil, 2, 2, 1, nil])
        #expect(catalog.products.map { $0.subscriptionPeriod?.description } == [nil, nil, nil, "P1M", "P1Y", "P1M", nil])

        let group = try #require(catalog.subscriptionGroup("3F9B2D10"))
        #expect(catalog.subscriptionGroups.count == 1)
        #expect(group.name == "Lanternfish Plus")
        // Level 1 (the highest level of service) first, then level 2 in file order.
        #expect(group.productIDs == [
            "com.lanternfish.reader.premium.monthly", "com.lanternfish.reader.plus.monthly", "com.lanternfish.reader.plus.yearly",
        ])
        #expect(group.localizations == [
            .init(locale: "de_DE", displayName: "Lanternfish Plus", description: "Unbegrenzt lesen."),
            .init(locale: "en_US", displayName: "Lanternfish Plus", description: "Read without limits."),
        ])

        // Offer codes (codeOffers) are not introductory offers.
        let plusMonthly = try #require(catalog.product("com.lanternfish.reader.plus.monthly"))
        #expect(plusMonthly.introductoryOffer == nil)
        #expect(plusMonthly.promotionalOffers.isEmpty)
        #expect(catalog.product("com.lanternfish.reader.plus.yearly")?.introductoryOffer == Self.offer(
            SubscriptionOffer.payUpFront, "P6M", price: "9.99", cents: 999))
        let premium = try #require(catalog.product("com.lanternfish.reader.premium.monthly"))
        #expect(premium.familyShareable)
        #expect(premium.promotionalOffers == [Self.offer(
            id: "com.lanternfish.reader.premium.monthly.upgrade", SubscriptionOffer.payUpFront, "P3M", price: "19.99", cents: 1999)])

        #expect(catalog.settings == CatalogSettings(
            askToBuyEnabled: false, failTransactionsEnabled: true, failErrorCode: 2,
            interruptedPurchases: ["com.lanternfish.reader.tokens50"], storefront: "DEU", locale: "de_DE", timeRate: 0,
            billingGracePeriodEnabled: false, renewalBillingIssuesEnabled: false))
        #expect(catalog.record("com.lanternfish.reader.book_club.autumn") == ProductRecord(
            productID: "com.lanternfish.reader.book_club.autumn", kind: .nonRenewing, localizedTitle: "Lesekreis Herbst",
            localizedDescription: "Drei Monate Lesekreis mit Autorengesprächen.", priceCents: 799, displayPrice: "7.99",
            currencyCode: "EUR", locale: "de_DE"))
        #expect(catalog.record("com.lanternfish.reader.fonts")?.familyShareable == true)
    }

    @Test("format 3.0: billing grace period and billing issues, a renewal time rate, two groups, free and pay-up-front promotional offers")
    func format3() throws {
        let path = CatalogFiles.formatFixture(3)
        #expect(try Self.version(of: path) == "3.0")
        let catalog = try Catalog.load(path: path)
        #expect(catalog.products.map(\.id) == [
            "com.lanternfish.reader.tip.small", "com.lanternfish.reader.plus.monthly", "com.lanternfish.reader.audio.weekly",
        ])
        #expect(catalog.products.map(\.kind) == [.consumable, .autoRenewable, .autoRenewable])
        #expect(catalog.products.map(\.priceCents) == [199, 399, 149])

        #expect(catalog.subscriptionGroups == [
            SubscriptionGroup(id: "3F9B2D10", name: "Lanternfish Plus", productIDs: ["com.lanternfish.reader.plus.monthly"]),
            SubscriptionGroup(
                id: "8D4471E5", name: "Lanternfish Audio", productIDs: ["com.lanternfish.reader.audio.weekly"],
                localizations: [.init(locale: "en_US", displayName: "Lanternfish Audio", description: "Narrated editions of every book.")]),
        ])

        let plus = try #require(catalog.product("com.lanternfish.reader.plus.monthly"))
        #expect(plus.familyShareable)
        #expect(plus.subscriptionGroupID == "3F9B2D10")
        #expect(plus.introductoryOffer == Self.offer(SubscriptionOffer.payAsYouGo, "P1M", count: 3, price: "0.99", cents: 99))
        #expect(plus.promotionalOffers == [
            Self.offer(id: "com.lanternfish.reader.plus.monthly.gift_month", SubscriptionOffer.freeTrial, "P1M"),
            Self.offer(id: "com.lanternfish.reader.plus.monthly.half_year", SubscriptionOffer.payUpFront, "P6M", price: "17.99", cents: 1799),
        ])
        let audio = try #require(catalog.product("com.lanternfish.reader.audio.weekly"))
        #expect(audio.subscriptionGroupID == "8D4471E5")
        #expect(audio.subscriptionPeriod == SubscriptionPeriod(value: 1, unit: .week))
        #expect(audio.introductoryOffer == Self.offer(SubscriptionOffer.freeTrial, "P3D"))

        // `_timeRate` is read; the object-valued `_compatibilityTimeRate` beside it is not.
        #expect(catalog.settings == CatalogSettings(
            askToBuyEnabled: false, failTransactionsEnabled: false, failErrorCode: nil, interruptedPurchases: [],
            storefront: "USA", locale: "en_US", timeRate: TimeRate.oneRenewalEveryThirtySeconds.rawValue,
            billingGracePeriodEnabled: true, renewalBillingIssuesEnabled: true))

        // No localization: the title is the reference name.
        #expect(catalog.record("com.lanternfish.reader.tip.small") == ProductRecord(
            productID: "com.lanternfish.reader.tip.small", kind: .consumable, localizedTitle: "Small Tip",
            localizedDescription: "", priceCents: 199, displayPrice: "1.99", currencyCode: "USD", locale: "en_US"))
    }

    @Test("format 4.0: app policies and win-back offers read past, tied levels keep file order, Ask to Buy and failing purchases in GBR")
    func format4() throws {
        let path = CatalogFiles.formatFixture(4)
        #expect(try Self.version(of: path) == "4.0")
        let catalog = try Catalog.load(path: path)
        #expect(catalog.products.map(\.id) == [
            "com.lanternfish.reader.tokens10",
            "com.lanternfish.reader.collection.harbour_lights",
            "com.lanternfish.reader.plus.yearly",
            "com.lanternfish.reader.plus.monthly",
            "com.lanternfish.reader.premium.monthly",
        ])
        #expect(catalog.products.map(\.kind) == [.consumable, .nonConsumable, .autoRenewable, .autoRenewable, .autoRenewable])
        #expect(catalog.products.map(\.displayPrice) == ["0.89", "14.99", "29.99", "3.49", "7.99"])
        #expect(catalog.products.map(\.familyShareable) == [false, true, false, false, true])
        #expect(catalog.products.map(\.groupLevel) == [nil, nil, 2, 2, 1])

        let group = try #require(catalog.subscriptionGroup("3F9B2D10"))
        #expect(group.productIDs == [
            "com.lanternfish.reader.premium.monthly", "com.lanternfish.reader.plus.yearly", "com.lanternfish.reader.plus.monthly",
        ])
        #expect(group.localizations.map(\.locale) == ["en_GB"])

        // Win-back offers are neither introductory nor promotional offers.
        let yearly = try #require(catalog.product("com.lanternfish.reader.plus.yearly"))
        #expect(yearly.introductoryOffer == nil)
        #expect(yearly.promotionalOffers.isEmpty)
        let monthly = try #require(catalog.product("com.lanternfish.reader.plus.monthly"))
        #expect(monthly.introductoryOffer == Self.offer(SubscriptionOffer.freeTrial, "P2W"))
        #expect(monthly.promotionalOffers == [Self.offer(
            id: "com.lanternfish.reader.plus.monthly.loyal_reader", SubscriptionOffer.payAsYouGo, "P1M", count: 2, price: "1.49", cents: 149)])

        #expect(catalog.settings == CatalogSettings(
            askToBuyEnabled: true, failTransactionsEnabled: true, failErrorCode: nil, interruptedPurchases: [],
            storefront: "GBR", locale: "en_GB", timeRate: TimeRate.monthlyRenewalEveryFifteenMinutes.rawValue,
            billingGracePeriodEnabled: false, renewalBillingIssuesEnabled: false))
        #expect(catalog.record("com.lanternfish.reader.premium.monthly") == ProductRecord(
            productID: "com.lanternfish.reader.premium.monthly", kind: .autoRenewable, localizedTitle: "Premium Monthly",
            localizedDescription: "Books and audiobooks for the whole family.", priceCents: 799, displayPrice: "7.99",
            currencyCode: "GBP", locale: "en_GB", subscriptionGroupID: "3F9B2D10", subscriptionPeriod: "P1M",
            familyShareable: true, subscriptionGroupLevel: 1, subscriptionGroupDisplayName: "Lanternfish Plus"))
        // Clients get the offers with the product (StoreKit 2's SubscriptionInfo, SKProductDiscount).
        let monthlyRecord = try #require(catalog.record("com.lanternfish.reader.plus.monthly"))
        #expect(monthlyRecord.introductoryOffer == ProductRecord.Offer(paymentMode: .freeTrial, period: "P2W"))
        #expect(monthlyRecord.promotionalOffers == [ProductRecord.Offer(
            id: "com.lanternfish.reader.plus.monthly.loyal_reader", paymentMode: .payAsYouGo, period: "P1M",
            periodCount: 2, priceCents: 149, displayPrice: "1.49")])
        #expect(catalog.record("com.lanternfish.reader.tokens10")?.introductoryOffer == nil)
    }

    @Test("format 5.0: introductoryOffers, billing plans and their offers, whole-yen prices in JPN")
    func format5() throws {
        let path = CatalogFiles.formatFixture(5)
        #expect(try Self.version(of: path) == "5.0")
        let catalog = try Catalog.load(path: path)
        #expect(catalog.products.map(\.id) == [
            "com.lanternfish.reader.tokens10",
            "com.lanternfish.reader.plus.monthly",
            "com.lanternfish.reader.plus.yearly",
            "com.lanternfish.reader.premium.monthly",
            "com.lanternfish.reader.book_club.summer",
        ])
        #expect(catalog.products.map(\.kind) == [.consumable, .autoRenewable, .autoRenewable, .autoRenewable, .nonRenewing])
        // Prices without a decimal point, as yen are written; cents are the price × 100 whatever the currency.
        #expect(catalog.products.map(\.displayPrice) == ["160", "600", "6000", "1200", "1200"])
        #expect(catalog.products.map(\.priceCents) == [16_000, 60_000, 600_000, 120_000, 120_000])
        #expect(catalog.products.map(\.price) == ["160", "600", "6000", "1200", "1200"].map { Decimal(string: $0) })

        let group = try #require(catalog.subscriptionGroup("3F9B2D10"))
        #expect(group.productIDs == [
            "com.lanternfish.reader.premium.monthly", "com.lanternfish.reader.plus.monthly", "com.lanternfish.reader.plus.yearly",
        ])

        // Only `introductoryOffers` (no `introductoryOffer` key): its first element is the offer.
        let monthly = try #require(catalog.product("com.lanternfish.reader.plus.monthly"))
        #expect(monthly.introductoryOffer == Self.offer(SubscriptionOffer.freeTrial, "P1M"))
        #expect(monthly.promotionalOffers == [Self.offer(
            id: "com.lanternfish.reader.plus.monthly.half_price", SubscriptionOffer.payAsYouGo, "P1M", count: 2, price: "300", cents: 30_000)])
        // The offers marked `MONTHLY` are the monthly plan's, not the product's.
        let yearly = try #require(catalog.product("com.lanternfish.reader.plus.yearly"))
        #expect(yearly.introductoryOffer == nil)
        #expect(yearly.promotionalOffers.isEmpty)
        #expect(yearly.displayPrice == "6000")
        #expect(yearly.billingPlans.map(\.kind) == [.upFront, .monthly])
        let upFront = yearly.billingPlans[0]
        #expect(upFront.displayPrice == "6000" && upFront.priceCents == 600_000 && upFront.billingPeriod.description == "P1Y")
        #expect(upFront.billingPeriodCount == 1 && upFront.commitmentPriceCents == 600_000)
        #expect(upFront.winBackOffers.map(\.offer.id) == ["com.lanternfish.reader.plus.yearly.return"])
        let plan = try #require(yearly.billingPlan(.monthly))
        #expect(plan.price == Decimal(500) && plan.priceCents == 50_000 && plan.displayPrice == "500")
        #expect(plan.billingPeriod.description == "P1M" && plan.billingPeriodCount == 12)
        #expect(plan.commitmentPrice == Decimal(6000) && plan.commitmentPriceCents == 600_000 && plan.commitmentDisplayPrice == "6000")
        #expect(plan.introductoryOffer == Self.offer(SubscriptionOffer.freeTrial, "P1W"))
        #expect(plan.promotionalOffers == [Self.offer(
            id: "com.lanternfish.reader.plus.yearly.monthly_half_price", SubscriptionOffer.payAsYouGo, "P1M", count: 2, price: "250",
            cents: 25_000)])
        #expect(plan.winBackOffers.isEmpty)
        let yearlyRecord = yearly.record(locale: "ja_JP", currencyCode: "JPY")
        #expect(yearlyRecord.billingPlans.count == 2)
        #expect(yearlyRecord.billingPlans[1] == ProductRecord.BillingPlan(
            type: .monthly, billingPeriod: "P1M", priceCents: 50_000, displayPrice: "500", commitmentPeriod: "P1Y",
            commitmentPriceCents: 600_000, commitmentDisplayPrice: "6000",
            introductoryOffer: .init(paymentMode: .freeTrial, period: "P1W"),
            promotionalOffers: [.init(id: "com.lanternfish.reader.plus.yearly.monthly_half_price", paymentMode: .payAsYouGo,
                                      period: "P1M", periodCount: 2, priceCents: 25_000, displayPrice: "250")]))
        #expect(yearlyRecord.billingPlans[0].winBackOffers.map(\.id) == ["com.lanternfish.reader.plus.yearly.return"])
        // A disabled plan is read past: the premium subscription is billed up front only.
        let premium = try #require(catalog.product("com.lanternfish.reader.premium.monthly"))
        #expect(premium.billingPlans.map(\.kind) == [.upFront])
        #expect(premium.billingPlan(.monthly) == nil)
        // A product whose file lists no plans is billed up front, and tells clients no plans.
        let consumable = try #require(catalog.product("com.lanternfish.reader.tokens10"))
        #expect(consumable.billingPlans.isEmpty && consumable.billingPlan(.upFront) == nil)
        // Both spellings present and equal.
        #expect(catalog.product("com.lanternfish.reader.premium.monthly")?.introductoryOffer == Self.offer(
            SubscriptionOffer.payUpFront, "P3M", price: "900", cents: 90_000))

        #expect(catalog.settings == CatalogSettings(storefront: "JPN", locale: "ja_JP"))
        #expect(catalog.settings.currencyCode == "JPY")
        #expect(catalog.record("com.lanternfish.reader.tokens10") == ProductRecord(
            productID: "com.lanternfish.reader.tokens10", kind: .consumable, localizedTitle: "読書トークン10枚",
            localizedDescription: "章ごとに使える読書トークン10枚。", priceCents: 16_000, displayPrice: "160",
            currencyCode: "JPY", locale: "ja_JP"))
        let club = try #require(catalog.product("com.lanternfish.reader.book_club.summer"))
        #expect(club.record(locale: "ja_JP", currencyCode: "JPY").localizedTitle == "夏の読書会")
        #expect(club.record(locale: "en_GB", currencyCode: "GBP").localizedTitle == "Summer Book Club")
    }
}

@Suite("Catalog: bad and unexpected files on disk")
struct CatalogBadFileTests {
    /// A fixture's text with `edit` applied, written to a fresh directory; returns the new file's path.
    private static func edited(_ major: Int, in directory: TemporaryDirectory, _ edit: (String) -> String) throws -> String {
        let text = try String(contentsOfFile: CatalogFiles.formatFixture(major), encoding: .utf8)
        let edited = edit(text)
        #expect(edited != text, "the edit changed nothing")
        try directory.write("edited.storekit", edited)
        return directory.file("edited.storekit")
    }

    @Test("a file cut short is a syntax error naming the file, line and column")
    func truncated() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        // The first 22 lines of format 2: the file ends after the last member of its first
        // non-renewing subscription, `"type" : "NonRenewingSubscription"`.
        let path = try Self.edited(2, in: directory) { text in
            text.split(separator: "\n", omittingEmptySubsequences: false).prefix(22).joined(separator: "\n")
        }
        let error = try #require(throws: CatalogError.self) { try Catalog.load(path: path) }
        #expect(error.path == path)
        #expect(error.location == "line 22 column 41")
        #expect(error.reason == "unexpected end of file, expected ',' or '}'")
    }

    @Test("a wrong value deep in a real-shaped file is named by its JSON path")
    func badPeriod() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = try Self.edited(3, in: directory) { $0.replacingOccurrences(of: "\"P1W\"", with: "\"P1Q\"") }
        let error = try #require(throws: CatalogError.self) { try Catalog.load(path: path) }
        #expect(error == CatalogError(
            path: path, location: "subscriptionGroups[1].subscriptions[0].recurringSubscriptionPeriod",
            reason: "expected a period like P1W, P1M or P1Y, found \"P1Q\""))
    }

    @Test("billing plans: a second enabled plan, a monthly plan of a monthly product, a plan without its type, a commitment too dear")
    func badBillingPlans() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let plans = "subscriptionGroups[0].subscriptions[1].billingPlans"
        let monthly = "\"billingPlanType\" : \"MONTHLY\",\n              \"commitmentDisplayPrice\" : \"6000\",\n              \"displayPrice\" : \"500\""
        let cases: [(from: String, to: String, location: String, reason: String)] = [
            ("\"billingPlanType\" : \"MONTHLY\",\n              \"commitmentDisplayPrice\" : \"6000\"",
             "\"billingPlanType\" : \"BILLED_UPFRONT\",\n              \"commitmentDisplayPrice\" : \"6000\"",
             "\(plans)[1].billingPlanType", "a second enabled BILLED_UPFRONT billing plan"),
            ("\"displayPrice\" : \"100\",\n              \"internalID\" : \"9A72F633\",\n              \"isEnabled\" : false",
             "\"displayPrice\" : \"100\",\n              \"internalID\" : \"9A72F633\",\n              \"isEnabled\" : true",
             "subscriptionGroups[0].subscriptions[2].billingPlans[1]",
             "a MONTHLY billing plan commits to the subscription's period in months, and P1M is not 2 months or more"),
            ("\"billingPlanType\" : \"MONTHLY\",\n              \"commitmentDisplayPrice\" : \"6000\",\n              \"displayPrice\" : \"500\"",
             "\"billingPlanType\" : \"MONTHLY\",\n              \"commitmentDisplayPrice\" : \"6000\",\n              \"displayPrice\" : \"5oo\"",
             "\(plans)[1].displayPrice", "expected a price like \"0.99\", found \"5oo\""),
            // 12 months of the dearest price a file may write: more than a price may be.
            (monthly, monthly.replacingOccurrences(of: "\"500\"", with: "\"999999999999.99\""),
             "\(plans)[1].displayPrice", "12 months at 999999999999.99 cost more than a price may be (12 digits before the point)"),
        ]
        for (from, to, location, reason) in cases {
            let path = try Self.edited(5, in: directory) { $0.replacingOccurrences(of: from, with: to) }
            let error = try #require(throws: CatalogError.self, "\(to)") { try Catalog.load(path: path) }
            #expect(error == CatalogError(path: path, location: location, reason: reason))
        }
        // A plan must say which it is.
        let path = try Self.edited(5, in: directory) {
            $0.replacingOccurrences(of: "\"billingPlanType\" : \"MONTHLY\",\n              \"commitmentDisplayPrice\" : \"6000\",", with: "")
        }
        let error = try #require(throws: CatalogError.self) { try Catalog.load(path: path) }
        #expect(error == CatalogError(path: path, location: "\(plans)[1].billingPlanType", reason: "missing required key \"billingPlanType\""))
    }

    @Test("a commitment whose months times its price overflow is refused, not a trap")
    func commitmentPriceOverflow() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = try Self.edited(5, in: directory) {
            $0.replacingOccurrences(of: "\"displayPrice\" : \"500\"", with: "\"displayPrice\" : \"999999999999.99\"")
                .replacingOccurrences(of: "\"recurringSubscriptionPeriod\" : \"P1Y\"", with: "\"recurringSubscriptionPeriod\" : \"P9999Y\"")
        }
        let error = try #require(throws: CatalogError.self) { try Catalog.load(path: path) }
        #expect(error.location == "subscriptionGroups[0].subscriptions[1].billingPlans[1].displayPrice")
        #expect(error.reason == "119988 months at 999999999999.99 cost more than a price may be (12 digits before the point)")
    }

    @Test("billing plans and offers of a type this store does not know are read past, and so is a disabled plan, whatever it says")
    func unknownAndDisabledPlans() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let yearly = "com.lanternfish.reader.plus.yearly"
        // A plan of a later type: the product keeps the plans it knows.
        var path = try Self.edited(5, in: directory) {
            $0.replacingOccurrences(of: "\"billingPlanType\" : \"MONTHLY\",\n              \"commitmentDisplayPrice\" : \"6000\"",
                                    with: "\"billingPlanType\" : \"QUARTERLY\",\n              \"commitmentDisplayPrice\" : \"6000\"")
        }
        var product = try #require(try Catalog.load(path: path).product(yearly))
        #expect(product.billingPlans.map(\.kind) == [.upFront])
        // An offer of a later plan type belongs to no plan here.
        path = try Self.edited(5, in: directory) {
            $0.replacingOccurrences(of: "\"billingPlanType\" : \"MONTHLY\",\n              \"internalID\" : \"9A72F624\"",
                                    with: "\"billingPlanType\" : \"WEEKLY\",\n              \"internalID\" : \"9A72F624\"")
        }
        product = try #require(try Catalog.load(path: path).product(yearly))
        #expect(product.billingPlans.map(\.kind) == [.upFront, .monthly])
        #expect(product.billingPlan(.monthly)?.introductoryOffer == nil && product.introductoryOffer == nil)
        // A disabled plan of an unknown type, or with none, is read past.
        for replacement in ["\"billingPlanType\" : \"WEEKLY\",", ""] {
            path = try Self.edited(5, in: directory) {
                $0.replacingOccurrences(of: "\"billingPlanType\" : \"MONTHLY\",\n              \"commitmentDisplayPrice\" : \"1200\",",
                                        with: replacement)
            }
            let premium = try #require(try Catalog.load(path: path).product("com.lanternfish.reader.premium.monthly"))
            #expect(premium.billingPlans.map(\.kind) == [.upFront], "\(replacement)")
        }
    }

    @Test("a product id with \\u0000 is refused with its JSON path, not stored cut at the NUL")
    func nulInProductID() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = try Self.edited(3, in: directory) { text in
            guard let id = text.range(of: "\"productID\" : \"")?.upperBound ?? text.range(of: "\"productID\":\"")?.upperBound else {
                return text
            }
            var edited = text
            edited.insert(contentsOf: "x\\u0000", at: id)
            return edited
        }
        let error = try #require(throws: CatalogError.self) { try Catalog.load(path: path) }
        #expect(error.location.hasSuffix(".productID"), "\(error)")
        #expect(error.reason.contains("NUL"))
    }

    @Test("a settings string (the locale) with \\u0000 is refused too")
    func nulInSettings() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = try Self.edited(4, in: directory) { text in
            text.replacingOccurrences(of: "\"_locale\" : \"", with: "\"_locale\" : \"en\\u0000")
        }
        let error = try #require(throws: CatalogError.self) { try Catalog.load(path: path) }
        #expect(error.reason.contains("NUL"), "\(error)")
    }

    @Test("a FIFO is not a catalogue: refused at once, not waited on")
    func fifo() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("products.storekit")
        #expect(mkfifo(path, 0o600) == 0)
        let started = Date()
        #expect(throws: CatalogError(path: path, location: "", reason: "not a regular file")) { try Catalog.load(path: path) }
        #expect(Date().timeIntervalSince(started) < 2)
    }

    @Test("a directory is not a catalogue")
    func directory() throws {
        let path = CatalogFiles.projectFixtures.path
        #expect(throws: CatalogError(path: path, location: "", reason: "is a directory, not a .storekit file")) {
            try Catalog.load(path: path)
        }
    }

    @Test("a file of a newer format version loads what the loader knows, the rest is read past")
    func newerVersion() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = try Self.edited(5, in: directory) { text in
            text.replacingOccurrences(of: "\"major\" : 5", with: "\"major\" : 6")
                .replacingOccurrences(of: "\"products\" : [", with: "\"bundles\" : [ { \"productIDs\" : [ ] } ],\n  \"products\" : [")
        }
        #expect(try Self.versionMajor(of: path) == 6)
        var catalog = try Catalog.load(path: path)
        catalog.path = CatalogFiles.formatFixture(5)
        #expect(catalog == (try Catalog.load(path: CatalogFiles.formatFixture(5))))
    }

    private static func versionMajor(of path: String) throws -> Int? {
        let root = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any]
        return (root?["version"] as? [String: Any])?["major"] as? Int
    }
}

@Suite("Catalog: config/catalog/example.storekit")
struct CatalogExampleTests {
    @Test("the sample catalogue has the five products of com.example.game")
    func products() throws {
        let catalog = try Catalog.load(path: CatalogFiles.example)
        #expect(catalog.products.map(\.id) == [
            "com.example.game.coins100",
            "com.example.game.level_pack",
            "com.example.game.premium.monthly",
            "com.example.game.premium.yearly",
            "com.example.game.season_pass",
        ])
        #expect(catalog.products.map(\.kind) == [.consumable, .nonConsumable, .autoRenewable, .autoRenewable, .nonRenewing])
        #expect(catalog.products.map(\.displayPrice) == ["0.99", "2.99", "4.99", "39.99", "4.99"])

        let coins = try #require(catalog.record("com.example.game.coins100"))
        #expect(coins.localizedTitle == "100 Coins")
        #expect(coins.priceCents == 99)
        #expect(coins.currencyCode == "USD")
        #expect(catalog.record("com.example.game.level_pack")?.localizedTitle == "Level Pack")
        #expect(catalog.record("com.example.game.season_pass")?.localizedTitle == "Season Pass")

        let monthly = try #require(catalog.product("com.example.game.premium.monthly"))
        let yearly = try #require(catalog.product("com.example.game.premium.yearly"))
        #expect(monthly.subscriptionPeriod == SubscriptionPeriod(value: 1, unit: .month))
        #expect(yearly.subscriptionPeriod == SubscriptionPeriod(value: 1, unit: .year))
        #expect(monthly.subscriptionGroupID == yearly.subscriptionGroupID)
        #expect(monthly.groupLevel == 1)
        #expect(yearly.groupLevel == 2)   // a lower level of service than monthly
        #expect(monthly.introductoryOffer == SubscriptionOffer(
            paymentMode: SubscriptionOffer.freeTrial, period: SubscriptionPeriod(value: 1, unit: .week), periodCount: 1))
        #expect(yearly.introductoryOffer == nil)

        let group = try #require(catalog.subscriptionGroups.first)
        #expect(catalog.subscriptionGroups.count == 1)
        #expect(group.name == "Premium")
        #expect(group.productIDs == ["com.example.game.premium.monthly", "com.example.game.premium.yearly"])
    }

    @Test("the sample catalogue's settings: no Ask to Buy, USA, en_US, real time")
    func settings() throws {
        let catalog = try Catalog.load(path: CatalogFiles.example)
        #expect(catalog.settings == CatalogSettings(askToBuyEnabled: false, storefront: "USA", locale: "en_US", timeRate: 0))
    }
}

@Suite("Catalog: errors name the file and the place")
struct CatalogErrorTests {
    @Test("a syntax error gives the path and line/column")
    func syntaxError() throws {
        let json = """
        {
          "products" : [
            { "productID" : "a", "type" : "Consumable", "displayPrice" : "1.00" }
          }
        }
        """
        let error = try failure(json, path: "catalog/broken.storekit")
        #expect(error.path == "catalog/broken.storekit")
        #expect(error.location == "line 4 column 3")
        #expect(error.reason.contains("expected ',' or ']'"))
        #expect(error.description == "catalog/broken.storekit: line 4 column 3: \(error.reason)")
    }

    @Test("other syntax errors", arguments: [
        ("", "line 1 column 1"),
        ("{ \"products\" : [ ], }", "line 1 column 21"),
        ("{ \"a\" : \"unterminated }", "line 1 column 9"),
        ("{ \"a\" : tru }", "line 1 column 9"),
        ("{ \"a\" : 01 }", "line 1 column 9"),
        ("{ \"a\" : 1 } x", "line 1 column 13"),
        ("{ \"a\" : 1,\n  \"a\" : 2 }", "line 2 column 3"),
        ("{ \"a\" : \"\\q\" }", "line 1 column 11"),
        ("{ \"ä\" : [ 1 2 ] }", "line 1 column 13"),   // columns count characters, not bytes
    ])
    func otherSyntaxErrors(json: String, location: String) throws {
        let error = try failure(json)
        #expect(error.location == location, "\(error)")
    }

    @Test("the root must be an object")
    func rootNotObject() throws {
        let error = try failure("[ ]")
        #expect(error.location == "top level")
    }

    @Test("a product without productID is named by its position")
    func missingProductID() throws {
        let json = """
        { "products" : [
            { "productID" : "a", "type" : "Consumable", "displayPrice" : "1.00" },
            { "type" : "NonConsumable", "displayPrice" : "2.00" }
        ] }
        """
        let error = try failure(json)
        #expect(error.location == "products[1].productID")
        #expect(error.reason.contains("missing"))
        #expect(error.description == "inline.storekit: products[1].productID: \(error.reason)")
    }

    @Test("a subscription without productID is named by its group and position")
    func missingSubscriptionID() throws {
        let json = """
        { "subscriptionGroups" : [ { "id" : "G", "name" : "G", "subscriptions" : [
            { "type" : "RecurringSubscription", "displayPrice" : "1.00", "recurringSubscriptionPeriod" : "P1M" }
        ] } ] }
        """
        #expect(try failure(json).location == "subscriptionGroups[0].subscriptions[0].productID")
    }

    @Test("ill-typed or missing required values", arguments: [
        (oneProduct().replacingOccurrences(of: "\"productID\" : \"com.example.x\"", with: "\"productID\" : 7"), "products[0].productID"),
        (oneProduct().replacingOccurrences(of: "\"type\" : \"Consumable\", ", with: ""), "products[0].type"),
        (oneProduct().replacingOccurrences(of: "Consumable", with: "Subscription"), "products[0].type"),
        (oneProduct().replacingOccurrences(of: "Consumable", with: "RecurringSubscription"), "products[0].type"),
        (oneProduct().replacingOccurrences(of: "\"displayPrice\" : \"0.99\", ", with: ""), "products[0].displayPrice"),
        (oneProduct().replacingOccurrences(of: "\"0.99\"", with: "true"), "products[0].displayPrice"),
        (oneProduct().replacingOccurrences(of: "\"0.99\"", with: "\"free\""), "products[0].displayPrice"),
        (oneProduct().replacingOccurrences(of: "\"0.99\"", with: "\"-1.00\""), "products[0].displayPrice"),
        (oneProduct(", \"familyShareable\" : \"yes\""), "products[0].familyShareable"),
        (oneProduct(", \"localizations\" : [ { \"locale\" : 5 } ]"), "products[0].localizations[0].locale"),
        ("{ \"products\" : { } }", "products"),
        ("{ \"products\" : [ 5 ] }", "products[0]"),
        ("{ \"settings\" : { \"_timeRate\" : \"fast\" } }", "settings._timeRate"),
        ("{ \"settings\" : { \"_askToBuyEnabled\" : 1 } }", "settings._askToBuyEnabled"),
        ("{ \"settings\" : { \"_storefront\" : \"US\" } }", "settings._storefront"),
        ("{ \"settings\" : [ ] }", "settings"),
        ("{ \"_locale\" : 3 }", "_locale"),
        ("{ \"settings\" : { \"_interruptedPurchases\" : [ \"nope\" ] } }", "settings._interruptedPurchases[0]"),
        ("{ \"settings\" : { \"_failTransactionsErrorCode\" : 99 } }", "settings._failTransactionsErrorCode"),
    ])
    func badValues(json: String, location: String) throws {
        let error = try failure(json)
        #expect(error.location == location, "\(error)")
    }

    @Test("subscription details are checked", arguments: [
        (", \"recurringSubscriptionPeriod\" : \"P1X\"", "subscriptionGroups[0].subscriptions[0].recurringSubscriptionPeriod"),
        ("", "subscriptionGroups[0].subscriptions[0].recurringSubscriptionPeriod"),
        (", \"recurringSubscriptionPeriod\" : \"P1M\", \"groupNumber\" : 0", "subscriptionGroups[0].subscriptions[0].groupNumber"),
        (", \"recurringSubscriptionPeriod\" : \"P1M\", \"introductoryOffer\" : { \"paymentMode\" : \"gratis\" }",
         "subscriptionGroups[0].subscriptions[0].introductoryOffer.paymentMode"),
        (", \"recurringSubscriptionPeriod\" : \"P1M\", \"adHocOffers\" : [ { \"paymentMode\" : \"payAsYouGo\", \"subscriptionPeriod\" : \"P1M\" } ]",
         "subscriptionGroups[0].subscriptions[0].adHocOffers[0].displayPrice"),
        (", \"recurringSubscriptionPeriod\" : \"P1M\", \"introductoryOffers\" : [ { \"paymentMode\" : \"free\", \"subscriptionPeriod\" : \"1 week\" } ]",
         "subscriptionGroups[0].subscriptions[0].introductoryOffers[0].subscriptionPeriod"),
    ])
    func badSubscriptions(fields: String, location: String) throws {
        let json = """
        { "subscriptionGroups" : [ { "id" : "G", "subscriptions" : [
            { "productID" : "s", "type" : "RecurringSubscription", "displayPrice" : "1.00"\(fields) }
        ] } ] }
        """
        #expect(try failure(json).location == location)
    }

    @Test("duplicate product ids are rejected, naming both places")
    func duplicateIDs() throws {
        let json = """
        { "products" : [ { "productID" : "dup", "type" : "Consumable", "displayPrice" : "1.00" } ],
          "subscriptionGroups" : [ { "id" : "G", "subscriptions" : [
            { "productID" : "dup", "type" : "RecurringSubscription", "displayPrice" : "1.00", "recurringSubscriptionPeriod" : "P1M" }
          ] } ] }
        """
        let error = try failure(json)
        #expect(error.location == "subscriptionGroups[0].subscriptions[0].productID")
        #expect(error.reason.contains("duplicate product id \"dup\""))
        #expect(error.reason.contains("products[0].productID"))

        let product = "{ \"productID\" : \"x\", \"type\" : \"Consumable\", \"displayPrice\" : \"1\" }"
        let twice = "{ \"products\" : [ \(product), \(product) ] }"
        #expect(try failure(twice).location == "products[1].productID")
    }

    @Test("duplicate subscription group ids are rejected")
    func duplicateGroups() throws {
        let json = "{ \"subscriptionGroups\" : [ { \"id\" : \"G\" }, { \"id\" : \"G\" } ] }"
        #expect(try failure(json).location == "subscriptionGroups[1].id")
    }

    @Test("a missing file is an error naming it, without a location")
    func missingFile() throws {
        let path = "/nonexistent/dir/none.storekit"
        #expect(throws: CatalogError(path: path, location: "", reason: "no such file")) {
            try Catalog.load(path: path)
        }
        let error = CatalogError(path: path, location: "", reason: "no such file")
        #expect(error.description == "/nonexistent/dir/none.storekit: no such file")
    }
}

@Suite("Catalog: leniency and details")
struct CatalogDetailTests {
    @Test("unknown keys are ignored everywhere")
    func unknownKeys() throws {
        let json = """
        { "futureTopLevel" : { "anything" : [ 1, 2.5e3, null ] },
          "version" : { "major" : 9, "minor" : 1 },
          "products" : [ { "productID" : "a", "type" : "Consumable", "displayPrice" : "1.00",
                           "someNewField" : [ { } ], "internalID" : 12 } ],
          "settings" : { "_someNewSwitch" : true, "_storeKitErrors" : [ { "enabled" : true, "name" : "Purchase" } ] } }
        """
        let catalog = try parse(json).get()
        #expect(catalog.products.map(\.id) == ["a"])
        #expect(catalog.settings == CatalogSettings())
    }

    @Test("empty and minimal files")
    func minimal() throws {
        let catalog = try parse("{ }").get()
        #expect(catalog.products.isEmpty)
        #expect(catalog.subscriptionGroups.isEmpty)
        #expect(catalog.settings == CatalogSettings())
        #expect(Catalog.empty.products.isEmpty)
        #expect(Catalog.empty.product("x") == nil)
        #expect(Catalog.empty.settings.storefront == "USA")
        #expect(Catalog.empty.settings.locale == "en_US")
    }

    @Test("settings at the top level (old formats) apply; the settings object wins")
    func topLevelSettings() throws {
        let json = """
        { "_askToBuyEnabled" : true, "_storefront" : "gbr", "_timeRate" : 3,
          "products" : [ { "productID" : "a", "type" : "Consumable", "displayPrice" : "1.00" } ],
          "settings" : { "_timeRate" : 5, "_failTransactionsEnabled" : true, "_failTransactionsErrorCode" : 2,
                         "_interruptedPurchases" : [ "a" ], "_locale" : "en_GB", "_billingGracePeriodEnabled" : true } }
        """
        let settings = try parse(json).get().settings
        #expect(settings == CatalogSettings(
            askToBuyEnabled: true, failTransactionsEnabled: true, failErrorCode: 2, interruptedPurchases: ["a"],
            storefront: "GBR", locale: "en_GB", timeRate: 5, billingGracePeriodEnabled: true,
            renewalBillingIssuesEnabled: false))
        #expect(settings.currencyCode == "GBP")
    }

    @Test("prices: exact decimals, cents rounded half up, comma accepted, numbers accepted", arguments: [
        ("\"0.5\"", "0.5", Int64(50)),
        ("\"1\"", "1", 100),
        ("\"1,99\"", "1,99", 199),
        ("\"0.995\"", "0.995", 100),
        ("\"0.994\"", "0.994", 99),
        ("2.49", "2.49", 249),
        ("\" 3.00 \"", "3.00", 300),
        ("\"999999999999.99\"", "999999999999.99", 99_999_999_999_999),
    ])
    func prices(literal: String, displayPrice: String, cents: Int64) throws {
        let json = oneProduct().replacingOccurrences(of: "\"0.99\"", with: literal)
        let product = try #require(try parse(json).get().products.first)
        #expect(product.displayPrice == displayPrice)
        #expect(product.priceCents == cents)
    }

    @Test("a price may come as `price` in place of `displayPrice`")
    func priceKey() throws {
        let json = oneProduct().replacingOccurrences(of: "\"displayPrice\" : \"0.99\"", with: "\"price\" : 1.49")
        #expect(try parse(json).get().products.first?.priceCents == 149)
    }

    @Test("localization choice: exact locale, same language, first, then the reference name")
    func localizationChoice() throws {
        let json = oneProduct("""
            , "localizations" : [
              { "locale" : "de_DE", "displayName" : "Münzen", "description" : "Viele" },
              { "locale" : "en_GB", "displayName" : "Coins (GB)", "description" : "Lots" },
              { "locale" : "en_US", "displayName" : "Coins", "description" : "Many" } ]
            """)
        let product = try #require(try parse(json).get().products.first)
        #expect(product.record(locale: "en_US", currencyCode: "USD").localizedTitle == "Coins")
        #expect(product.record(locale: "en-US", currencyCode: "USD").localizedTitle == "Coins")
        #expect(product.record(locale: "en_AU", currencyCode: "AUD").localizedTitle == "Coins (GB)")
        #expect(product.record(locale: "fr_FR", currencyCode: "EUR").localizedTitle == "Münzen")
        #expect(product.record(locale: "fr_FR", currencyCode: "EUR").localizedDescription == "Viele")

        let bare = try #require(try parse(oneProduct()).get().products.first)
        let record = bare.record(locale: "en_US", currencyCode: "USD")
        #expect(record.localizedTitle == "X")
        #expect(record.localizedDescription == "")
        #expect(record.currencyCode == "USD")
        #expect(record.locale == "en_US")
        #expect(record.priceCents == 99)
        #expect(record.subscriptionPeriod == nil)

        let unnamed = try #require(try parse(oneProduct(", \"localizations\" : [ { \"locale\" : \"en_US\", \"displayName\" : \"\" } ]")).get().products.first)
        #expect(unnamed.record(locale: "en_US", currencyCode: "USD").localizedTitle == "X")
    }

    @Test("strings: escapes, unicode, byte order mark")
    func strings() throws {
        let json = "\u{FEFF}" + oneProduct(id: "a\\\"b\\u00e9\\ud83d\\ude00\\/\\n")
        let catalog = try parse(json).get()
        #expect(catalog.products.first?.id == "a\"bé😀/\n")
    }

    @Test("product lookup works after the products are replaced")
    func lookupAfterMutation() throws {
        var catalog = try Catalog.load(path: CatalogFiles.example)
        #expect(catalog.product("com.example.game.coins100")?.priceCents == 99)
        catalog.products.removeFirst()
        #expect(catalog.product("com.example.game.coins100") == nil)
        #expect(catalog.product("com.example.game.level_pack")?.kind == .nonConsumable)
        catalog.products[0].priceCents = 1
        #expect(catalog.product("com.example.game.level_pack")?.priceCents == 1)
    }

    @Test("a subscription's record names its group as the buyer's locale has it, else the group's reference name")
    func groupDisplayName() throws {
        let json = """
        { "subscriptionGroups" : [
          { "id" : "G", "name" : "premium_group", "localizations" : [
              { "locale" : "en_US", "displayName" : "Premium Plan", "description" : "" },
              { "locale" : "fr_FR", "displayName" : "Formule Premium", "description" : "" } ],
            "subscriptions" : [ { "productID" : "a", "type" : "RecurringSubscription", "displayPrice" : "1", "recurringSubscriptionPeriod" : "P1M" } ] },
          { "id" : "H", "name" : "basic_group",
            "subscriptions" : [ { "productID" : "b", "type" : "RecurringSubscription", "displayPrice" : "1", "recurringSubscriptionPeriod" : "P1M" } ] } ],
          "products" : [ { "productID" : "c", "type" : "Consumable", "displayPrice" : "1" } ] }
        """
        let catalog = try parse(json).get()
        let a = try #require(catalog.product("a"))
        #expect(a.record(locale: "fr_FR", currencyCode: "EUR").subscriptionGroupDisplayName == "Formule Premium")
        #expect(a.record(locale: "en_GB", currencyCode: "GBP").subscriptionGroupDisplayName == "Premium Plan", "same language")
        #expect(a.record(locale: "de_DE", currencyCode: "EUR").subscriptionGroupDisplayName == "Premium Plan", "the first")
        #expect(try #require(catalog.product("b")).record(locale: "en_US", currencyCode: "USD").subscriptionGroupDisplayName == "basic_group")
        #expect(try #require(catalog.product("c")).record(locale: "en_US", currencyCode: "USD").subscriptionGroupDisplayName == nil)
    }

    @Test("group order follows groupNumber, ties keep file order")
    func groupOrder() throws {
        let json = """
        { "subscriptionGroups" : [ { "id" : "G", "subscriptions" : [
            { "productID" : "c", "type" : "RecurringSubscription", "displayPrice" : "1", "recurringSubscriptionPeriod" : "P1M", "groupNumber" : 3 },
            { "productID" : "a", "type" : "RecurringSubscription", "displayPrice" : "1", "recurringSubscriptionPeriod" : "P1M", "groupNumber" : 1 },
            { "productID" : "b", "type" : "RecurringSubscription", "displayPrice" : "1", "recurringSubscriptionPeriod" : "P1M", "groupNumber" : 3 },
            { "productID" : "d", "type" : "RecurringSubscription", "displayPrice" : "1", "recurringSubscriptionPeriod" : "P3D", "groupNumber" : 2 }
        ] } ] }
        """
        let catalog = try parse(json).get()
        #expect(catalog.products.map(\.id) == ["c", "a", "b", "d"])
        #expect(catalog.subscriptionGroups.first?.productIDs == ["a", "d", "c", "b"])
        #expect(catalog.subscriptionGroups.first?.name == "G")
    }

    @Test("non-renewing subscriptions may sit in products (old files) but not elsewhere the other way round")
    func nonRenewingPlacement() throws {
        let json = oneProduct().replacingOccurrences(of: "\"Consumable\"", with: "\"NonRenewingSubscription\"")
        #expect(try parse(json).get().products.first?.kind == .nonRenewing)
        let wrong = "{ \"nonRenewingSubscriptions\" : [ { \"productID\" : \"a\", \"type\" : \"Consumable\", \"displayPrice\" : \"1\" } ] }"
        #expect(try failure(wrong).location == "nonRenewingSubscriptions[0].type")
    }
}
