import Foundation
@testable import OpenStoreKit
import StoreKitSigning
import StoreKitTestSupport
import Testing

@Suite("SKAppReceipt validation: what an app must refuse")
struct AppReceiptValidationTests {
    static let app = "com.example.game"
    static let device: [UInt8] = Array(0..<16)

    static func receipt(app: String = app, device: [UInt8] = device) -> AppReceipt {
        let opaque: [UInt8] = Array(repeating: 9, count: 16)
        return AppReceipt(
            receiptType: "Xcode", bundleIdentifier: app, appVersion: "1.0", opaqueValue: opaque,
            sha1Hash: AppReceipt.hash(deviceIdentifier: device, opaqueValue: opaque, bundleIdentifier: app),
            creationDate: Date(), originalApplicationVersion: "1.0",
            inAppPurchases: [.init(quantity: 1, productIdentifier: "com.example.game.level_pack", transactionIdentifier: "2000000000000007",
                                   originalTransactionIdentifier: "2000000000000007", purchaseDate: Date(), originalPurchaseDate: Date(),
                                   cancellationDate: Date())])
    }

    static func identity(_ directory: TemporaryDirectory) throws -> SigningIdentity {
        try SigningIdentity.openOrCreate(directory: directory.file("signing")).0
    }

    @Test("a genuine receipt validates and lists its purchases, refunds with their cancellation date")
    func genuine() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let identity = try Self.identity(directory)
        let valid = try SKAppReceipt.validate(try identity.signReceipt(Self.receipt()), app: Self.app,
                                              verifier: ReceiptVerifier(roots: [identity.root]),
                                              deviceIdentifier: Self.device)
        #expect(valid.bundleIdentifier == Self.app)
        #expect(valid.purchase(transactionIdentifier: "2000000000000007")?.cancellationDate != nil)
        #expect(valid.purchase(transactionIdentifier: "2000000000000008") == nil)
    }

    @Test("refused: signed by another root, changed, another app's, another device's, not a receipt")
    func forgeries() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let identity = try Self.identity(directory)
        let stranger = TemporaryDirectory()
        defer { stranger.remove() }
        let other = try Self.identity(stranger)
        func refusal(_ data: [UInt8]) -> String? {
            do {
                _ = try SKAppReceipt.validate(data, app: Self.app, verifier: ReceiptVerifier(roots: [identity.root]),
                                               deviceIdentifier: Self.device)
                return nil
            } catch {
                return error.description
            }
        }
        #expect(refusal(try other.signReceipt(Self.receipt()))?.contains("does not verify") == true)
        var changed = try identity.signReceipt(Self.receipt())
        let payload = Self.receipt().encoded()
        let start = try #require((0...(changed.count - payload.count)).first { Array(changed[$0..<($0 + payload.count)]) == payload })
        changed[start + payload.count / 2] ^= 0x01
        #expect(refusal(changed)?.contains("does not verify") == true)
        #expect(refusal(try identity.signReceipt(Self.receipt(app: "com.example.other")))?.contains("is for com.example.other") == true)
        #expect(refusal(try identity.signReceipt(Self.receipt(device: Array(repeating: 0xEE, count: 16))))?.contains("another device") == true)
        #expect(refusal(Array("MIIB not a receipt".utf8))?.contains("does not verify") == true)
        #expect(refusal([])?.contains("does not verify") == true)
    }

    @Test("a missing file says where it looked and what fetches one")
    func missingFile() {
        #expect(throws: SKAppReceipt.ValidationError.self) {
            try SKAppReceipt.validated(contentsOf: URL(fileURLWithPath: "/nonexistent/receipt"), bundleIdentifier: Self.app)
        }
    }

    @Test("the receipt's place: XDG_DATA_HOME, else ~/.local/share, per app")
    func location() {
        #expect(ReceiptFile.url(app: "com.example.game", environment: ["XDG_DATA_HOME": "/data", "HOME": "/home/u"]).path
                == "/data/storekit/com.example.game/receipt")
        #expect(ReceiptFile.url(app: "com.example.game", environment: ["XDG_DATA_HOME": "relative", "HOME": "/home/u"]).path
                == "/home/u/.local/share/storekit/com.example.game/receipt")
    }
}
