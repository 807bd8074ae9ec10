import Foundation
@testable import StoreKitSigning
import StoreKitTestSupport
import Testing

@Suite struct ZZReceiptTiming {
    @Test func timing() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let (identity, _, _) = try SigningIdentity.openOrCreate(directory: directory.file("signing"))
        let date = Date()
        let purchases = (0..<5000).map { index in
            AppReceipt.InAppPurchase(quantity: 1, productIdentifier: "com.example.game.coins100",
                                     transactionIdentifier: String(2_028_930_296_248_611 + index),
                                     originalTransactionIdentifier: String(2_028_930_296_248_611 + index),
                                     purchaseDate: date, originalPurchaseDate: date)
        }
        let receipt = AppReceipt(receiptType: "Xcode", bundleIdentifier: "com.example.game", appVersion: "1.0",
                                 opaqueValue: Array(repeating: 1, count: 16), sha1Hash: Array(repeating: 2, count: 20),
                                 creationDate: date, originalApplicationVersion: "1.0", inAppPurchases: purchases)
        let t0 = Date()
        let der = receipt.encoded()
        let t1 = Date()
        let signed = try identity.signReceipt(receipt)
        let t2 = Date()
        print("TIMING encode \(t1.timeIntervalSince(t0) * 1000) ms (\(der.count) bytes); sign total \(t2.timeIntervalSince(t1) * 1000) ms (\(signed.count))")
    }
}
