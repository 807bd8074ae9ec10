// Advanced Commerce API purchases as an app's own code makes them, in this process against a real
// storekitd: `AdvancedCommerceProduct.purchase(compactJWS:)` with a request signed as the app's
// server would (`storekitctl sign-commerce`), the transaction's `advancedCommerceInfo` in Apple's
// types, and a forged request refused.
import Foundation
@_spi(StoreKitTest) import OpenStoreKit
@testable import OpenStoreKitTest
import StoreKitTestSupport
import Testing

extension OpenStoreKitTestSuites {
@Suite("Advanced Commerce, in the app's process")
struct AdvancedCommerceClientTests {
    typealias Store = PromotionalOfferClientTests.Store

    /// `storekitctl sign-commerce` of `request`, with the registered key or, `forged`, another one.
    static func sign(_ request: [String: Any], _ store: Store, forged: Bool = false) throws -> String {
        let file = store.daemon.directory.file("request-\(UUID().uuidString).json")
        try JSONSerialization.data(withJSONObject: request).write(to: URL(fileURLWithPath: file))
        var key = store.privateKey
        if forged {
            key = store.daemon.directory.file("forged.p8")
            _ = try ProcessRunner.run("/bin/sh", ["-c", "umask 077; openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out \"$0\"", key])
        }
        let signed = try store.daemon.ctl(["sign-commerce", "--key", key, "--key-id", PromotionalOfferClientTests.keyID,
                                           TestStoreBinding.appIdentifier, file])
        #expect(signed.status == 0, "\(signed.stderr)")
        return signed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static var book: [String: Any] { [
        "operation": "CREATE_ONE_TIME_CHARGE", "version": "1", "currency": "USD", "taxCode": "C003-00-2",
        "requestInfo": ["requestReferenceId": "3e9a4d0c-62f5-4d61-9d1c-6d3b3f0b7a21"],
        "item": ["SKU": "BOOK-42", "displayName": "A book", "description": "Its first volume", "price": 12990],
    ] }

    @Test("a signed one-time charge is bought: Transaction.advancedCommerceInfo says what, in Apple's types; an ordinary purchase has none")
    func oneTimeCharge() async throws {
        let store = try Store()
        let product = try await AdvancedCommerceProduct(id: "com.example.game.level_pack")
        #expect(product.id == "com.example.game.level_pack" && product.type == .nonConsumable)
        let jws = try Self.sign(Self.book, store)
        guard case .success(let verification) = try await product.purchase(compactJWS: jws,
                                                                           options: [.custom(key: "note", value: "kept, without effect")]) else {
            Issue.record("the request was not bought")
            return
        }
        let transaction = try verification.payloadValue
        let info = try #require(transaction.advancedCommerceInfo)
        #expect(info.requestReferenceID == "3e9a4d0c-62f5-4d61-9d1c-6d3b3f0b7a21" && info.taxCode == "C003-00-2")
        #expect(info.taxExclusivePrice == Decimal(string: "12.99") && info.estimatedTax == 0 && info.taxRate == 0)
        #expect(info.period == nil && info.displayName == nil && info.description == nil)
        let item = try #require(info.items.first)
        #expect(info.items.count == 1 && item.details.sku == "BOOK-42" && item.details.displayName == "A book"
                && item.details.description == "Its first volume" && item.details.price == Decimal(string: "12.99"))
        #expect(item.details.offer == nil && item.refunds == nil && item.revocationDate == nil)
        #expect(transaction.price == Decimal(string: "12.99"))
        await transaction.finish()
        #expect(await product.latestTransaction.map { (try? $0.payloadValue.id) == transaction.id } == true)

        // The same request again (a retry after a timeout) is the purchase it made: nothing charged again.
        guard case .success(let retried) = try await product.purchase(compactJWS: jws) else {
            Issue.record("the retry did not give the purchase back")
            return
        }
        #expect(try retried.payloadValue.id == transaction.id)
        #expect((try store.daemon.ctlJSON(["transactions"]) as? [Any])?.count == 1, "charged once")
        // Another book through the same generic SKU entitles on its own, beside the first.
        var another = Self.book
        another["requestInfo"] = ["requestReferenceId": "3e9a4d0c-62f5-4d61-9d1c-6d3b3f0b7a22"]
        another["item"] = ["SKU": "BOOK-43", "displayName": "Another book", "description": "Its second volume", "price": 990]
        guard case .success(let second) = try await product.purchase(compactJWS: try Self.sign(another, store)) else {
            Issue.record("the second request was not bought")
            return
        }
        await (try second.payloadValue).finish()
        var owned: [String] = []
        for await entitlement in product.currentEntitlements {
            owned += (try entitlement.payloadValue.advancedCommerceInfo?.items ?? []).map(\.details.sku)
        }
        #expect(owned.sorted() == ["BOOK-42", "BOOK-43"], "\(owned)")

        let coins = try #require(try await Product.products(for: ["com.example.game.coins100"]).first)
        guard case .success(let plain) = try await coins.purchase() else { throw CancellationError() }
        #expect(try plain.payloadValue.advancedCommerceInfo == nil)
        await (try plain.payloadValue).finish()
    }

    @Test("a signed subscription: period, descriptors and the item's offer; a forged request throws StoreKitError.systemError; an unknown generic SKU productUnavailable")
    func subscriptionAndRefusals() async throws {
        let store = try Store()
        let product = try await AdvancedCommerceProduct(id: "com.example.game.premium.monthly")
        #expect(product.type == .autoRenewable)
        let request: [String: Any] = [
            "operation": "CREATE_SUBSCRIPTION", "version": "1", "currency": "USD", "taxCode": "C003-00-2", "period": "P1M",
            "requestInfo": ["requestReferenceId": "5d2c4f3e-1a2b-4c5d-8e9f-0a1b2c3d4e5f"],
            "descriptors": ["displayName": "Reader", "description": "Every book, monthly"],
            "items": [["SKU": "LIBRARY", "displayName": "Library", "description": "Every book", "price": 9990,
                       "offer": ["period": "P1M", "periodCount": 3, "price": 4990, "reason": "WIN_BACK"]]],
        ]
        await #expect(throws: StoreKitError.self) {
            _ = try await product.purchase(compactJWS: try Self.sign(request, store, forged: true))
        }
        guard case .success(let verification) = try await product.purchase(compactJWS: try Self.sign(request, store)) else {
            Issue.record("the subscription was not bought")
            return
        }
        let transaction = try verification.payloadValue
        let info = try #require(transaction.advancedCommerceInfo)
        #expect(info.period == .monthly && info.displayName == "Reader" && info.description == "Every book, monthly")
        let offer = try #require(info.items.first?.details.offer)
        #expect(offer.period == .monthly && offer.periodCount == 3 && offer.price == Decimal(string: "4.99") && offer.reason == .winBack)
        #expect(info.items.first?.details.price == Decimal(string: "4.99"), "the first period is at the offer's price")
        await transaction.finish()

        // The renewal info says what the next renewal sells: the second period, still at the offer's price.
        let plain = try #require(try await Product.products(for: [product.id]).first)
        let statuses = try await #require(plain.subscription).status
        let status = try #require(statuses.first { (try? $0.transaction.payloadValue.id) == transaction.id })
        let renewal = try status.renewalInfo.payloadValue
        let next = try #require(renewal.advancedCommerceInfo)
        #expect(next.requestReferenceID == "5d2c4f3e-1a2b-4c5d-8e9f-0a1b2c3d4e5f" && next.taxCode == "C003-00-2")
        #expect(next.period == .monthly && next.displayName == "Reader" && next.description == "Every book, monthly")
        #expect(!next.consistencyToken.isEmpty)
        #expect(next.items.map(\.details.sku) == ["LIBRARY"])
        #expect(next.items.first?.details.price == Decimal(string: "4.99") && next.items.first?.priceIncreaseInfo == nil)

        await #expect(throws: Product.PurchaseError.productUnavailable) {
            _ = try await AdvancedCommerceProduct(id: "com.example.game.no_such_product")
        }
    }
}
}
