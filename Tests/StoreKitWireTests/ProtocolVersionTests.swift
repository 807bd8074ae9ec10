import StoreKitWire
import Testing

// Version 1 of the protocol as it shipped: the bytes of its own worked example (docs/protocol.md
// of version 1, §12), and what a version-2 message becomes for a version-1 client.

@Suite("Protocol versions")
struct ProtocolVersionTests {
    static func bytes(_ hex: String) -> [UInt8] {
        hex.split(separator: " ").map { UInt8($0, radix: 16)! }
    }

    /// The `updated` push of version 1's worked example, after its 4-byte length: 95 bytes.
    static let version1Updated = bytes("""
        82 01 00 00 00 3b 70 d2 97 cf 34 07 00 00 e8 03 00 00 \
        10 00 00 00 63 6f 6d 2e 65 78 61 6d 70 6c 65 2e 67 61 6d 65 \
        19 00 00 00 63 6f 6d 2e 65 78 61 6d 70 6c 65 2e 67 61 6d 65 2e 63 6f 69 6e 73 31 30 30 \
        01 00 00 00 01 02 00 00 00 00 00 00 00 00 68 e5 cf 8b 01 00 00 00 00 00 00 00 00 00
        """.replacingOccurrences(of: "\\\n", with: " ").replacingOccurrences(of: "\n", with: " "))

    static let record = TransactionRecord(
        id: 2_028_391_047_000_123, uid: 1000, app: "com.example.game", productID: "com.example.game.coins100",
        quantity: 1, state: .purchased, sequence: 2, date: 1_700_000_000_000)

    @Test("the daemon serves versions 1 to 5; its clients speak 5")
    func served() {
        #expect(ProtocolVersion.served == 1...5)
        #expect(ProtocolVersion.current == 5)
    }

    @Test("version 5 adds billing plans to a ProductRecord and the billing plan to addPayment; nothing else changes")
    func version5BillingPlans() throws {
        let monthly = ClientMessage.addPayment(.init(requestID: 7, key: "k", productID: "p", quantity: 1, billingPlanType: .monthly))
        #expect(try ClientMessage.decode(monthly.encode(version: 5), version: 5) == monthly)
        #expect(monthly.requiredVersion == 5)
        let upFront = ClientMessage.addPayment(.init(requestID: 7, key: "k", productID: "p", quantity: 1, billingPlanType: .upFront))
        #expect(try ClientMessage.decode(upFront.encode(version: 5), version: 5) == upFront)
        // Up front is what an older daemon bills anyway: it is dropped for one.
        #expect(upFront.requiredVersion == 1)
        let plain = ClientMessage.addPayment(.init(requestID: 7, key: "k", productID: "p", quantity: 1))
        #expect(upFront.encode(version: 4) == plain.encode(version: 4))
        #expect(monthly.encode(version: 5).count == plain.encode(version: 5).count + 1)
        // The plan's optional marker, then the Advanced Commerce request's (absent: 0).
        #expect(plain.encode(version: 5).count == plain.encode(version: 4).count + 2)
        // An unknown plan type or optional marker is refused (the plan's type is the byte before
        // the request's marker; the plan's marker the one before it).
        var bad = monthly.encode(version: 5)
        bad[bad.count - 2] = 9
        #expect(throws: WireError.self) { try ClientMessage.decode(bad, version: 5) }
        // The marker alone: a valid type after it, so only the marker can be refused (the plan's
        // marker is the byte before its type, which is the byte before the request's marker).
        bad = monthly.encode(version: 5)
        #expect(try ClientMessage.decode(bad, version: 5) == monthly)
        bad[bad.count - 3] = 2
        #expect(throws: WireError.self) { try ClientMessage.decode(bad, version: 5) }

        var product = WireSamples.fullProduct
        product.billingPlans = [
            .init(type: .upFront, billingPeriod: "P1Y", priceCents: 1188, displayPrice: "11.88", commitmentPeriod: "P1Y",
                  commitmentPriceCents: 1188, commitmentDisplayPrice: "11.88", introductoryOffer: product.introductoryOffer,
                  promotionalOffers: product.promotionalOffers),
            .init(type: .monthly, billingPeriod: "P1M", priceCents: 50, displayPrice: "0.5", commitmentPeriod: "P1Y",
                  commitmentPriceCents: 600, commitmentDisplayPrice: "6.00",
                  winBackOffers: [.init(id: "w", paymentMode: .freeTrial, period: "P1M")]),
        ]
        var writer = WireWriter()
        product.encode(into: &writer, version: 5)
        var reader = WireReader(writer.bytes)
        #expect(try ProductRecord.decode(from: &reader, version: 5) == product)
        #expect(reader.remaining == 0)
        var older = WireWriter()
        product.encode(into: &older, version: 4)
        var withoutPlans = product
        withoutPlans.billingPlans = []
        var olderReader = WireReader(older.bytes)
        #expect(try ProductRecord.decode(from: &olderReader, version: 4) == withoutPlans)
        var empty = WireWriter()
        withoutPlans.encode(into: &empty, version: 5)
        #expect(empty.bytes.count == older.bytes.count + 4)
        // A plan type the wire does not define is refused.
        var unknown = writer.bytes
        unknown[older.bytes.count + 4] = 7
        var unknownReader = WireReader(unknown)
        #expect(throws: WireError.self) { try ProductRecord.decode(from: &unknownReader, version: 5) }
        // Every other message is encoded the same in versions 4 and 5.
        for message in WireSamples.serverMessages {
            if case .products = message { continue }
            if case .promotedPurchase = message { continue }
            #expect(message.encode(version: 4) == message.encode(version: 5))
        }
        for message in WireSamples.clientMessages {
            if case .addPayment = message { continue }
            #expect(message.encode(version: 4) == message.encode(version: 5))
        }
    }

    @Test("version 5 adds the signed Advanced Commerce request to addPayment, after the billing plan")
    func version5AdvancedCommerce() throws {
        let payment = ClientMessage.AddPayment(requestID: 7, key: "k", productID: "p", quantity: 1, offerJWS: "a.b.c",
                                               advancedCommerceJWS: "g.h.i")
        let message = ClientMessage.addPayment(payment)
        #expect(message.requiredVersion == 5)
        #expect(try ClientMessage.decode(message.encode(version: 5), version: 5) == message)
        var plain = payment
        plain.advancedCommerceJWS = nil
        #expect(ClientMessage.addPayment(plain).requiredVersion == 4)
        #expect(message.encode(version: 4) == ClientMessage.addPayment(plain).encode(version: 4))
        // The plan's marker (absent), then the request: its marker, length and bytes.
        #expect(message.encode(version: 5).count == message.encode(version: 4).count + 1 + 1 + 4 + 5)
        // docs/protocol.md's worked example: the coins bought with key k1 are 53 bytes in version 5.
        let coins = ClientMessage.addPayment(.init(requestID: 4, key: "k1", productID: "com.example.game.coins100", quantity: 1))
        #expect([5, 4, 3, 2, 1].map { coins.encode(version: $0).count } == [53, 51, 48, 47, 47])
        // Both at once: the plan, then the request.
        let both = ClientMessage.addPayment(.init(requestID: 7, key: "k", productID: "p", quantity: 1, billingPlanType: .monthly,
                                                  advancedCommerceJWS: "g.h.i"))
        #expect(try ClientMessage.decode(both.encode(version: 5), version: 5) == both)
        // A version-5 payment cut short (no advanced_commerce_jws marker) is not a message.
        #expect(throws: WireError.self) { try ClientMessage.decode(message.encode(version: 4), version: 5) }
    }

    @Test("version 4 adds JWS-signed offers and win-back offers to addPayment, the group's display name and win-back offers to a ProductRecord; nothing else changes")
    func version4() throws {
        let payment = ClientMessage.AddPayment(requestID: 7, key: "k", productID: "p", quantity: 1, offerJWS: "a.b.c", eligibilityJWS: "d.e.f",
                                               winBackOfferID: "w")
        let message = ClientMessage.addPayment(payment)
        #expect(try ClientMessage.decode(message.encode(version: 4), version: 4) == message)
        // Version 3 has neither field: they are not sent, and its bytes are what they were.
        var plain = payment
        plain.offerJWS = nil
        plain.eligibilityJWS = nil
        plain.winBackOfferID = nil
        #expect(message.encode(version: 3) == ClientMessage.addPayment(plain).encode(version: 3))
        #expect(try ClientMessage.decode(message.encode(version: 3), version: 3) == .addPayment(plain))
        #expect(message.encode(version: 4).count == message.encode(version: 3).count + 2 * (1 + 4 + 5) + (1 + 4 + 1))

        var product = WireSamples.fullProduct
        product.subscriptionGroupDisplayName = "Premium"
        product.winBackOffers = [.init(id: "w", paymentMode: .freeTrial, period: "P1M")]
        var writer = WireWriter()
        product.encode(into: &writer, version: 4)
        var reader = WireReader(writer.bytes)
        #expect(try ProductRecord.decode(from: &reader, version: 4) == product)
        var older = WireWriter()
        product.encode(into: &older, version: 3)
        var withoutName = product
        withoutName.subscriptionGroupDisplayName = nil
        withoutName.winBackOffers = []
        var olderReader = WireReader(older.bytes)
        #expect(try ProductRecord.decode(from: &olderReader, version: 3) == withoutName)
        // Version 4's extra bytes: the display name (opt<string> "Premium": 1 + 4 + 7) and the
        // win-back offers' count (4), then each offer as the promotional ones are encoded.
        var withoutWinBack = product
        withoutWinBack.winBackOffers = []
        var plainWriter = WireWriter()
        withoutWinBack.encode(into: &plainWriter, version: 4)
        #expect(plainWriter.bytes.count == older.bytes.count + (1 + 4 + 7) + 4)
        var promotional = withoutWinBack
        promotional.promotionalOffers.append(product.winBackOffers[0])
        var promotionalWriter = WireWriter()
        promotional.encode(into: &promotionalWriter, version: 4)
        #expect(writer.bytes.count == promotionalWriter.bytes.count)
        // Every other message is encoded the same in versions 3 and 4.
        for message in WireSamples.serverMessages {
            if case .products = message { continue }
            if case .promotedPurchase = message { continue }
            if case .welcome = message { continue }
            #expect(message.encode(version: 3) == message.encode(version: 4))
        }
    }

    @Test("version 3 adds hosted content: content and openContent are unknown types to versions 1 and 2, the welcome lists downloadable products")
    func version3() throws {
        for message in [ClientMessage.content(requestID: 1, transactionID: 2), .openContent(requestID: 1, transactionID: 2, file: 3)] {
            let body = message.encode()
            #expect(try ClientMessage.decode(body, version: 3) == message)
            #expect(throws: WireError(.unknownMessageType(body[0]))) { try ClientMessage.decode(body, version: 2) }
            #expect(throws: WireError(.unknownMessageType(body[0]))) { try ClientMessage.decode(body, version: 1) }
        }
        let content = [HostedContentRecord(productID: "com.example.game.level_pack", version: "1.0", length: 469)]
        let welcome = ServerMessage.welcome(version: 2, uid: 1000, storefrontCountryCode: "USA", storefrontID: "143441",
                                            hostedContent: content)
        // Versions 1 and 2 read the welcome they always did; version 3 reads the list after it.
        let plain = ServerMessage.welcome(version: 2, uid: 1000, storefrontCountryCode: "USA", storefrontID: "143441")
        #expect(welcome.encode(version: 2) == plain.encode(version: 2))
        #expect(try ServerMessage.decode(welcome.encode(version: 3), version: 3) == welcome)
        #expect(welcome.encode(version: 3).count == plain.encode(version: 2).count + 4 + 4 + 27 + 4 + 3 + 8)
        // Every message version 2 has is encoded the same in version 3 (a push is shared by both).
        for message in WireSamples.serverMessages {
            if case .welcome = message { continue }
            if case .content = message { continue }
            if case .contentFile = message { continue }
            if case .priceConsent = message { continue }
            if case .result(_, .noContent, _, _, _) = message { continue }
            #expect(message.encode(version: 2) == message.encode(version: 3))
        }
        // A result code a version-2 client does not know is never sent to it.
        #expect(ResultCode.noContent.rawValue(version: 2) == ResultCode.invalidArgument.rawValue)
        #expect(ResultCode.noContent.rawValue(version: 3) == 19)
    }

    @Test("a manifest with an unsafe path or a digest of another size is refused")
    func manifestChecks() throws {
        for path in ["/etc/passwd", "../x", "a/../../x", "a//b", "./a", "", "a/"] {
            let manifest = ContentManifest(productID: "p", version: "1", files: [.init(path: path, length: 1, sha256: [UInt8](repeating: 1, count: 32))])
            #expect(throws: WireError.self, "\(path)") {
                try ServerMessage.decode(ServerMessage.content(requestID: 1, manifest: manifest).encode())
            }
        }
        let short = ContentManifest(productID: "p", version: "1", files: [.init(path: "a", length: 1, sha256: [1, 2])])
        #expect(throws: WireError.self) { try ServerMessage.decode(ServerMessage.content(requestID: 1, manifest: short).encode()) }
    }

    @Test("a transaction for a version-1 client is version 1's worked example, byte for byte, without its JWS")
    func version1Record() throws {
        var signed = Self.record
        signed.jwsRepresentation = "eyJhbGciOiJFUzI1NiJ9.e30.c2ln"
        #expect(Self.version1Updated.count == 95)
        #expect(ServerMessage.updated([signed]).encode(version: 1) == Self.version1Updated)
        #expect(try ServerMessage.decode(Self.version1Updated, version: 1) == .updated([Self.record]))
        // Version 2 adds the JWS (one more byte when absent) and cannot read a version-1 record.
        #expect(ServerMessage.updated([Self.record]).encode(version: 2) == Self.version1Updated + [0])
        #expect(throws: WireError.self) { try ServerMessage.decode(Self.version1Updated, version: 2) }
    }

    @Test("hello and welcome are the same in both versions")
    func helloAndWelcome() throws {
        let hello = Self.bytes("01 01 00 10 00 00 00 63 6f 6d 2e 65 78 61 6d 70 6c 65 2e 67 61 6d 65")
        #expect(try ClientMessage.decode(hello, version: 1) == .hello(version: 1, app: "com.example.game"))
        #expect(try ClientMessage.decode(hello, version: 2) == .hello(version: 1, app: "com.example.game"))
        let welcome = ServerMessage.welcome(version: 1, uid: 1000, storefrontCountryCode: "USA", storefrontID: "143441")
        #expect(welcome.encode(version: 1) == Self.bytes("80 01 00 e8 03 00 00 03 00 00 00 55 53 41 06 00 00 00 31 34 33 34 34 31"))
    }

    @Test("a version-1 unfinished has no after_id; version 2's has one, and each is refused in the other's reading")
    func unfinished() throws {
        let version1 = Self.bytes("08 07 00 00 00")
        #expect(try ClientMessage.decode(version1, version: 1) == .unfinished(requestID: 7, afterID: 0))
        #expect(throws: WireError.self) { try ClientMessage.decode(version1, version: 2) }
        #expect(ClientMessage.unfinished(requestID: 7, afterID: 99).encode(version: 1) == version1)
        let version2 = ClientMessage.unfinished(requestID: 7, afterID: 99).encode()
        #expect(throws: WireError.self) { try ClientMessage.decode(version2, version: 1) }
    }

    @Test("version 1 has no message after cancelPayment (11): history, subscriptionStatus, appTransaction and receipt are unknown types")
    func version1Messages() throws {
        let newer: [ClientMessage] = [
            .history(requestID: 1, afterID: 0), .subscriptionStatus(requestID: 1, groupID: ""),
            .appTransaction(requestID: 1), .receipt(requestID: 1),
        ]
        for message in newer {
            let body = message.encode()
            #expect(try ClientMessage.decode(body, version: 2) == message)
            #expect(throws: WireError(.unknownMessageType(body[0]))) { try ClientMessage.decode(body, version: 1) }
        }
        let older: [ClientMessage] = [
            .subscribe(requestID: 1), .finish(requestID: 2, transactionID: 3), .cancelPayment(requestID: 4, transactionID: 5),
            .restore(requestID: 6, applicationUsername: "u"), .products(requestID: 7, identifiers: ["a"]),
        ]
        for message in older { #expect(try ClientMessage.decode(message.encode(version: 1), version: 1) == message) }
    }

    @Test("a product for a version-1 client ends at family_shareable: no group level, no offers")
    func version1Product() throws {
        let product = ProductRecord(
            productID: "p.monthly", kind: .autoRenewable, localizedTitle: "Monthly", localizedDescription: "d",
            priceCents: 299, displayPrice: "2.99", currencyCode: "USD", locale: "en_US", subscriptionGroupID: "g",
            subscriptionPeriod: "P1M", subscriptionGroupLevel: 1,
            introductoryOffer: .init(paymentMode: .freeTrial, period: "P1W"),
            promotionalOffers: [.init(id: "o", paymentMode: .payAsYouGo, period: "P1M", priceCents: 99, displayPrice: "0.99")])
        let version1 = ServerMessage.products(requestID: 3, products: [product], invalidIdentifiers: ["x"]).encode(version: 1)
        let version2 = ServerMessage.products(requestID: 3, products: [product], invalidIdentifiers: ["x"]).encode(version: 2)
        var plain = product
        plain.subscriptionGroupLevel = nil
        plain.introductoryOffer = nil
        plain.promotionalOffers = []
        #expect(try ServerMessage.decode(version1, version: 1) == .products(requestID: 3, products: [plain], invalidIdentifiers: ["x"]))
        #expect(try ServerMessage.decode(version2, version: 2) == .products(requestID: 3, products: [product], invalidIdentifiers: ["x"]))
        // Version 2's extra bytes: the group level (opt<i32>: 5), the introductory offer's marker (1)
        // and offer (29), the offers' count (4) and one offer (34).
        #expect(version2.count - version1.count == 5 + 1 + 29 + 4 + 34)
    }

    @Test("storeUnreachable (18), which version 1 does not know, reaches it as storageFailure (8) with its words")
    func version1ResultCodes() throws {
        let message = ServerMessage.result(9, .storeUnreachable, "PostgreSQL cannot be reached")
        #expect(try ServerMessage.decode(message.encode(version: 1), version: 1)
                == .result(9, .storageFailure, "PostgreSQL cannot be reached"))
        #expect(try ServerMessage.decode(message.encode()) == message)
        for code in ResultCode.allCases where code != .storeUnreachable && code != .noContent {
            #expect(code.rawValue(version: 1) == code.rawValue)
            #expect(code.rawValue <= 17)
        }
    }
}
