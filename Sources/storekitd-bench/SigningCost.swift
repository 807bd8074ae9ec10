import Foundation
import StoreKitSigning

extension Bench {
    /// Median microseconds to sign a transaction's JWS (a realistic JWSTransaction payload) and an
    /// app receipt listing 20 purchases, with a key made as the daemon makes its own.
    func signingCost() throws -> (jws: Double, receipt: Double, largeReceipt: Double) {
        let (identity, _, _) = try SigningIdentity.openOrCreate(directory: directory + "/signing")
        let payload = Array("""
            {"transactionId":"2028930296248611","originalTransactionId":"2028930296248611","bundleId":"com.example.game",\
            "productId":"com.example.game.coins100","purchaseDate":1796155896248,"originalPurchaseDate":1796155896248,\
            "quantity":1,"type":"Consumable","inAppOwnershipType":"PURCHASED","signedDate":1796155896249,\
            "environment":"Xcode","transactionReason":"PURCHASE","storefront":"USA","storefrontId":"143441",\
            "currency":"USD","price":990}
            """.utf8)
        let rounds = quick ? 200 : 2_000
        var jwsTimes: [Double] = []
        for _ in 0..<rounds {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try identity.signJWS(payload: payload)
            jwsTimes.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
        }
        let date = Date()
        let purchases = (0..<20).map { index in
            AppReceipt.InAppPurchase(quantity: 1, productIdentifier: "com.example.game.coins100",
                                     transactionIdentifier: String(2_028_930_296_248_611 + index),
                                     originalTransactionIdentifier: String(2_028_930_296_248_611 + index),
                                     purchaseDate: date, originalPurchaseDate: date)
        }
        let receipt = AppReceipt(receiptType: "Xcode", bundleIdentifier: "com.example.game", appVersion: "1.0",
                                 opaqueValue: Array(repeating: 1, count: 16), sha1Hash: Array(repeating: 2, count: 20),
                                 creationDate: date, originalApplicationVersion: "1.0", inAppPurchases: purchases)
        var receiptTimes: [Double] = []
        for _ in 0..<(rounds / 4) {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try identity.signReceipt(receipt)
            receiptTimes.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        // A queue of 5,000 unfinished consumables: what one `receipt` request made and signed
        // in full before receipts were kept per queue (docs/performance.md).
        let many = (0..<5_000).map { index in
            AppReceipt.InAppPurchase(quantity: 1, productIdentifier: "com.example.game.coins100",
                                     transactionIdentifier: String(2_028_930_296_248_611 + index),
                                     originalTransactionIdentifier: String(2_028_930_296_248_611 + index),
                                     purchaseDate: date, originalPurchaseDate: date)
        }
        var large = receipt
        large.inAppPurchases = many
        var largeTimes: [Double] = []
        for _ in 0..<(quick ? 3 : 9) {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try identity.signReceipt(large)
            largeTimes.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
        }
        return (median(jwsTimes), median(receiptTimes), median(largeTimes) / 1000)
    }
}
