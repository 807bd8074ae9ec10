import StoreKitWire
import Testing

/// The product record's subscription terms (group level, introductory and promotional offers),
/// which StoreKit 2's `Product.SubscriptionInfo` and StoreKit 1's `SKProductDiscount` are made from.
@Suite("ProductRecord encoding")
struct ProductRecordTests {
    private static func encoded(_ product: ProductRecord) -> [UInt8] {
        var writer = WireWriter()
        product.encode(into: &writer)
        return writer.bytes
    }

    private static func decoded(_ bytes: [UInt8]) throws(WireError) -> ProductRecord {
        var reader = WireReader(bytes)
        let product = try ProductRecord.decode(from: &reader)
        try reader.expectEnd()
        return product
    }

    @Test("the smallest product is 42 bytes in versions 2 and 3, 47 in version 4 (the group's display name, the win-back offers), 51 in version 5 (the billing plans): docs/protocol.md's minimum")
    func minimalSize() {
        var version3 = WireWriter()
        WireSamples.minimalProduct.encode(into: &version3, version: 3)
        #expect(version3.bytes.count == 42)
        var version4 = WireWriter()
        WireSamples.minimalProduct.encode(into: &version4, version: 4)
        #expect(version4.bytes.count == 47)
        #expect(Self.encoded(WireSamples.minimalProduct).count == 51)
        // The smallest billing plan: docs/protocol.md's 42 bytes.
        var product = WireSamples.minimalProduct
        product.billingPlans = [.init(type: .upFront, billingPeriod: "", priceCents: 0, displayPrice: "", commitmentPeriod: "",
                                      commitmentPriceCents: 0, commitmentDisplayPrice: "")]
        #expect(Self.encoded(product).count == 51 + 42)
        #expect(ProductRecord.minimumEncodedSize == 42, "a lower bound for every version")
    }

    @Test("offers of every payment mode round-trip, with and without identifiers")
    func offersRoundTrip() throws {
        for mode in ProductRecord.Offer.PaymentMode.allCases {
            var product = WireSamples.fullProduct
            product.introductoryOffer = .init(paymentMode: mode, period: "P3D", periodCount: 2, priceCents: 199, displayPrice: "1.99")
            product.promotionalOffers.append(.init(id: "promo", paymentMode: mode, period: "P1Y"))
            #expect(try Self.decoded(Self.encoded(product)) == product)
        }
    }

    @Test("the offers follow the eleven fields of protocol 2's first product record, in the documented layout")
    func layout() {
        var product = WireSamples.minimalProduct
        product.subscriptionGroupLevel = 2
        product.introductoryOffer = .init(paymentMode: .freeTrial, period: "P1W")
        product.promotionalOffers = [.init(id: "x", paymentMode: .payAsYouGo, period: "P1M", periodCount: 3, priceCents: 299, displayPrice: "2.99")]
        let bytes = Self.encoded(product)
        let tail = Array(bytes.dropFirst(36))
        let expected: [UInt8] = [1, 2, 0, 0, 0]                  // group level: present, i32 2
            + [1, 0, 2, 3, 0, 0, 0] + Array("P1W".utf8)           // intro: present, no id, freeTrial, "P1W"
            + [1, 0, 0, 0] + [0, 0, 0, 0, 0, 0, 0, 0]              // 1 period, 0 cents
            + [4, 0, 0, 0] + Array("0.00".utf8)                   // display price
            + [1, 0, 0, 0]                                        // one promotional offer
            + [1, 1, 0, 0, 0] + Array("x".utf8) + [0]              // id "x", payAsYouGo
            + [3, 0, 0, 0] + Array("P1M".utf8) + [3, 0, 0, 0]      // "P1M", 3 periods
            + [0x2B, 1, 0, 0, 0, 0, 0, 0] + [4, 0, 0, 0] + Array("2.99".utf8)
            + [0]                                                 // group display name: absent (version 4)
            + [0, 0, 0, 0]                                        // no win-back offers (version 4)
            + [0, 0, 0, 0]                                        // no billing plans (version 5)
        #expect(tail == expected)
    }

    @Test("an unknown payment mode is rejected")
    func unknownPaymentMode() {
        var product = WireSamples.minimalProduct
        product.introductoryOffer = .init(paymentMode: .freeTrial, period: "")
        var bytes = Self.encoded(product)
        // 36 bytes, level marker 1, offer marker 1, offer id marker 1, then the mode.
        #expect(bytes[39] == ProductRecord.Offer.PaymentMode.freeTrial.rawValue)
        bytes[39] = 3
        #expect(throws: WireError(.invalidValue("offer payment mode 3"))) { try Self.decoded(bytes) }
    }

    @Test("a bad marker of the introductory offer is rejected")
    func badOfferMarker() {
        var bytes = Self.encoded(WireSamples.minimalProduct)
        bytes[37] = 2
        #expect(throws: WireError(.invalidValue("optional marker 2"))) { try Self.decoded(bytes) }
    }

    @Test("a promotional offer count larger than the bytes could hold is rejected before decoding")
    func absurdOfferCount() {
        var bytes = Self.encoded(WireSamples.minimalProduct) + Array(repeating: 0, count: 21)
        bytes[38] = 1   // one offer needs 22 bytes; only 21 follow
        #expect(throws: WireError(.truncated)) { try Self.decoded(bytes) }
    }
}
