// This library against an older storekitd: a daemon that serves versions up to 4 (or 3, or 2)
// refuses the library's version 5 hello; the library says hello again in the daemon's version and works
// on, and a request only a newer version carries fails with an error instead of going out without
// what it asked for.
import Foundation
@_spi(StoreKitTest) import OpenStoreKit
@testable import OpenStoreKitTest
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing

extension OpenStoreKitTestSuites {
@Suite("An older storekitd, in the app's process")
struct OlderDaemonClientTests {
    @Test("the library steps down to the daemon's version, buys, and refuses what that version cannot carry",
          arguments: [4, 3, 2] as [UInt16])
    func stepsDown(to version: UInt16) async throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        let config = (daemon.configFile as NSString).deletingLastPathComponent
        try "[App]\nID=\(TestStoreBinding.appIdentifier)\nCatalog=catalog/example.storekit\n"
            .write(toFile: config + "/apps.d/com.example.game.conf", atomically: true, encoding: .utf8)
        daemon.extraArguments = ["--enable-test-hooks"]
        try daemon.start()
        let control = try WireConnection(path: daemon.controlSocket)
        _ = try control.hello(app: "")
        try control.send(.control(requestID: 1, command: "debug-serve-up-to", arguments: [String(version)]))
        guard case .controlResult(1, .ok, _, _) = try control.receive() else { throw CancellationError() }
        // The cap holds: a hello of this library's version is refused.
        let refused = try WireConnection(path: daemon.clientSocket)
        #expect(throws: ConnectionError.self) { _ = try refused.hello(app: TestStoreBinding.appIdentifier) }

        TestStoreBinding.bind(socketPath: daemon.clientSocket, dataHome: daemon.dataHome)
        defer { TestStoreBinding.unbind() }
        let products = try await Product.products(for: ["com.example.game.level_pack", "com.example.game.premium.monthly"])
        #expect(products.count == 2)
        let pack = try #require(products.first { $0.id == "com.example.game.level_pack" })
        guard case .success(let result) = try await pack.purchase() else { throw CancellationError() }
        let transaction = try result.payloadValue
        #expect(transaction.productID == pack.id, "bought and verified in version \(version)")
        await transaction.finish()

        let monthly = try #require(products.first { $0.id == "com.example.game.premium.monthly" })
        #expect(monthly.subscription?.winBackOffers.isEmpty == (version < 4), "version \(version) carries win-back offers from 4")
        #expect(monthly.subscription?.pricingTerms.map(\.billingPlanType) == [.upFront], "no billing plans before version 5: up front")
        await #expect(throws: (any Error).self, "a monthly billing plan needs version 5") {
            _ = try await monthly.purchase(options: [.billingPlanType(.monthly)])
        }
        let offer = try #require(monthly.subscription?.promotionalOffers.first)
        await #expect(throws: (any Error).self, "a signed offer needs version 4 (and this one is no JWS)") {
            _ = try await monthly.purchase(options: [.promotionalOffer(offer, compactJWS: "a.b.c")])
        }
        await #expect(throws: (any Error).self, "an Advanced Commerce request needs version 5") {
            _ = try await AdvancedCommerceProduct(id: pack.id).purchase(compactJWS: "a.b.c")
        }
        #expect(await Transaction.all.reduce(0) { count, _ in count + 1 } >= 1, "the connection goes on")
    }
}
}
