import Foundation
@testable import OpenStoreKit
import StoreKitWire
import Testing

/// StoreKit 2's values made from what the daemon sends: catalogue records, transaction records
/// and the payloads of their signed data (Apple's field names).
@Suite("StoreKit 2 values")
struct StoreKit2ModelTests {
    private static let monthly = ProductRecord(
        productID: "com.example.game.premium.monthly", kind: .autoRenewable, localizedTitle: "Premium Monthly",
        localizedDescription: "Everything, monthly.", priceCents: 499, displayPrice: "4.99", currencyCode: "EUR",
        locale: "fr_FR", subscriptionGroupID: "5D3E7F10", subscriptionPeriod: "P1M", familyShareable: true,
        subscriptionGroupLevel: 1,
        introductoryOffer: .init(paymentMode: .freeTrial, period: "P1W"),
        promotionalOffers: [.init(id: "comeback", paymentMode: .payAsYouGo, period: "P1M", periodCount: 3, priceCents: 299, displayPrice: "2.99"),
                            .init(id: "once", paymentMode: .payUpFront, period: "", periodCount: 1, priceCents: 999, displayPrice: "9.99")])

    private static let record = TransactionRecord(
        id: 2_028_930_000_000_002, originalID: 2_028_930_000_000_001, uid: 1000, app: "com.example.game",
        productID: "com.example.game.premium.monthly", quantity: 1, state: .purchased, sequence: 9,
        date: 1_700_000_000_000, revocationDate: 1_700_000_500_000, revocationReason: 1,
        applicationUsername: "E3F1A2B4-1111-2222-3333-444455556666", expiresDate: 1_702_592_000_000)

    private static func payload(_ object: [String: Any]) throws -> SignedPayload {
        try #require(SignedPayload([UInt8](try JSONSerialization.data(withJSONObject: object))))
    }

    @Test func aProductFromItsCatalogueRecord() throws {
        let product = Product(record: Self.monthly)
        #expect(product.id == "com.example.game.premium.monthly")
        #expect(product.type == .autoRenewable)
        #expect(product.displayName == "Premium Monthly")
        #expect(product.description == "Everything, monthly.")
        #expect(product.price == Decimal(string: "4.99"))
        #expect(product.displayPrice == "4,99\u{a0}€", "formatted for the storefront's currency and locale")
        #expect(product.isFamilyShareable)
        let subscription = try #require(product.subscription)
        #expect(subscription.subscriptionGroupID == "5D3E7F10")
        #expect(subscription.subscriptionPeriod == .monthly)
        #expect(subscription.groupLevel == 1)
        let intro = try #require(subscription.introductoryOffer)
        #expect(intro.type == .introductory)
        #expect(intro.paymentMode == .freeTrial)
        #expect(intro.id == nil)
        #expect(intro.period == .weekly)
        #expect(intro.price == 0)
        #expect(subscription.promotionalOffers.map(\.id) == ["comeback", "once"])
        #expect(subscription.promotionalOffers.map(\.paymentMode) == [.payAsYouGo, .payUpFront])
        #expect(subscription.promotionalOffers[0].periodCount == 3)
        #expect(subscription.promotionalOffers[0].price == Decimal(string: "2.99"))
        #expect(subscription.promotionalOffers[1].period == .monthly, "an offer without its own period lasts the subscription's")
        #expect(subscription.promotionalOffers.allSatisfy { $0.type == .promotional })

        let coins = Product(record: ProductRecord(
            productID: "coins", kind: .consumable, localizedTitle: "Coins", localizedDescription: "", priceCents: 99,
            displayPrice: "0.99", currencyCode: "USD", locale: "en_US"))
        #expect(coins.type == .consumable)
        #expect(coins.subscription == nil)
        #expect(coins.displayPrice == "$0.99")
        #expect(coins.priceFormatStyle.format(coins.price) == "$0.99")
        #expect(coins != product)
    }

    @Test func aTransactionFromItsSignedPayload() throws {
        let payload = try Self.payload([
            "transactionId": "2028930000000002", "originalTransactionId": "2028930000000001",
            "bundleId": "com.example.game", "productId": "com.example.game.premium.monthly",
            "purchaseDate": 1_700_000_000_000, "originalPurchaseDate": 1_690_000_000_000, "expiresDate": 1_702_592_000_000,
            "quantity": 1, "type": "Auto-Renewable Subscription", "inAppOwnershipType": "PURCHASED",
            "signedDate": 1_700_000_001_000, "environment": "Sandbox", "transactionReason": "RENEWAL",
            "storefront": "FRA", "storefrontId": "143442", "price": 4990, "currency": "EUR",
            "revocationDate": 1_700_000_500_000, "revocationReason": 1,
            "appAccountToken": "e3f1a2b4-1111-2222-3333-444455556666", "webOrderLineItemId": "2028930000000002",
            "subscriptionGroupIdentifier": "5D3E7F10", "isUpgraded": false, "offerType": 2, "offerIdentifier": "comeback",
        ])
        let transaction = Transaction(payload: payload, record: Self.record, product: nil)
        #expect(transaction.id == 2_028_930_000_000_002)
        #expect(transaction.originalID == 2_028_930_000_000_001)
        #expect(transaction.appBundleID == "com.example.game")
        #expect(transaction.productID == "com.example.game.premium.monthly")
        #expect(transaction.purchaseDate == Date(timeIntervalSince1970: 1_700_000_000))
        #expect(transaction.originalPurchaseDate == Date(timeIntervalSince1970: 1_690_000_000))
        #expect(transaction.expirationDate == Date(timeIntervalSince1970: 1_702_592_000))
        #expect(transaction.signedDate == Date(timeIntervalSince1970: 1_700_000_001))
        #expect(transaction.productType == .autoRenewable)
        #expect(transaction.ownershipType == .purchased)
        #expect(transaction.environment == .sandbox)
        #expect(transaction.reason == .renewal)
        #expect(transaction.storefront.countryCode == "FRA")
        #expect(transaction.storefront.id == "143442")
        #expect(transaction.storefront.currency?.identifier == "EUR")
        #expect(transaction.price == Decimal(string: "4.99"), "milli-units")
        #expect(transaction.currency?.identifier == "EUR")
        #expect(transaction.revocationDate == Date(timeIntervalSince1970: 1_700_000_500))
        #expect(transaction.revocationReason == .developerIssue)
        #expect(transaction.appAccountToken == UUID(uuidString: "E3F1A2B4-1111-2222-3333-444455556666"))
        #expect(transaction.webOrderLineItemID == "2028930000000002")
        #expect(transaction.subscriptionGroupID == "5D3E7F10")
        #expect(transaction.offerType == .promotional)
        #expect(transaction.offerID == "comeback")
        #expect(!transaction.isUpgraded)
        #expect(transaction.jsonRepresentation == payload.json)
    }

    @Test func aTransactionWithoutPayloadComesFromTheRecordAndTheCatalogue() {
        let transaction = Transaction(payload: nil, record: Self.record, product: Self.monthly)
        #expect(transaction.id == Self.record.id)
        #expect(transaction.originalID == 2_028_930_000_000_001)
        #expect(transaction.productType == .autoRenewable)
        #expect(transaction.subscriptionGroupID == "5D3E7F10")
        #expect(transaction.purchaseDate == Date(timeIntervalSince1970: 1_700_000_000))
        #expect(transaction.expirationDate == Date(timeIntervalSince1970: 1_702_592_000))
        #expect(transaction.revocationReason == .developerIssue)
        #expect(transaction.appAccountToken == UUID(uuidString: "E3F1A2B4-1111-2222-3333-444455556666"),
                "a UUID application username is the app account token")
        #expect(transaction.reason == .renewal, "a purchased record with an original and an expiry is a renewal")
        #expect(transaction.purchasedQuantity == 1)
        #expect(!transaction.jsonRepresentation.isEmpty)

        var first = Self.record
        first.originalID = nil
        first.applicationUsername = "not a uuid"
        first.revocationDate = nil
        let purchase = Transaction(payload: nil, record: first, product: nil)
        #expect(purchase.originalID == purchase.id)
        #expect(purchase.appAccountToken == nil)
        #expect(purchase.revocationReason == nil, "a reason only with a revocation")
        #expect(purchase.reason == .purchase)
    }

    @Test func renewalInfoFromItsSignedPayload() throws {
        let payload = try Self.payload([
            "originalTransactionId": "2028930000000001", "productId": "com.example.game.premium.monthly",
            "autoRenewProductId": "com.example.game.premium.yearly", "autoRenewStatus": 0, "expirationIntent": 1,
            "isInBillingRetryPeriod": false, "recentSubscriptionStartDate": 1_690_000_000_000,
            "signedDate": 1_700_000_001_000, "environment": "Xcode",
        ])
        let info = Product.SubscriptionInfo.RenewalInfo(payload: payload, transaction: Self.record, state: .expired, jws: "")
        #expect(info.originalTransactionID == 2_028_930_000_000_001)
        #expect(info.currentProductID == "com.example.game.premium.monthly")
        #expect(info.autoRenewPreference == "com.example.game.premium.yearly")
        #expect(!info.willAutoRenew)
        #expect(info.expirationReason == .autoRenewDisabled)
        #expect(!info.isInBillingRetry)
        #expect(info.recentSubscriptionStartDate == Date(timeIntervalSince1970: 1_690_000_000))
        #expect(info.renewalDate == Date(timeIntervalSince1970: 1_702_592_000), "the record's expiry when the payload has no renewal date")
        #expect(info.environment == .xcode)
        #expect(info.priceIncreaseStatus == .noIncreasePending)
    }

    @Test func anAppTransactionFromItsSignedPayload() throws {
        let nonce = UUID()
        let payload = try Self.payload([
            "bundleId": "com.example.game", "applicationVersion": "2.1", "originalApplicationVersion": "1.0",
            "originalPurchaseDate": 1_690_000_000_000, "receiptCreationDate": 1_700_000_000_000,
            "deviceVerificationNonce": nonce.uuidString.lowercased(), "deviceVerification": Data([1, 2, 3]).base64EncodedString(),
            "signedDate": 1_700_000_001_000, "environment": "Sandbox",
        ])
        let app = AppTransaction(payload: payload, jws: "a.b.c")
        #expect(app.bundleID == "com.example.game")
        #expect(app.appVersion == "2.1")
        #expect(app.originalAppVersion == "1.0")
        #expect(app.originalPurchaseDate == Date(timeIntervalSince1970: 1_690_000_000))
        #expect(app.deviceVerificationNonce == nonce)
        #expect(app.deviceVerification == Data([1, 2, 3]))
        #expect(app.environment == .sandbox)
        #expect(VerificationResult.verified(app).jwsRepresentation == "a.b.c")
    }

    @Test func refusedPurchasesAreReportedWithStoreKit2sErrors() {
        func reported(_ code: SKError.Code) -> any Error { Product.PurchaseError.reported(for: SKError(code)) }
        #expect(reported(.paymentInvalid) as? Product.PurchaseError == .invalidQuantity)
        #expect(reported(.storeProductNotAvailable) as? Product.PurchaseError == .productUnavailable)
        #expect(reported(.paymentNotAllowed) as? Product.PurchaseError == .purchaseNotAllowed)
        #expect(reported(.ineligibleForOffer) as? Product.PurchaseError == .ineligibleForOffer)
        #expect(reported(.invalidSignature) as? Product.PurchaseError == .invalidOfferSignature)
        #expect(reported(.missingOfferParams) as? Product.PurchaseError == .missingOfferParameters)
        guard case .networkError(let error) = reported(.cloudServiceNetworkConnectionFailed) as? StoreKitError else {
            Issue.record("an unreachable store is a network error")
            return
        }
        #expect(error.code == .notConnectedToInternet)
        guard case .userCancelled = StoreKitError(SKError(.paymentCancelled)) else { Issue.record("cancelled"); return }
        guard case .notEntitled = StoreKitError(SKError(.clientInvalid)) else { Issue.record("refused app"); return }
        guard case .systemError(let underlying) = StoreKitError(SKError(.unknown, userInfo: [NSLocalizedDescriptionKey: "disk full"])) else {
            Issue.record("other errors keep the underlying one")
            return
        }
        #expect((underlying as? SKError)?.localizedDescription == "disk full")
    }

    @Test func verificationResultsExposeTheirJWS() throws {
        let header = Data(#"{"alg":"ES256"}"#.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
        let body = Data(#"{"signedDate":1700000001000}"#.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
        let jws = "\(header).\(body).c2ln"
        var record = Self.record
        record.jwsRepresentation = jws
        let transaction = Transaction(payload: try Self.payload(["signedDate": 1_700_000_001_000]), record: record, product: nil)
        let result = VerificationResult<Transaction>.unverified(transaction, .invalidSignature)
        #expect(result.jwsRepresentation == jws)
        #expect(result.headerData == Data(#"{"alg":"ES256"}"#.utf8))
        #expect(result.payloadData == Data(#"{"signedDate":1700000001000}"#.utf8))
        #expect(result.signatureData == Data("sig".utf8))
        #expect(result.signedData == Data("\(header).\(body)".utf8))
        #expect(result.signedDate == Date(timeIntervalSince1970: 1_700_000_001))
        #expect(throws: VerificationResult<Transaction>.VerificationError.invalidSignature) { try result.payloadValue }
    }

    // MARK: - Formatting (Apple's output in English)

    @Test("a period formats as Apple's subscriptionPeriodFormatStyle does: value and unit, plural when more than one",
          arguments: [("P1D", "1 day"), ("P3D", "3 days"), ("P1W", "1 week"), ("P2W", "2 weeks"), ("P1M", "1 month"),
                      ("P2M", "2 months"), ("P6M", "6 months"), ("P1Y", "1 year"), ("P2Y", "2 years")])
    func periodText(iso: String, text: String) throws {
        let product = Product(record: Self.english)
        let period = try #require(Product.SubscriptionPeriod(iso8601: iso))
        // 15 January: no month of the periods above crosses a short February.
        let reference = Date(timeIntervalSince1970: 1_705_276_800)
        #expect(period.formatted(product.subscriptionPeriodFormatStyle, referenceDate: reference) == text)
        #expect(period.formatted(Product.SubscriptionPeriod.ComponentsFormatStyle(locale: Locale(identifier: "en_GB")), referenceDate: reference) == text)
    }

    @Test("a date range longer than one unit lists its fields, largest first; an empty one is 0 days")
    func rangeFields() {
        let style = Product.SubscriptionPeriod.ComponentsFormatStyle(locale: Locale(identifier: "en_US"))
        let start = Date(timeIntervalSince1970: 1_705_276_800)   // 2024-01-15
        let end = Date(timeIntervalSince1970: 1_705_276_800 + 435 * 86_400)   // 2025-03-25
        #expect(style.format(start ..< end) == "1 year, 2 months, 1 week, 3 days")
        #expect(style.format(start ..< start) == "0 days")
    }

    @Test("dateRange: one period from the reference date by the calendar (a month from 31 January ends on 29 February in 2024)")
    func dateRanges() {
        let january31 = Date(timeIntervalSince1970: 1_706_659_200)   // 2024-01-31T00:00Z
        #expect(Product.SubscriptionPeriod.monthly.dateRange(referenceDate: january31).upperBound == Date(timeIntervalSince1970: 1_709_164_800))
        #expect(Product.SubscriptionPeriod.weekly.dateRange(referenceDate: january31).upperBound == january31.addingTimeInterval(7 * 86_400))
        #expect(Product.SubscriptionPeriod.yearly.dateRange(referenceDate: january31).upperBound == Date(timeIntervalSince1970: 1_738_281_600))
        // As a Duration: the period's length.
        #expect(Product.SubscriptionPeriod.everyTwoWeeks.formatted(.units(allowed: [.days], width: .wide), referenceDate: january31) == "14 days")
    }

    @Test("units: the unit style is the bare name, localizedDescription a title; payment modes by name")
    func unitsAndModes() {
        let product = Product(record: Self.english)
        #expect(Product.SubscriptionPeriod.Unit.allCases.map { $0.formatted(product.subscriptionPeriodUnitFormatStyle) } == ["day", "week", "month", "year"])
        #expect(Product.SubscriptionPeriod.Unit.allCases.map(\.localizedDescription) == ["Day", "Week", "Month", "Year"])
        #expect("\(product.displayPrice)/\(Product.SubscriptionPeriod.Unit.month.formatted(product.subscriptionPeriodUnitFormatStyle))" == "$4.99/month")
        #expect(Product.SubscriptionOffer.PaymentMode.freeTrial.localizedDescription == "Free Trial")
        #expect(Product.SubscriptionOffer.PaymentMode.payAsYouGo.localizedDescription == "Pay As You Go")
        #expect(Product.SubscriptionOffer.PaymentMode.payUpFront.localizedDescription == "Pay Up Front")
        #expect(Product.SubscriptionOffer.PaymentMode(rawValue: "winBack").localizedDescription == "winBack")
    }

    @Test("the styles are in the product's storefront locale; days and weeks in Foundation's wording there")
    func storefrontLocale() throws {
        let french = Product(record: Self.monthly)   // fr_FR
        #expect(french.subscriptionPeriodFormatStyle.locale.identifier == "fr_FR")
        #expect(french.subscriptionPeriodUnitFormatStyle.locale.identifier == "fr_FR")
        // ICU puts a no-break space between number and unit in some locales (Apple's output does too).
        func spaced(_ text: String) -> String { text.replacingOccurrences(of: "\u{A0}", with: " ").replacingOccurrences(of: "\u{202F}", with: " ") }
        let week = Product.SubscriptionPeriod.weekly.formatted(french.subscriptionPeriodFormatStyle)
        #expect(spaced(week) == "1 semaine", "\(week.unicodeScalars.map { String($0.value, radix: 16) })")
        let days = try #require(Product.SubscriptionPeriod(iso8601: "P3D")).formatted(french.subscriptionPeriodFormatStyle.locale(Locale(identifier: "de_DE")))
        #expect(spaced(days) == "3 Tage", "\(days)")
        // Months stay English outside English (Foundation on Linux has no names for them there).
        #expect(Product.SubscriptionPeriod.monthly.formatted(french.subscriptionPeriodFormatStyle) == "1 month")
    }

    private static let english = ProductRecord(
        productID: "com.example.game.premium.monthly", kind: .autoRenewable, localizedTitle: "Premium Monthly",
        localizedDescription: "Everything, monthly.", priceCents: 499, displayPrice: "4.99", currencyCode: "USD",
        locale: "en_US", subscriptionGroupID: "5D3E7F10", subscriptionPeriod: "P1M", familyShareable: false,
        subscriptionGroupLevel: 1, introductoryOffer: .init(paymentMode: .freeTrial, period: "P1W"), promotionalOffers: [])
}
