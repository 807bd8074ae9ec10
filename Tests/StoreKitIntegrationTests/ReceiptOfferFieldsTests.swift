import Foundation
import StoreKitTestSupport
import Testing

/// What an app receipt tells of each subscription period's offer, read by openssl from the real
/// daemon's signed receipt: `1713` (is_trial_period) for a free trial, `1719`
/// (is_in_intro_offer_period) for an introductory price, neither for a period at the full price.
/// (`1721`, a promotional offer's id: PromotionalOfferClientTests.)
@Suite("Receipts: a period's offer, as Apple's receipt fields tell it")
struct ReceiptOfferFieldsTests {
    /// The daemon on the sample catalogue, whose yearly plan gets a pay-as-you-go introductory
    /// price (the monthly plan's first week is free already).
    static func daemon() throws -> DaemonProcess {
        let daemon = try DaemonProcess()
        let catalogue = daemon.directory.file("config/catalog/example.storekit")
        var text = try String(contentsOfFile: catalogue, encoding: .utf8)
        let none = "\"introductoryOffer\" : null"
        #expect(text.components(separatedBy: none).count == 2, "the sample's yearly plan has no introductory offer")
        text = text.replacingOccurrences(of: none, with: """
            "introductoryOffer" : { "internalID" : "A1B2C399", "numberOfPeriods" : 1, "displayPrice" : "19.99",
              "paymentMode" : "payAsYouGo", "subscriptionPeriod" : "P1Y" }
            """)
        try text.write(toFile: catalogue, atomically: true, encoding: .utf8)
        try daemon.start()
        try daemon.ctl(["certificate"]).stdout.write(toFile: daemon.directory.file("root.pem"), atomically: true, encoding: .utf8)
        return daemon
    }

    static func purchases(_ daemon: DaemonProcess, uid: String) throws -> [[Int: String]] {
        let printed = try daemon.ctl(["receipt", Sample.app, "--uid", uid])
        #expect(printed.status == 0, "\(printed.stderr)")
        let receipt = try #require(Data(base64Encoded: printed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        return try IndependentVerifier.receiptPurchases(receipt, root: daemon.directory.file("root.pem"))
    }

    static let yes = IndependentVerifier.derInteger(true), no = IndependentVerifier.derInteger(false)
    static let transactionID = 1703

    @Test("the free week: 1713 set, 1719 not; its renewal at the full price: neither; a pay-as-you-go introductory year: 1719 set, 1713 not")
    func offerFlags() throws {
        let daemon = try Self.daemon()
        defer { daemon.remove() }
        let week = try daemon.ctlObject(["buy", Sample.app, Sample.monthly, "--uid", "1000"])
        let weekID = IndependentVerifier.derUTF8String(try #require(week[string: "transactionIdentifier"]))
        try daemon.ctlOK(["clock", "advance", "8d"])
        let monthly = try Self.purchases(daemon, uid: "1000")
        #expect(monthly.count == 2, "the free week and its renewal: \(monthly)")
        #expect(monthly.contains { $0[Self.transactionID] == weekID }, "the week is listed: \(monthly)")
        for purchase in monthly {
            let isTheWeek = purchase[Self.transactionID] == weekID
            #expect(purchase[1713] == (isTheWeek ? Self.yes : Self.no), "is_trial_period of \(purchase)")
            #expect(purchase[1719] == Self.no, "is_in_intro_offer_period of \(purchase)")
            #expect(purchase[1721] == nil, "no promotional offer: \(purchase)")
        }

        try daemon.ctlOK(["buy", Sample.app, Sample.yearly, "--uid", "1001"])
        let yearly = try Self.purchases(daemon, uid: "1001")
        #expect(yearly.count == 1)
        #expect(yearly.first?[1719] == Self.yes && yearly.first?[1713] == Self.no, "\(yearly)")
    }
}
