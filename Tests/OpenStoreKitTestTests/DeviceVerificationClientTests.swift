// Device verification of transactions, as an app checks it (Apple's recipe: SHA-384 of the
// nonce's lowercase string followed by `AppStore.deviceVerificationID`'s), computed here by openssl.
import Foundation
import OpenStoreKit
@testable import OpenStoreKitTest
import StoreKitTestSupport
import Testing

extension OpenStoreKitTestSuites {
@Suite("Device verification, in the app's process")
struct DeviceVerificationClientTests {
    /// SHA-384 of `text`, by openssl.
    static func sha384(_ text: String) throws -> Data {
        let directory = TemporaryDirectory("skdv")
        defer { directory.remove() }
        let input = directory.file("input")
        try Data(text.utf8).write(to: URL(fileURLWithPath: input))
        let result = try ProcessRunner.run("/usr/bin/openssl", ["dgst", "-sha384", "-binary", "-out", input + ".out", input])
        #expect(result.status == 0, "\(result.stderr)")
        return try Data(contentsOf: URL(fileURLWithPath: input + ".out"))
    }

    @Test("a transaction and the app transaction carry device verification for this machine and app, each transaction its own nonce, and one appTransactionID")
    func transactionsCarryDeviceVerification() async throws {
        let session = try SKTestSession(configurationFileNamed: "Store")
        session.clearTransactions()
        let device = try #require(AppStore.deviceVerificationID, "this machine has a machine id")
        #expect(AppStore.deviceVerificationID == device, "the same for the app every time")

        let product = try #require(try await Product.products(for: ["com.example.game.coins100"]).first)
        var nonces = Set<UUID>()
        var appTransactionIDs = Set<String>()
        for _ in 0..<2 {
            guard case .success(let result) = try await product.purchase() else { throw CancellationError() }
            let transaction = try result.payloadValue
            let expected = try Self.sha384(transaction.deviceVerificationNonce.uuidString.lowercased() + device.uuidString.lowercased())
            #expect(transaction.deviceVerification == expected)
            #expect(result.deviceVerification == expected && result.deviceVerificationNonce == transaction.deviceVerificationNonce)
            nonces.insert(transaction.deviceVerificationNonce)
            appTransactionIDs.insert(transaction.appTransactionID)
            await transaction.finish()
        }
        #expect(nonces.count == 2)

        let app = try await AppTransaction.shared
        let appTransaction = try app.payloadValue
        #expect(appTransaction.deviceVerification
                == (try Self.sha384(appTransaction.deviceVerificationNonce.uuidString.lowercased() + device.uuidString.lowercased())))
        #expect(app.deviceVerification == appTransaction.deviceVerification)
        // One id for the user's "download" of the app, in the app transaction and every transaction.
        #expect(!appTransaction.appTransactionID.isEmpty && UInt64(appTransaction.appTransactionID) != nil,
                "a decimal number, as Apple's: \(appTransaction.appTransactionID)")
        #expect(appTransactionIDs == [appTransaction.appTransactionID])
        // What Apple's Xcode and sandbox environments leave out, and a store without preorders.
        #expect(appTransaction.appID == nil && appTransaction.appVersionID == nil && appTransaction.preorderDate == nil)
    }
}
}
