import Foundation
import StoreKitTestSupport
import StoreKitWire
import Testing

/// Monthly billing with a 12-month commitment through the real daemon, over the wire protocol:
/// the signed transaction and renewal info carry Apple's `billingPlanType` and commitment info, as
/// verifiers this project did not write read them (PyJWT; Apple's App Store Server Library when
/// installed), and the commitment's months renew on the store clock.
@Suite("Billing plans over the wire")
struct BillingPlanTests {
    static let yearly = "com.example.game.premium.yearly.monthly_billing"

    static let catalog = """
    { "subscriptionGroups" : [ { "id" : "21482456", "name" : "Premium", "subscriptions" : [
        { "productID" : "\(yearly)", "type" : "RecurringSubscription", "displayPrice" : "11.88",
          "recurringSubscriptionPeriod" : "P1Y", "groupNumber" : 1,
          "billingPlans" : [
            { "billingPlanType" : "BILLED_UPFRONT", "commitmentDisplayPrice" : "11.88", "displayPrice" : "11.88", "isEnabled" : true },
            { "billingPlanType" : "MONTHLY", "commitmentDisplayPrice" : "6.00", "displayPrice" : "0.5", "isEnabled" : true } ] } ] } ] }
    """

    /// A daemon signing for Sandbox (Apple's library checks nothing of Xcode data) that sells `catalog`.
    static func daemon() throws -> DaemonProcess {
        try ProofOfPurchaseTests.daemon(environment: "Sandbox") { daemon in
            try catalog.write(toFile: daemon.directory.file("config/catalog/commitment.storekit"), atomically: true, encoding: .utf8)
            try "[App]\nID=\(Sample.app)\nEnvironment=Sandbox\nCatalog=catalog/commitment.storekit\n"
                .write(toFile: daemon.directory.file("config/apps.d/com.example.game.conf"), atomically: true, encoding: .utf8)
        }
    }

    /// The payloads of `tokens`, as PyJWT verified them against the daemon's root.
    static func payloads(_ tokens: [String], daemon: DaemonProcess) throws -> [[String: Any]] {
        let verified = try IndependentVerifier.verifyJWSLines(tokens, root: daemon.directory.file("root.pem"))
        #expect(verified.status == 0, "\(verified.stderr)")
        return verified.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    @Test("a monthly purchase: signed MONTHLY with its commitment (PyJWT, Apple's library), a malformed plan type closes the connection, twelve months renewed")
    func monthlyPurchaseSigned() throws {
        let daemon = try Self.daemon()
        defer { daemon.remove() }
        let client = try Client(daemon)
        _ = try client.subscribe()
        let bought = try client.request { id in
            .addPayment(.init(requestID: id, key: UUID().uuidString, productID: Self.yearly, quantity: 1, billingPlanType: .monthly))
        }
        #expect(bought.code == .ok, "\(bought.message)")
        let record = try #require(bought.updated.last { $0.state == .purchased })
        let jws = try #require(record.jwsRepresentation)
        let payload = try #require(try Self.payloads([jws], daemon: daemon).first)
        #expect(payload["billingPlanType"] as? String == "MONTHLY" && payload["price"] as? Int == 500)
        let commitment = try #require(payload["commitmentInfo"] as? [String: Any])
        #expect(commitment["billingPeriodNumber"] as? Int == 1 && commitment["totalBillingPeriods"] as? Int == 12)
        #expect(commitment["commitmentPrice"] as? Int == 6000)
        let commitmentEnd = try #require(commitment["commitmentExpiresDate"] as? Int)

        let subscription = try #require(try daemon.ctlArray(["subscriptions", Sample.app, "--uid", String(client.uid)]).first)
        let renewalJWS = try #require(subscription[string: "signedRenewalInfo"])
        let renewal = try #require(try Self.payloads([renewalJWS], daemon: daemon).first)
        #expect(renewal["renewalBillingPlanType"] as? String == "MONTHLY")
        let renewalCommitment = try #require(renewal["commitmentInfo"] as? [String: Any])
        #expect(renewalCommitment["commitmentRenewalDate"] as? Int == commitmentEnd)
        #expect(renewalCommitment["commitmentAutoRenewStatus"] as? Int == 1)

        // Apple's own library decodes the same fields into its models.
        if IndependentVerifier.appleLibraryPython != nil {
            let root = daemon.directory.file("root.der")
            let transaction = try IndependentVerifier.verifyWithAppleLibrary(jws, rootDER: root, bundleID: Sample.app, kind: "transaction")
            #expect(transaction.status == 0, "\(transaction.stderr)")
            #expect(transaction.stdout.contains("billingPlanType=<BillingPlanType.MONTHLY"), "\(transaction.stdout)")
            #expect(transaction.stdout.contains("TransactionCommitmentInfo(billingPeriodNumber=1, commitmentExpiresDate=\(commitmentEnd), "
                                                + "commitmentPrice=6000, totalBillingPeriods=12)"), "\(transaction.stdout)")
            let info = try IndependentVerifier.verifyWithAppleLibrary(renewalJWS, rootDER: root, bundleID: Sample.app, kind: "renewal")
            #expect(info.status == 0, "\(info.stderr)")
            #expect(info.stdout.contains("renewalBillingPlanType=<RenewalBillingPlanType.MONTHLY"), "\(info.stdout)")
            #expect(info.stdout.contains("RenewalCommitmentInfo(commitmentAutoRenewProductId='\(Self.yearly)'"), "\(info.stdout)")
            #expect(info.stdout.contains("commitmentRenewalDate=\(commitmentEnd), commitmentRenewalPrice=6000"), "\(info.stdout)")
        }

        // A payment for a plan type the wire does not define is malformed; the daemon closes the connection.
        var bytes = ClientMessage.addPayment(.init(requestID: 99, key: "bad", productID: Self.yearly, quantity: 1, billingPlanType: .monthly))
            .encode()
        bytes[bytes.count - 1] = 7
        let raw = try Client(daemon)
        try raw.connection.sendRaw(Frame.encode(body: bytes))
        #expect(throws: (any Error).self) { for _ in 0..<10 { _ = try raw.connection.receive() } }

        // Eleven months later: twelve transactions, each its month of the same commitment.
        #expect(try daemon.ctl(["clock", "advance", "P11M"]).status == 0)
        let id = client.makeRequestID()
        try client.connection.send(.history(requestID: id, afterID: 0))
        var history: [TransactionRecord] = []
        while true {
            if case .transactions(id, let records) = try client.connection.receive() {
                history = records
                break
            }
        }
        let tokens = history.compactMap(\.jwsRepresentation)
        #expect(tokens.count == 12)
        let months = try Self.payloads(tokens, daemon: daemon).compactMap { ($0["commitmentInfo"] as? [String: Any])?["billingPeriodNumber"] as? Int }
        #expect(months == Array(1...12), "\(months)")
    }
}
