// Promotional offers as an app's own code makes them, in this process against a real storekitd:
// StoreKit 2's `.promotionalOffer` purchase option and StoreKit 1's `SKPaymentDiscount`, signed as
// the app's server would (`storekitctl sign-offer`), accepted for a lapsed subscriber and refused
// with StoreKit's errors otherwise.
import Foundation
@_spi(StoreKitTest) import OpenStoreKit
@testable import OpenStoreKitTest
import StoreKitTestSupport
import Testing

extension OpenStoreKitTestSuites {
@Suite("Promotional offers, in the app's process")
struct PromotionalOfferClientTests {
    static let monthly = "com.example.game.premium.monthly"
    static let offer = "com.example.game.premium.monthly.comeback"
    static let keyID = "KEYCLIENT1"

    /// A daemon registering the public half of a new offer key, with this process bound to it.
    final class Store {
        let daemon: DaemonProcess
        let privateKey: String

        init() throws {
            daemon = try DaemonProcess()
            let config = (daemon.configFile as NSString).deletingLastPathComponent
            privateKey = daemon.directory.file("offer.p8")
            _ = try ProcessRunner.run("/bin/sh", ["-c", "umask 077; openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out \"$0\"", privateKey])
            _ = try ProcessRunner.run("/usr/bin/openssl", ["ec", "-in", privateKey, "-pubout", "-out", config + "/offer.pub"])
            try "[App]\nID=\(TestStoreBinding.appIdentifier)\nCatalog=catalog/example.storekit\n\n[OfferKey]\nID=\(keyID)\nKey=offer.pub\n"
                .write(toFile: config + "/apps.d/com.example.game.conf", atomically: true, encoding: .utf8)
            try daemon.start()
            TestStoreBinding.bind(socketPath: daemon.clientSocket, dataHome: daemon.dataHome)
        }

        deinit {
            TestStoreBinding.unbind()
            daemon.remove()
        }

        /// What `storekitctl sign-offer` makes for `offer` (the app's server's part).
        func sign(_ offer: String = offer, username: String? = nil) throws -> (nonce: UUID, timestamp: Int, signature: String) {
            var arguments = ["sign-offer", "--key", privateKey, "--key-id", keyID]
            if let username { arguments += ["--username", username] }
            let json = try #require(try daemon.ctlJSON(arguments + [TestStoreBinding.appIdentifier, monthly, offer]) as? [String: Any])
            return (try #require(UUID(uuidString: json["nonce"] as? String ?? "")), try #require(json["timestamp"] as? Int),
                    try #require(json["signature"] as? String))
        }

        /// Makes this uid a lapsed subscriber: a purchase of the monthly plan, expired.
        func lapse() async throws {
            let product = try #require(try await Product.products(for: [monthly]).first)
            guard case .success(let verification) = try await product.purchase() else { throw CancellationError() }
            let transaction = try verification.payloadValue
            await transaction.finish()
            #expect(try daemon.ctl(["expire", String(transaction.id)]).status == 0)
        }
    }

    @Test("StoreKit 2: a signed offer is bought by a lapsed subscriber; a forged one throws invalidOfferSignature; an unknown one invalidOfferIdentifier")
    func storeKit2() async throws {
        let store = try Store()
        let product = try #require(try await Product.products(for: [Self.monthly]).first)
        #expect(product.subscription?.promotionalOffers.map(\.id) == [Self.offer])
        try await store.lapse()

        let signed = try store.sign()
        let option = Product.PurchaseOption.promotionalOffer(
            offerID: Self.offer, keyID: Self.keyID, nonce: signed.nonce, signature: try #require(Data(base64Encoded: signed.signature)),
            timestamp: signed.timestamp)
        guard case .success(let verification) = try await product.purchase(options: [option]) else {
            Issue.record("the offer was not bought")
            return
        }
        let bought = try verification.payloadValue
        #expect(bought.offer?.type == .promotional && bought.offer?.id == Self.offer, "\(String(describing: bought.offer))")
        #expect(bought.offerType == .promotional && bought.offerID == Self.offer)
        await bought.finish()
        // The app receipt names the offer (1721), as Apple's does; openssl reads it.
        let root = store.daemon.directory.file("root.pem")
        try store.daemon.ctl(["certificate"]).stdout.write(toFile: root, atomically: true, encoding: .utf8)
        let receipt = try Data(contentsOf: SKPaymentQueue.appStoreReceiptURL)
        let listed = try IndependentVerifier.receiptPurchases(receipt, root: root)
        let entry = listed.first { $0[1703] == IndependentVerifier.derUTF8String(String(bought.id)) }
        #expect(entry?[1721] == IndependentVerifier.derUTF8String(Self.offer), "\(listed)")
        #expect(entry?[1713] == IndependentVerifier.derInteger(false) && entry?[1719] == IndependentVerifier.derInteger(false))

        // The same, in the Signature form (StoreKit 2 since iOS 17.4): a nonce it was not made for.
        let forged = Product.PurchaseOption.promotionalOffer(offerID: Self.offer, signature: Product.SubscriptionOffer.Signature(
            keyID: Self.keyID, nonce: UUID(), timestamp: signed.timestamp, signature: try #require(Data(base64Encoded: signed.signature))))
        await #expect(throws: Product.PurchaseError.invalidOfferSignature) { _ = try await product.purchase(options: [forged]) }
        let again = try store.sign()
        let signature = Product.SubscriptionOffer.Signature(keyID: Self.keyID, nonce: again.nonce, timestamp: again.timestamp,
                                                            signature: try #require(Data(base64Encoded: again.signature)))
        guard case .success(let second) = try await product.purchase(options: [.promotionalOffer(offerID: Self.offer, signature: signature)]) else {
            Issue.record("the offer in the Signature form was not bought")
            return
        }
        try await second.payloadValue.finish()

        let other = try store.sign("no.such.offer")
        let unknown = Product.PurchaseOption.promotionalOffer(
            offerID: "no.such.offer", keyID: Self.keyID, nonce: other.nonce, signature: try #require(Data(base64Encoded: other.signature)),
            timestamp: other.timestamp)
        await #expect(throws: Product.PurchaseError.invalidOfferIdentifier) { _ = try await product.purchase(options: [unknown]) }
    }

    @Test("StoreKit 2: a lapsed subscriber is told of the win-back offer it may have, and buys it; a current subscriber may not")
    func winBack() async throws {
        let store = try Store()
        let product = try #require(try await Product.products(for: [Self.monthly]).first)
        let offer = try #require(product.subscription?.winBackOffers.first)
        #expect(offer.id == "com.example.game.premium.monthly.welcome_back" && offer.type == .winBack && offer.paymentMode == .freeTrial)
        #expect(product.subscription?.groupDisplayName == "Premium")
        // Not subscribed yet: not a lapsed subscriber.
        await #expect(throws: Product.PurchaseError.ineligibleForOffer) { _ = try await product.purchase(options: [.winBackOffer(offer)]) }
        try await store.lapse()
        let status = try #require(try await product.subscription?.status.first)
        #expect(try status.renewalInfo.payloadValue.eligibleWinBackOfferIDs == [offer.id])
        guard case .success(let verification) = try await product.purchase(options: [.winBackOffer(offer)]) else {
            Issue.record("the win-back offer was not bought")
            return
        }
        let won = try verification.payloadValue
        #expect(won.offer?.type == .winBack && won.offer?.id == offer.id && won.offer?.paymentMode == .freeTrial)
        #expect(won.price == 0)
        await won.finish()
        // Subscribed again: no win-back offer now.
        await #expect(throws: Product.PurchaseError.ineligibleForOffer) { _ = try await product.purchase(options: [.winBackOffer(offer)]) }
    }

    @Test("StoreKit 2: a buyer who never subscribed in the group is not eligible")
    func notEligible() async throws {
        let store = try Store()
        let product = try #require(try await Product.products(for: [Self.monthly]).first)
        let signed = try store.sign()
        let option = Product.PurchaseOption.promotionalOffer(
            offerID: Self.offer, keyID: Self.keyID, nonce: signed.nonce, signature: try #require(Data(base64Encoded: signed.signature)),
            timestamp: signed.timestamp)
        await #expect(throws: Product.PurchaseError.ineligibleForOffer) { _ = try await product.purchase(options: [option]) }
    }

    @Test("StoreKit 1: SKPaymentDiscount on an SKMutablePayment, with the applicationUsername it was signed for")
    func storeKit1() async throws {
        let store = try Store()
        try await store.lapse()
        let username = UUID().uuidString
        let signed = try store.sign(username: username)
        let payment = SKMutablePayment()
        payment.productIdentifier = Self.monthly
        payment.applicationUsername = username
        payment.paymentDiscount = SKPaymentDiscount(identifier: Self.offer, keyIdentifier: Self.keyID, nonce: signed.nonce,
                                                    signature: signed.signature, timestamp: NSNumber(value: signed.timestamp))
        SKPaymentQueue.callbackQueue = DispatchQueue(label: "tests.offers")
        let observer = Observer()
        SKPaymentQueue.default().add(observer)
        defer { SKPaymentQueue.default().remove(observer) }
        SKPaymentQueue.default().add(payment)
        let deadline = Date().addingTimeInterval(20)
        while observer.outcome == nil, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(observer.outcome == .purchased, "\(String(describing: observer.error))")
    }

    final class Observer: NSObject, SKPaymentTransactionObserver, @unchecked Sendable {
        private let lock = NSLock()
        private var state: SKPaymentTransactionState?
        private var failure: (any Error)?

        func paymentQueue(_ queue: SKPaymentQueue, updatedTransactions transactions: [SKPaymentTransaction]) {
            for transaction in transactions where transaction.payment.productIdentifier == PromotionalOfferClientTests.monthly {
                switch transaction.transactionState {
                case .purchased, .failed:
                    lock.withLock {
                        state = transaction.transactionState
                        failure = transaction.error
                    }
                    queue.finishTransaction(transaction)
                default:
                    break
                }
            }
        }

        var outcome: SKPaymentTransactionState? { lock.withLock { state } }
        var error: (any Error)? { lock.withLock { failure } }
    }
}
}
