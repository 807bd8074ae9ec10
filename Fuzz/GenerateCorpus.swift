// Writes the seed corpus Fuzz/corpus/{client-message,server-message,frame-decoder}/ from real
// encodings made by the codec itself. Run by `scripts/fuzz.sh --regenerate-corpus` (compiled with
// Sources/StoreKitWire/*.swift into one module); the output is checked in, so a normal fuzz run does
// not need it. Seeds are named after what they hold.
#if canImport(Glibc)
import Glibc
#endif

@main
enum GenerateCorpus {
    static let unicode = "Café ☕️ 日本語 𝄞 🇫🇷 e\u{301} \u{0}end"

    static let clientMessages: [(String, ClientMessage)] = [
        ("hello", .hello(version: ProtocolVersion.current, app: "com.example.game")),
        ("hello-control", .hello(version: ProtocolVersion.current, app: "")),
        ("hello-unicode", .hello(version: .max, app: unicode)),
        ("subscribe", .subscribe(requestID: 1)),
        ("unsubscribe", .unsubscribe(requestID: .max)),
        ("add-payment", .addPayment(.init(requestID: 2, key: "3F2504E0-4F89-11D3-9A0C-0305E82C3301",
                                          productID: "com.example.game.coins100", quantity: 1))),
        ("add-payment-full", .addPayment(.init(requestID: 3, key: unicode, productID: "com.example.game.premium.monthly",
                                               quantity: 10, applicationUsername: "player-42",
                                               hasRequestData: true, simulatesAskToBuy: true))),
        ("add-payment-negative-quantity", .addPayment(.init(requestID: 4, key: "", productID: "", quantity: .min,
                                                            applicationUsername: ""))),
        ("finish", .finish(requestID: 5, transactionID: 2_000_000_000_000_001)),
        ("restore", .restore(requestID: 6, applicationUsername: nil)),
        ("restore-username", .restore(requestID: 6, applicationUsername: "player-42")),
        ("products-none", .products(requestID: 7, identifiers: [])),
        ("products", .products(requestID: 7, identifiers: ["com.example.game.coins100", unicode, ""])),
        ("unfinished", .unfinished(requestID: 8)),
        ("control-list", .control(requestID: 9, command: "list", arguments: ["-o", "json"])),
        ("control-buy", .control(requestID: 9, command: "buy", arguments: ["--uid", "1000", "--app", "com.example.game",
                                                                         "com.example.game.coins100"])),
        ("ping", .ping(requestID: 10)),
        ("cancel-payment", .cancelPayment(requestID: 11, transactionID: 2_000_000_000_000_003)),
    ]

    static let minimalTransaction = TransactionRecord(
        id: 1, uid: 0, app: "", productID: "", quantity: 1, state: .purchasing, sequence: 0, date: 0)

    static let fullTransaction = TransactionRecord(
        id: 2_000_000_000_000_002, originalID: 2_000_000_000_000_001, uid: 1000, app: "com.example.game",
        productID: "com.example.game.premium.monthly", quantity: 1, state: .failed, sequence: 17,
        date: 1_700_000_000_000, finished: true, errorCode: 2, errorMessage: unicode, revocationDate: 1_700_000_100_000,
        revocationReason: 1, applicationUsername: "player-42", expiresDate: 1_702_592_000_000)

    static let product = ProductRecord(
        productID: "com.example.game.premium.monthly", kind: .autoRenewable, localizedTitle: "Premium",
        localizedDescription: unicode, priceCents: 499, displayPrice: "$4.99", currencyCode: "USD", locale: "en_US",
        subscriptionGroupID: "21482456", subscriptionPeriod: "P1M", familyShareable: true)

    static let minimalProduct = ProductRecord(
        productID: "", kind: .consumable, localizedTitle: "", localizedDescription: "", priceCents: 0,
        displayPrice: "", currencyCode: "", locale: "")

    static let serverMessages: [(String, ServerMessage)] = [
        ("welcome", .welcome(version: ProtocolVersion.current, uid: 1000, storefrontCountryCode: "USA", storefrontID: "143441")),
        ("result-ok", .result(requestID: 2, code: .ok, detail: 0, value: 2_000_000_000_000_001, message: "")),
        ("result-storekit", .result(requestID: 3, code: .storeKit, detail: 2, value: 0, message: unicode)),
        ("updated-empty", .updated([])),
        ("updated", .updated([minimalTransaction, fullTransaction])),
        ("updated-every-state", .updated(TransactionState.allCases.map { state in
            TransactionRecord(id: UInt64(state.rawValue) + 10, uid: 1000, app: "com.example.game",
                              productID: "com.example.game.coins100", quantity: 2, state: state,
                              sequence: UInt64(state.rawValue), date: 1_700_000_000_000)
        })),
        ("removed", .removed([fullTransaction])),
        ("products", .products(requestID: 7, products: [minimalProduct, product], invalidIdentifiers: ["nope", ""])),
        ("products-every-kind", .products(requestID: 7, products: ProductRecord.Kind.allCases.map { kind in
            ProductRecord(productID: "p.\(kind.name)", kind: kind, localizedTitle: "T", localizedDescription: "D",
                          priceCents: 99, displayPrice: "0.99", currencyCode: "USD", locale: "en_US")
        }, invalidIdentifiers: [])),
        ("transactions", .transactions(requestID: 8, transactions: [fullTransaction, minimalTransaction])),
        ("control-result", .controlResult(requestID: 9, code: .ok, message: "", json: #"[{"transactionIdentifier":"1"}]"#)),
        ("control-result-error", .controlResult(requestID: 9, code: .invalidArgument, message: "unknown command", json: "null")),
        ("storefront-changed", .storefrontChanged(countryCode: "FRA", identifier: "143442")),
        ("entitlements-revoked", .entitlementsRevoked(productIDs: ["com.example.game.level_pack", unicode])),
        ("promoted-purchase", .promotedPurchase(product)),
    ]

    static func main() {
        let directory = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "Fuzz/corpus"
        for (name, message) in clientMessages { write(message.encode(), to: "\(directory)/client-message/\(name)") }
        for (name, message) in serverMessages { write(message.encode(), to: "\(directory)/server-message/\(name)") }

        // frame-decoder seeds: 3 control bytes (limit, cut, repeats; see FuzzFrameDecoder.swift), then a stream.
        var session: [UInt8] = []
        for (_, message) in clientMessages { Frame.append(body: message.encode(), to: &session) }
        var shortSession: [UInt8] = []
        for index in [0, 3, 5, 8, 16] { Frame.append(body: clientMessages[index].1.encode(), to: &shortSession) }
        var partial = shortSession
        partial.append(contentsOf: Frame.encode(body: clientMessages[6].1.encode()).dropLast(5))
        let frames = "\(directory)/frame-decoder"
        write([0, 0, 0] + session, to: "\(frames)/session-one-append")
        write([0, 1, 0] + shortSession, to: "\(frames)/session-byte-by-byte")
        write([0, 7, 0] + session, to: "\(frames)/session-random-pieces")
        write([64, 9, 31] + shortSession, to: "\(frames)/session-repeated-small-limit")
        // 32 × 5 sessions ≈ 100 KiB in pieces of up to 512 bytes: past the decoder's 64 KiB compaction point.
        write([0, 9, 31] + Array([[UInt8]](repeating: session, count: 5).joined()), to: "\(frames)/session-past-compaction")
        write([0, 5, 0] + partial, to: "\(frames)/partial-last-frame")
        write([0, 0, 0, 0, 0, 0x10, 0] + [1], to: "\(frames)/frame-too-large")
        write([255, 3, 0] + Frame.encode(body: [UInt8](repeating: 0x41, count: 1021)), to: "\(frames)/frame-over-small-limit")
        write([0, 0, 0] + shortSession + [0, 0, 0, 0], to: "\(frames)/empty-frame")
        write([0, 0, 0] + Frame.encode(body: [200, 1, 2, 3]), to: "\(frames)/unknown-type")
    }

    static func write(_ bytes: [UInt8], to path: String) {
        // mkdir -p of the file's directory.
        var prefix = ""
        for component in path.split(separator: "/", omittingEmptySubsequences: false).dropLast() {
            prefix += prefix.isEmpty && component.isEmpty ? "/" : (prefix.isEmpty || prefix == "/" ? "" : "/") + component
            if !prefix.isEmpty { mkdir(prefix, 0o755) }
        }
        guard let file = fopen(path, "wb") else {
            print("cannot write \(path)")
            exit(1)
        }
        let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        fclose(file)
        guard written == bytes.count else {
            print("short write to \(path)")
            exit(1)
        }
    }
}
