import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing

/// `storekitctl expire`, through the real daemon: the subscription object, the signed renewal
/// info and the status a client reads over the wire say the same thing, as the App Store does
/// for a subscription that ended without renewing (issue #35).
@Suite("expire: subscription, renewal info and status agree")
struct ExpireAgreementTests {
    @Test("after expire, the subscription's expiresDate is its latest transaction's, and auto-renew is off everywhere")
    func expiredSubscriptionAgreesWithItsStatus() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let client = try Client(daemon)
        defer { client.close() }
        _ = try client.subscribe()
        let purchase = try client.buy(Sample.yearly)
        let uid = String(client.uid)

        let expired = try daemon.ctlObject(["expire", String(purchase.id)])
        #expect(expired[string: "state"] == "expired")
        #expect(expired["willAutoRenew"] as? Bool == false)

        let subscription = try #require(try daemon.ctlArray(["subscriptions", Sample.app, "--uid", uid]).first)
        #expect(subscription[string: "state"] == "expired")
        #expect(subscription["willAutoRenew"] as? Bool == false)
        let listedInfo = try Self.payload(try #require(subscription[string: "signedRenewalInfo"]))
        #expect(listedInfo["autoRenewStatus"] as? Int == 0, "willAutoRenew is false: \(listedInfo)")
        #expect(listedInfo["expirationIntent"] as? Int == 1, "ended without renewing, not a billing error: \(listedInfo)")
        #expect(listedInfo["renewalDate"] == nil, "no renewal to come: \(listedInfo)")

        // What a client reads: the status (state 2), its transaction and its renewal info.
        let statuses = try Self.subscriptionStatuses(client)
        let status = try #require(statuses.first, "no status")
        #expect(statuses.count == 1)
        #expect(status.state == .expired)
        #expect(status.transaction.id == purchase.id)
        let statusInfo = try Self.payload(status.signedRenewalInfo)
        #expect(statusInfo["autoRenewStatus"] as? Int == 0, "\(statusInfo)")

        // One expiry date: the subscription object's is the status transaction's, signed and unsigned.
        let transactionExpiry = try #require(status.transaction.expiresDate)
        let listedExpiry = try #require(Self.milliseconds(subscription[string: "expiresDate"]))
        #expect(listedExpiry == transactionExpiry, "subscription \(listedExpiry), its transaction \(transactionExpiry)")
        #expect(Self.milliseconds(expired[string: "expiresDate"]) == transactionExpiry)
        let signedTransaction = try Self.payload(try #require(status.transaction.jwsRepresentation))
        #expect(signedTransaction["expiresDate"] as? Int64 == transactionExpiry)
        #expect(purchase.expiresDate == transactionExpiry, "the purchase's period is not changed")

        // Expired means it does not renew, whatever time passes.
        try daemon.ctlOK(["clock", "advance", "2y"])
        #expect(try daemon.history([Sample.app, "--uid", uid]).count == 1, "an expired subscription never renews")
    }

    /// The `subscriptionStatus` reply for every group of this connection's queue.
    static func subscriptionStatuses(_ client: Client) throws -> [SubscriptionStatusRecord] {
        let id = client.makeRequestID()
        try client.connection.send(.subscriptionStatus(requestID: id, groupID: ""))
        while true {
            switch try client.connection.receive() {
            case .subscriptionStatus(let requestID, let statuses) where requestID == id:
                return statuses
            case .result(let requestID, let code, _, _, let message) where requestID == id:
                throw IntegrationFailure("subscriptionStatus refused: \(code.name) \(message)")
            default:
                continue
            }
        }
    }

    /// The payload of a compact JWS, as JSON (the signature is checked by ProofOfPurchaseTests).
    static func payload(_ jws: String) throws -> JSONObject {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw IntegrationFailure("not a compact JWS: \(jws.prefix(40))…") }
        var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64),
              let object = try JSONSerialization.jsonObject(with: data) as? JSONObject else {
            throw IntegrationFailure("JWS payload is not a JSON object")
        }
        return object
    }

    /// An RFC 3339 timestamp of the control JSON (`2023-11-14T22:13:20.000Z`) in ms since 1970.
    static func milliseconds(_ text: String?) -> Int64? {
        guard let text else { return nil }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text).map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
    }
}
