import StoreKitWire

/// Messages and records that exercise every case and every optional, shared by the wire tests.
enum WireSamples {
    /// Multi-byte scalars of every UTF-8 length, a flag sequence, a combining mark and a NUL.
    static let unicode = "Café ☕️ 日本語 𝄞 🇫🇷 e\u{301} \u{0}end"
    /// The same without the NUL: what a client may send (a NUL in a client's string is refused,
    /// NULStringTests).
    static let clientUnicode = "Café ☕️ 日本語 𝄞 🇫🇷 e\u{301} \u{7F}end"

    static let minimalTransaction = TransactionRecord(
        id: 2_000_000_000_000_001, uid: 0, app: "", productID: "", quantity: 1, state: .purchasing,
        sequence: 0, date: 0)

    static let fullTransaction = TransactionRecord(
        id: .max, originalID: 2_000_000_000_000_001, uid: .max, app: "com.example.game", productID: unicode,
        quantity: .max, state: .failed, sequence: .max, date: -1, finished: true, errorCode: 2,
        errorMessage: unicode, revocationDate: .min, revocationReason: -1, applicationUsername: unicode,
        expiresDate: .max, jwsRepresentation: "eyJhbGciOiJFUzI1NiJ9.e30.c2ln")

    static let transactionsInEveryState: [TransactionRecord] = TransactionState.allCases.enumerated().map { index, state in
        TransactionRecord(
            id: UInt64(index) + 1, uid: 1000, app: "com.example.game", productID: "com.example.game.coins100",
            quantity: 10, state: state, sequence: UInt64(index) * 7, date: 1_700_000_000_000)
    }

    static let minimalProduct = ProductRecord(
        productID: "", kind: .consumable, localizedTitle: "", localizedDescription: "", priceCents: 0,
        displayPrice: "", currencyCode: "", locale: "")

    static let fullProduct = ProductRecord(
        productID: "com.example.game.premium.monthly", kind: .autoRenewable, localizedTitle: unicode,
        localizedDescription: unicode, priceCents: .min, displayPrice: "4,99 €", currencyCode: "EUR",
        locale: "fr_FR", subscriptionGroupID: "21482456", subscriptionPeriod: "P1M", familyShareable: true,
        subscriptionGroupLevel: .min,
        introductoryOffer: .init(paymentMode: .freeTrial, period: "P1W"),
        promotionalOffers: [
            .init(id: unicode, paymentMode: .payAsYouGo, period: "P1M", periodCount: .max, priceCents: .max, displayPrice: unicode),
            .init(id: "", paymentMode: .payUpFront, period: "", periodCount: .min, priceCents: .min, displayPrice: ""),
        ],
        subscriptionGroupDisplayName: unicode)

    static let productsOfEveryKind: [ProductRecord] = ProductRecord.Kind.allCases.map { kind in
        ProductRecord(
            productID: "p.\(kind.name)", kind: kind, localizedTitle: "T", localizedDescription: "D",
            priceCents: 99, displayPrice: "0.99", currencyCode: "USD", locale: "en_US")
    }

    static let clientMessages: [ClientMessage] = [
        .hello(version: ProtocolVersion.current, app: "com.example.game"),
        .hello(version: .max, app: ""),
        .hello(version: 0, app: clientUnicode),
        .subscribe(requestID: 0),
        .subscribe(requestID: .max),
        .unsubscribe(requestID: 7),
        .addPayment(.init(requestID: 1, key: "key-1", productID: "com.example.game.coins100", quantity: 1)),
        .addPayment(.init(
            requestID: .max, key: clientUnicode, productID: clientUnicode, quantity: -5, applicationUsername: clientUnicode,
            hasRequestData: true, simulatesAskToBuy: true)),
        .addPayment(.init(
            requestID: 2, key: "", productID: "p", quantity: .min, applicationUsername: "",
            hasRequestData: false, simulatesAskToBuy: true)),
        .addPayment(.init(
            requestID: 3, key: "k", productID: "p", quantity: .max, applicationUsername: nil,
            hasRequestData: true, simulatesAskToBuy: false)),
        .finish(requestID: 3, transactionID: 0),
        .finish(requestID: 3, transactionID: .max),
        .restore(requestID: 4, applicationUsername: nil),
        .restore(requestID: 4, applicationUsername: ""),
        .restore(requestID: 4, applicationUsername: clientUnicode),
        .products(requestID: 5, identifiers: []),
        .products(requestID: 5, identifiers: ["com.example.game.level_pack", clientUnicode, ""]),
        .unfinished(requestID: 6),
        .unfinished(requestID: 6, afterID: .max),
        .control(requestID: 7, command: "list", arguments: []),
        .control(requestID: 7, command: clientUnicode, arguments: ["-o", "json", clientUnicode, ""]),
        .ping(requestID: 8),
        .cancelPayment(requestID: 9, transactionID: 2_000_000_000_000_042),
        .history(requestID: 10),
        .history(requestID: 10, afterID: 2_000_000_000_000_042),
        .subscriptionStatus(requestID: 11, groupID: ""),
        .subscriptionStatus(requestID: 11, groupID: clientUnicode),
        .appTransaction(requestID: 12),
        .receipt(requestID: .max),
        .content(requestID: 13, transactionID: 2_000_000_000_000_042),
        .openContent(requestID: 14, transactionID: .max, file: 0),
        .openContent(requestID: 14, transactionID: 1, file: .max),
    ]

    static let serverMessages: [ServerMessage] = [
        .welcome(version: ProtocolVersion.current, uid: 1000, storefrontCountryCode: "USA", storefrontID: "143441"),
        .welcome(version: 0, uid: .max, storefrontCountryCode: "", storefrontID: unicode),
        .welcome(version: 3, uid: 1000, storefrontCountryCode: "USA", storefrontID: "143441", hostedContent: [
            HostedContentRecord(productID: "com.example.game.level_pack", version: "1.0", length: 469),
            HostedContentRecord(productID: unicode, version: "", length: .max),
        ]),
        .result(requestID: 0, code: .ok, detail: 0, value: 0, message: ""),
        .updated([]),
        .updated([minimalTransaction, fullTransaction]),
        .updated(transactionsInEveryState),
        .removed([]),
        .removed([fullTransaction]),
        .products(requestID: 2, products: [], invalidIdentifiers: []),
        .products(requestID: 2, products: [minimalProduct, fullProduct], invalidIdentifiers: ["nope", unicode, ""]),
        .products(requestID: .max, products: productsOfEveryKind, invalidIdentifiers: []),
        .transactions(requestID: 3, transactions: []),
        .transactions(requestID: 3, transactions: [fullTransaction, minimalTransaction]),
        .controlResult(requestID: 4, code: .ok, message: "", json: ""),
        .controlResult(requestID: 4, code: .invalidArgument, message: unicode, json: #"{"a":[1,"\u0000"]}"#),
        .storefrontChanged(countryCode: "FRA", identifier: "143442"),
        .storefrontChanged(countryCode: "", identifier: unicode),
        .entitlementsRevoked(productIDs: []),
        .entitlementsRevoked(productIDs: ["com.example.game.level_pack", unicode]),
        .promotedPurchase(minimalProduct),
        .promotedPurchase(fullProduct),
        .subscriptionStatus(requestID: 5, statuses: []),
        .subscriptionStatus(requestID: 5, statuses: SubscriptionStatusRecord.State.allCases.map { state in
            SubscriptionStatusRecord(groupID: unicode, state: state, transaction: fullTransaction, signedRenewalInfo: "a.b.c")
        }),
        .signed(requestID: 6, jws: ""),
        .signed(requestID: 6, jws: "eyJhbGciOiJFUzI1NiJ9.e30.c2ln"),
        .receipt(requestID: 7, data: []),
        .receipt(requestID: 7, data: [0x30, 0x80, 0x00, 0xff]),
        .content(requestID: 8, manifest: ContentManifest(productID: "p", version: "1.0", files: [])),
        .content(requestID: 8, manifest: ContentManifest(productID: unicode, version: "2", files: [
            .init(path: "README.txt", length: 0, sha256: [UInt8](repeating: 0xe3, count: 32)),
            .init(path: "Levels/\(unicode).json", length: .max, sha256: [UInt8](repeating: 0, count: 32)),
        ])),
        .contentFile(requestID: 9, file: 0, length: 0),
        .contentFile(requestID: .max, file: .max, length: .max),
        .priceConsent(productID: "com.example.game.premium.monthly"),
        .priceConsent(productID: unicode),
    ] + ResultCode.allCases.map { code in
        .result(requestID: .max, code: code, detail: -1, value: .max, message: unicode)
    }
}
