import Foundation
import StoreKitConnection
import StoreKitLedger
import StoreKitSigning
import StoreKitTestSupport
import StoreKitWire
import Testing

// Receipts and signed transactions through the real daemon, checked by verifiers this project
// did not write: openssl, PyJWT with python3-cryptography, and Apple's App Store Server Library.

@Suite("Proof of purchase: JWS and receipts from the real daemon")
struct ProofOfPurchaseTests {
    /// A daemon whose app signs as `environment`, with its root certificate saved as PEM and DER.
    /// A daemon of the sample app signing for `environment`, `settings` added to its storekitd.conf,
    /// `prepare` run on its directory before it starts; its root certificate in root.pem and
    /// root.der of its directory.
    static func daemon(environment: String = "Xcode", settings: String = "",
                       prepare: (DaemonProcess) throws -> Void = { _ in }) throws -> DaemonProcess {
        let daemon = try DaemonProcess()
        let registration = daemon.directory.file("config/apps.d/com.example.game.conf")
        var text = try String(contentsOfFile: registration, encoding: .utf8)
        text = text.replacingOccurrences(of: "[App]\n", with: "[App]\nEnvironment=\(environment)\n")
        try text.write(toFile: registration, atomically: true, encoding: .utf8)
        if !settings.isEmpty {
            let conf = try String(contentsOfFile: daemon.configFile, encoding: .utf8)
            try (conf + "\n" + settings).write(toFile: daemon.configFile, atomically: true, encoding: .utf8)
        }
        try prepare(daemon)
        try daemon.start()
        try daemon.ctl(["certificate"]).stdout.write(toFile: daemon.directory.file("root.pem"), atomically: true, encoding: .utf8)
        _ = try ProcessRunner.run("/usr/bin/openssl", ["x509", "-in", daemon.directory.file("root.pem"), "-outform", "DER",
                                                       "-out", daemon.directory.file("root.der")])
        return daemon
    }

    /// A raw connection of this process's uid, subscribed (request 1 answered).
    static func observer(of daemon: DaemonProcess, timeout: Double = 10) throws -> WireConnection {
        let connection = try daemon.connect()
        connection.setReceiveTimeout(timeout)
        try connection.send(.subscribe(requestID: 1))
        while true { if case .result(1, _, _, _, _) = try connection.receive() { break } }
        return connection
    }

    static func payload(_ result: ProcessResult) throws -> JSONObject {
        try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? JSONObject)
    }

    static func changedByte(_ jws: String, part: Int) -> String {
        var parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var characters = Array(parts[part])
        let index = characters.count / 2
        characters[index] = characters[index] == "A" ? "B" : "A"
        parts[part] = String(characters)
        return parts.joined(separator: ".")
    }

    @Test("every product type, a renewal, a refund and an Ask to Buy approval are signed; openssl and PyJWT accept them with only the root and refuse any changed part")
    func everyKindVerifies() throws {
        let daemon = try Self.daemon()
        defer { daemon.remove() }
        for product in [Sample.coins, Sample.levelPack, Sample.monthly, Sample.seasonPass] {
            try daemon.ctlOK(["buy", Sample.app, product, "--uid", "1000"])
        }
        let renewal = try daemon.ctlObject(["renew", Sample.app, Sample.monthly, "--uid", "1000"])
        let refunded = try #require(try daemon.history(["--uid", "1000"]).first { $0[string: "productIdentifier"] == Sample.levelPack })
        try daemon.ctlOK(["refund", try #require(refunded[string: "transactionIdentifier"])])
        try daemon.ctlOK(["ask-to-buy", "on", "--uid", "1000"])
        let request = try daemon.ctlObject(["buy", Sample.app, Sample.yearly, "--uid", "1000"])
        #expect(request[string: "state"] == "deferred")
        #expect(request["jwsRepresentation"] == nil, "a deferred transaction is not signed")
        try daemon.ctlOK(["approve", try #require(request[string: "transactionIdentifier"])])

        let history = try daemon.history([Sample.app, "--uid", "1000"])
        var payloads: [String: JSONObject] = [:]
        for transaction in history where transaction[string: "state"] == "purchased" {
            let id = try #require(transaction[string: "transactionIdentifier"])
            let jws = try #require(transaction[string: "jwsRepresentation"], "transaction \(id) has no JWS")
            let verified = try IndependentVerifier.verifyJWS(jws, root: daemon.directory.file("root.pem"))
            #expect(verified.status == 0, "\(id): \(verified.stderr)")
            let payload = try Self.payload(verified)
            #expect(payload[string: "transactionId"] == id)
            #expect(payload[string: "bundleId"] == Sample.app)
            #expect(payload[string: "environment"] == "Xcode")
            payloads[id] = payload
            for part in 0..<3 {
                let refused = try IndependentVerifier.verifyJWS(Self.changedByte(jws, part: part), root: daemon.directory.file("root.pem"))
                #expect(refused.status != 0, "\(id): a change in part \(part) was accepted")
            }
        }
        let types = Set(payloads.values.compactMap { $0[string: "type"] })
        #expect(types == ["Consumable", "Non-Consumable", "Auto-Renewable Subscription", "Non-Renewing Subscription"])
        let renewalID = try #require(renewal[string: "transactionIdentifier"])
        let renewalPayload = try #require(payloads[renewalID])
        #expect(renewalPayload[string: "transactionReason"] == "RENEWAL")
        #expect(renewalPayload["expiresDate"] as? Int != nil)
        let refundedID = try #require(refunded[string: "transactionIdentifier"])
        let refundPayload = try #require(payloads[refundedID])
        #expect(refundPayload["revocationDate"] as? Int != nil)
        let requestID = try #require(request[string: "transactionIdentifier"])
        let approved = try #require(payloads[requestID])
        #expect(approved[string: "productId"] == Sample.yearly)
        #expect(approved[string: "transactionReason"] == "PURCHASE")

        // Renewal info is signed too.
        let subscription = try #require(try daemon.ctlArray(["subscriptions", Sample.app, "--uid", "1000"]).first)
        let renewalInfo = try #require(subscription[string: "signedRenewalInfo"])
        let info = try IndependentVerifier.verifyJWS(renewalInfo, root: daemon.directory.file("root.pem"))
        #expect(info.status == 0, "\(info.stderr)")
        #expect(try Self.payload(info)["autoRenewStatus"] as? Int == 1)
    }

    @Test("the snapshot after subscribe is unsigned; the unfinished reply and the pushes that follow carry every purchase's JWS")
    func snapshotUnsignedRepliesAndPushesSigned() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let buyer = try Client(daemon)
        let first = try buyer.addPayment(Sample.levelPack)
        #expect(first.code == .ok)
        let observer = try Client(daemon)
        let snapshot = try observer.subscribe()
        #expect(snapshot.map(\.id) == [first.value])
        #expect(snapshot.allSatisfy { $0.jwsRepresentation == nil }, "StoreKit 1's snapshot needs no JWS")
        #expect(try observer.unfinished().first?.jwsRepresentation != nil, "the queue read with `unfinished` is signed")
        let second = try buyer.addPayment(Sample.seasonPass).value
        var purchased: TransactionRecord?
        while purchased == nil {
            if case .updated(let records) = try observer.nextPush() { purchased = records.first { $0.id == second && $0.state == .purchased } }
        }
        #expect(purchased?.jwsRepresentation != nil, "pushes are signed")
    }

    @Test("a unit of work with many purchases is signed on the signer's thread: every push verifies with openssl and names its transaction")
    func pipelinedPurchasesAreSignedOffTheLoop() throws {
        let daemon = try Self.daemon()
        defer { daemon.remove() }
        let connection = try Self.observer(of: daemon)
        // Six payments in one write: one unit of work, six signatures (more than the loop makes itself).
        try HostileLimitsTests.pipeline(connection, { .addPayment(.init(requestID: $0, key: "pipelined-\($0)", productID: Sample.coins,
                                                                           quantity: 1)) }, count: 6)
        var signed: [UInt64: String] = [:]
        var answered = 0
        while signed.count < 6 || answered < 6 {
            switch try connection.receive() {
            case .updated(let records):
                for record in records where record.state == .purchased { signed[record.id] = record.jwsRepresentation ?? "" }
            case .result(let id, let code, _, _, _) where id >= 1000:
                #expect(code == .ok)
                answered += 1
            default:
                break
            }
        }
        for (id, jws) in signed {
            let verified = try IndependentVerifier.verifyJWS(jws, root: daemon.directory.file("root.pem"))
            #expect(verified.status == 0, "\(id): \(verified.stderr)")
            #expect(try Self.payload(verified)["transactionId"] as? String == String(id))
        }
    }

    @Test("rotate-key while the signer has jobs in flight: every purchase is pushed once, signed by the old or the new leaf, and every signature verifies; cached ones are the new leaf's")
    func rotationWhileSigning() throws {
        let daemon = try Self.daemon()
        defer { daemon.remove() }
        let perConnection = 150
        let connections = try (0..<4).map { _ in try Self.observer(of: daemon, timeout: 20) }
        // Every connection of the uid observes every purchase: the first one's pushes are counted.
        for (index, connection) in connections.enumerated() {
            try HostileLimitsTests.pipeline(connection, { .addPayment(.init(requestID: $0, key: "rotating-\(index)-\($0)",
                                                                               productID: Sample.coins, quantity: 1)) },
                                            count: perConnection)
        }
        let rotated = try daemon.ctlObject(["rotate-key"])
        #expect(rotated[string: "certificate"]?.contains("BEGIN CERTIFICATE") == true)
        var signed: [UInt64: String] = [:]
        var answered = 0
        while signed.count < 4 * perConnection || answered < perConnection {
            switch try connections[0].receive() {
            case .updated(let records):
                for record in records where record.state == .purchased {
                    #expect(signed[record.id] == nil, "transaction \(record.id) was pushed as purchased twice")
                    signed[record.id] = record.jwsRepresentation ?? ""
                }
            case .result(let id, let code, _, _, _) where id >= 1000:
                #expect(code == .ok)
                answered += 1
            default:
                break
            }
        }
        func leaf(_ jws: String) -> Substring {
            let header = Data(base64Encoded: Self.base64(String(jws.split(separator: ".")[0]))) ?? Data()
            let text = String(decoding: header, as: UTF8.self)
            return text.split(separator: "\"x5c\":[\"").dropFirst().first?.prefix { $0 != "\"" } ?? ""
        }
        let root = daemon.directory.file("root.pem")
        let ids = signed.keys.sorted()
        let verified = try IndependentVerifier.verifyJWSLines(ids.map { signed[$0] ?? "" }, root: root)
        #expect(verified.status == 0, "\(verified.stderr)")
        let payloads = verified.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? JSONObject
        }
        #expect(payloads.map { $0["transactionId"] as? String } == ids.map { String($0) })
        let leaves = Set(signed.values.map(leaf))
        #expect(!leaves.contains(""), "every push carries an x5c chain")
        #expect(leaves.count <= 2, "one leaf before the rotation, one after")
        // What the daemon sends again (the unfinished queue) is signed by the leaf in use now.
        let newLeaf = leaf(try #require(try daemon.ctlObject(["buy", Sample.app, Sample.levelPack])[string: "jwsRepresentation"]))
        var again: [UInt64: String] = [:]
        var after: UInt64 = 0
        for requestID in UInt32(2)...UInt32(100) {   // page by page
            try connections[0].send(.unfinished(requestID: requestID, afterID: after))
            var page: [TransactionRecord] = []
            while true { if case .transactions(requestID, let records) = try connections[0].receive() { page = records; break } }
            guard let last = page.last else { break }
            for record in page { again[record.id] = record.jwsRepresentation ?? "" }
            after = last.id
        }
        #expect(Set(again.keys).isSuperset(of: ids), "the queue holds every purchase")
        #expect(again.values.allSatisfy { leaf($0) == newLeaf }, "a signature made with the replaced leaf was cached")
    }

    @Test("a signature that fails, on the loop or on the signer's thread: the push goes out unsigned, the failure is in the journal, and nothing unsigned is cached")
    func failedSignatureLosesNothing() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        daemon.extraArguments = ["--enable-test-hooks"]
        try daemon.start()
        try daemon.ctl(["certificate"]).stdout.write(toFile: daemon.directory.file("root.pem"), atomically: true, encoding: .utf8)
        let hooks = try TestHooks(daemon)
        #expect(try hooks.run("debug-fail-signing", ["soon"]) == .invalidArgument)
        #expect(try hooks.run("debug-fail-signing", ["60000"]) == .ok)

        let connection = try Self.observer(of: daemon)
        // One purchase (signed on the loop), then six in one write (on the signer's thread).
        try HostileLimitsTests.pipeline(connection, { .addPayment(.init(requestID: $0, key: "alone-\($0)", productID: Sample.coins,
                                                                           quantity: 1)) }, count: 1)
        var pushed: [UInt64: String?] = [:]
        var answered = 0
        func receive(until purchases: Int, answers: Int) throws {
            while pushed.count < purchases || answered < answers {
                switch try connection.receive() {
                case .updated(let records):
                    for record in records where record.state == .purchased { pushed[record.id] = record.jwsRepresentation }
                case .result(let id, let code, _, _, _) where id >= 1000:
                    #expect(code == .ok, "the payment is acknowledged")
                    answered += 1
                default:
                    break
                }
            }
        }
        try receive(until: 1, answers: 1)
        try HostileLimitsTests.pipeline(connection, { .addPayment(.init(requestID: $0 + 100, key: "six-\($0)", productID: Sample.coins,
                                                                           quantity: 1)) }, count: 6)
        try receive(until: 7, answers: 7)
        #expect(pushed.values.allSatisfy { $0 == nil }, "a push whose signature failed carries none")
        #expect(eventually(timeout: 5) { pushed.keys.allSatisfy { daemon.log().contains("Failed to sign transaction \($0): signing fails on purpose") } },
                "\(daemon.log(tail: 20))")

        // Signing works again: the same transactions, asked for, are signed, and verify.
        #expect(try hooks.run("debug-fail-signing", ["0"]) == .ok)
        try connection.send(.unfinished(requestID: 2))
        var again: [TransactionRecord] = []
        while true { if case .transactions(2, let records) = try connection.receive() { again = records; break } }
        #expect(Set(again.map(\.id)) == Set(pushed.keys))
        let tokens = again.compactMap(\.jwsRepresentation)
        #expect(tokens.count == pushed.count, "every transaction is signed now")
        let verified = try IndependentVerifier.verifyJWSLines(tokens, root: daemon.directory.file("root.pem"))
        #expect(verified.status == 0, "\(verified.stderr)")
    }

    @Test("Apple's App Store Server Library, given storekitd's root in place of Apple's, verifies Sandbox transactions and renewal info and refuses changed ones",
          .enabled(if: IndependentVerifier.appleLibraryPython != nil, "Apple's app-store-server-library could not be installed from PyPI (make test-deps)"))
    func appleLibraryAccepts() throws {
        let daemon = try Self.daemon(environment: "Sandbox")
        defer { daemon.remove() }
        let bought = try daemon.ctlObject(["buy", Sample.app, Sample.monthly, "--uid", "1000"])
        let jws = try #require(bought[string: "jwsRepresentation"])
        let root = daemon.directory.file("root.der")
        let verified = try IndependentVerifier.verifyWithAppleLibrary(jws, rootDER: root, bundleID: Sample.app, kind: "transaction")
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(verified.stdout.contains("environment=<Environment.SANDBOX"))
        #expect(verified.stdout.contains("type=<Type.AUTO_RENEWABLE_SUBSCRIPTION"))
        for part in 0..<3 {
            let refused = try IndependentVerifier.verifyWithAppleLibrary(Self.changedByte(jws, part: part), rootDER: root,
                                                                         bundleID: Sample.app, kind: "transaction")
            #expect(refused.status != 0, "a change in part \(part) was accepted")
        }
        let wrongApp = try IndependentVerifier.verifyWithAppleLibrary(jws, rootDER: root, bundleID: "com.example.other", kind: "transaction")
        #expect(wrongApp.status != 0 && wrongApp.stderr.contains("INVALID_APP_IDENTIFIER"), "\(wrongApp.stderr)")
        let subscription = try #require(try daemon.ctlArray(["subscriptions", Sample.app, "--uid", "1000"]).first)
        let info = try IndependentVerifier.verifyWithAppleLibrary(try #require(subscription[string: "signedRenewalInfo"]),
                                                                  rootDER: root, bundleID: Sample.app, kind: "renewal")
        #expect(info.status == 0, "\(info.stderr)")
    }

    @Test("history pages: each read from its afterID on, within the page budget, together the whole history once, signed")
    func historyPages() throws {
        let daemon = try Self.daemon()
        defer { daemon.remove() }
        let client = try Client(daemon)
        _ = try client.subscribe()
        var bought: [UInt64] = []
        for _ in 0..<400 {
            let record = try client.buy(Sample.coins)
            bought.append(record.id)
            #expect(try client.finish(record.id).code == .ok)
        }
        func page(after: UInt64) throws -> [TransactionRecord] {
            let id = client.makeRequestID()
            try client.connection.send(.history(requestID: id, afterID: after))
            while true {
                if case .transactions(let requestID, let records) = try client.connection.receive(), requestID == id { return records }
            }
        }
        var seen: [UInt64] = []
        var pages = 0
        var after: UInt64 = 0
        while true {
            let records = try page(after: after)
            guard let last = records.last else { break }
            pages += 1
            #expect(records.map(\.id) == records.map(\.id).sorted() && records.first!.id > after)
            #expect(records.reduce(0) { $0 + $1.encodedSize } <= ServerMessage.pageBudget + records.last!.encodedSize)
            #expect(records.allSatisfy { $0.jwsRepresentation != nil })
            seen += records.map(\.id)
            after = last.id
        }
        #expect(seen == bought, "the pages hold \(seen.count) of \(bought.count), in order, once")
        #expect(pages >= 3, "400 signed transactions fit in \(pages) pages")
        // From the middle: the page starts right after the id asked for.
        let middle = bought[250]
        #expect(try page(after: middle).first?.id == bought[251])
        #expect(try page(after: UInt64.max).isEmpty)
    }

    @Test("a receipt is kept per queue until the queue changes: the same bytes again; a purchase, a refund, a finish, a new key or clear make a new one; what it lists follows the queue as a receipt read whole lists it")
    func receiptKeptUntilTheQueueChanges() throws {
        let daemon = try Self.daemon()
        defer { daemon.remove() }
        let client = try Client(daemon)
        _ = try client.subscribe()
        func receipt() throws -> [UInt8] {
            let id = client.makeRequestID()
            try client.connection.send(.receipt(requestID: id))
            while true {
                switch try client.connection.receive() {
                case .receipt(let requestID, let data) where requestID == id: return data
                case .result(let requestID, let code, _, _, let message) where requestID == id:
                    throw IntegrationFailure("receipt refused: \(code.name) \(message)")
                default: continue
                }
            }
        }
        /// The receipt's payload, verified against the root with openssl.
        func payload(_ receipt: [UInt8]) throws -> Data {
            let file = daemon.directory.file("kept-receipt")
            try Data(receipt).write(to: URL(fileURLWithPath: file))
            let verified = try ProcessRunner.run("/usr/bin/openssl", [
                "cms", "-verify", "-inform", "DER", "-in", file, "-CAfile", daemon.directory.file("root.pem"),
                "-out", daemon.directory.file("kept-payload")])
            #expect(verified.status == 0, "\(verified.stderr)")
            return try Data(contentsOf: URL(fileURLWithPath: daemon.directory.file("kept-payload")))
        }
        func lists(_ payload: Data, _ id: UInt64) -> Bool { payload.range(of: Data(String(id).utf8)) != nil }
        /// In-app purchase attributes (type 17) in a verified payload.
        func inAppCount(_ payload: Data) throws -> Int {
            let file = daemon.directory.file("kept-payload-parsed")
            try payload.write(to: URL(fileURLWithPath: file))
            let parsed = try ProcessRunner.run("/usr/bin/openssl", ["asn1parse", "-inform", "DER", "-in", file])
            return parsed.lines.filter { $0.contains("prim: INTEGER") && $0.hasSuffix(":11") }.count
        }

        let pack = try client.buy(Sample.levelPack)
        let first = try receipt()
        #expect(try receipt() == first, "made again although nothing changed")
        #expect(try receipt() == first)
        #expect(lists(try payload(first), pack.id))

        let coins = try client.buy(Sample.coins)
        let afterPurchase = try receipt()
        #expect(afterPurchase != first)
        #expect(lists(try payload(afterPurchase), coins.id))
        #expect(try receipt() == afterPurchase)

        _ = try daemon.ctlOK(["refund", String(pack.id)])
        let afterRefund = try receipt()
        #expect(afterRefund != afterPurchase, "a refund (its cancellation date) makes a new receipt")

        // Each receipt from here is the last one's list moved on by what changed since.
        #expect(try client.finish(coins.id).code == .ok)
        let afterFinish = try payload(try receipt())
        #expect(!lists(afterFinish, coins.id), "a finished consumable is not listed (as Apple's receipt)")
        #expect(lists(afterFinish, pack.id))
        let moreCoins = try client.buy(Sample.coins)
        let followed = try payload(try receipt())
        #expect(lists(followed, moreCoins.id) && lists(followed, pack.id) && !lists(followed, coins.id))
        #expect(try inAppCount(followed) == 2)

        // A new key drops every kept receipt: this one is read whole, and lists the same.
        _ = try daemon.ctlOK(["rotate-key"])
        let afterRotation = try receipt()
        #expect(afterRotation != afterRefund, "a new key signs a new receipt")
        let whole = try payload(afterRotation)
        #expect(lists(whole, moreCoins.id) && lists(whole, pack.id) && !lists(whole, coins.id))
        #expect(try inAppCount(whole) == 2)

        _ = try daemon.ctlOK(["clear", Sample.app])
        let afterClear = try payload(try receipt())
        #expect(!lists(afterClear, moreCoins.id) && !lists(afterClear, pack.id), "cleared purchases are still listed")
    }

    @Test("the receipt verifies with openssl cms against the root alone, lists the purchases in Apple's ASN.1 form, and a changed byte fails")
    func receiptVerifiesWithOpenSSL() throws {
        let daemon = try Self.daemon(environment: "Sandbox")
        defer { daemon.remove() }
        let consumable = try daemon.ctlObject(["buy", Sample.app, Sample.coins, "--uid", "1000"])
        try daemon.ctlOK(["buy", Sample.app, Sample.levelPack, "--uid", "1000"])
        let printed = try daemon.ctl(["receipt", Sample.app, "--uid", "1000"])
        #expect(printed.status == 0, "\(printed.stderr)")
        let receipt = try #require(Data(base64Encoded: printed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        let file = daemon.directory.file("receipt")
        try receipt.write(to: URL(fileURLWithPath: file))
        let verified = try ProcessRunner.run("/usr/bin/openssl", [
            "cms", "-verify", "-inform", "DER", "-in", file, "-CAfile", daemon.directory.file("root.pem"),
            "-out", daemon.directory.file("payload")])
        #expect(verified.status == 0, "\(verified.stderr)")
        let parsed = try ProcessRunner.run("/usr/bin/openssl", ["asn1parse", "-inform", "DER", "-in", daemon.directory.file("payload")])
        // The bundle id (type 2) as a DER UTF8String inside the OCTET STRING, both purchases, the receipt type.
        let text = parsed.stdout
        #expect(text.contains("0C10636F6D2E6578616D706C652E67616D65"), "bundle id")
        #expect(text.contains("0C1150726F64756374696F6E53616E64626F78"), "receipt type ProductionSandbox")
        let inApp = parsed.lines.filter { $0.contains("prim: INTEGER") && $0.hasSuffix(":11") }
        #expect(inApp.count == 2, "one in-app purchase attribute (type 17) per purchase")
        // The unfinished consumable is listed, by its transaction id (a UTF8String in the payload openssl extracted).
        let id = try #require(consumable[string: "transactionIdentifier"])
        let payload = try [UInt8](Data(contentsOf: URL(fileURLWithPath: daemon.directory.file("payload"))))
        let needle = [0x0C, UInt8(id.utf8.count)] + Array(id.utf8)
        #expect((0...(payload.count - needle.count)).contains { Array(payload[$0..<($0 + needle.count)]) == needle })

        var tampered = [UInt8](receipt)
        tampered[tampered.count / 3] ^= 0x20
        try Data(tampered).write(to: URL(fileURLWithPath: file))
        let refused = try ProcessRunner.run("/usr/bin/openssl", [
            "cms", "-verify", "-inform", "DER", "-in", file, "-CAfile", daemon.directory.file("root.pem"), "-out", "/dev/null"])
        #expect(refused.status != 0)
    }

    @Test("rotate-key: new signatures come from a new leaf under the same root; earlier ones still verify, also after a restart")
    func rotation() throws {
        let daemon = try Self.daemon()
        defer { daemon.remove() }
        let before = try #require(try daemon.ctlObject(["buy", Sample.app, Sample.levelPack])[string: "jwsRepresentation"])
        let rotated = try daemon.ctlObject(["rotate-key"])
        #expect(rotated[string: "certificate"]?.contains("BEGIN CERTIFICATE") == true)
        #expect(daemon.log().contains("Replaced the signing certificate"))
        let after = try #require(try daemon.ctlObject(["buy", Sample.app, Sample.seasonPass])[string: "jwsRepresentation"])
        let root = daemon.directory.file("root.pem")
        #expect(try IndependentVerifier.verifyJWS(before, root: root).status == 0)
        #expect(try IndependentVerifier.verifyJWS(after, root: root).status == 0)
        func leaf(_ jws: String) throws -> String {
            let header = try #require(Data(base64Encoded: Self.base64(String(jws.split(separator: ".")[0]))))
            let object = try #require(try JSONSerialization.jsonObject(with: header) as? JSONObject)
            return try #require((object["x5c"] as? [String])?.first)
        }
        #expect(try leaf(before) != leaf(after))
        _ = daemon.stop()
        try daemon.start()
        let rootText = try String(contentsOfFile: root, encoding: .utf8)
        let printedRoot = try daemon.ctl(["certificate"]).stdout
        #expect(printedRoot == rootText, "the root survives")
        let afterRestart = try #require(try daemon.ctlObject(["buy", Sample.app, Sample.coins])[string: "jwsRepresentation"])
        #expect(try leaf(afterRestart) == leaf(after), "the rotated leaf is the one kept")
        #expect(try IndependentVerifier.verifyJWS(before, root: root).status == 0)
    }

    @Test("rotate-key --chain: a new root is published and printed; new signatures verify only under it; it survives a restart")
    func chainRotation() throws {
        let daemon = try Self.daemon()
        defer { daemon.remove() }
        let oldRoot = daemon.directory.file("root.pem")
        let before = try #require(try daemon.ctlObject(["buy", Sample.app, Sample.levelPack])[string: "jwsRepresentation"])
        let rotated = try daemon.ctlObject(["rotate-key", "--chain"])
        let newRootText = try #require(rotated[string: "root"])
        #expect(try String(contentsOfFile: oldRoot, encoding: .utf8) != newRootText)
        #expect(try String(contentsOfFile: daemon.stateDirectory + "/root-certificate.pem", encoding: .utf8) == newRootText,
                "published where the old root was")
        #expect(try daemon.ctl(["certificate"]).stdout == newRootText)
        #expect(daemon.log().contains("Replaced the whole signing chain"))
        let table = try daemon.ctl(["rotate-key", "--chain"])
        #expect(table.status == 0 && table.stdout.contains("New root certificate"), "\(table.stderr)")
        let newRoot = daemon.directory.file("new-root.pem")
        try daemon.ctl(["certificate"]).stdout.write(toFile: newRoot, atomically: true, encoding: .utf8)
        let after = try #require(try daemon.ctlObject(["buy", Sample.app, Sample.seasonPass])[string: "jwsRepresentation"])
        #expect(try IndependentVerifier.verifyJWS(after, root: newRoot).status == 0)
        #expect(try IndependentVerifier.verifyJWS(after, root: oldRoot).status != 0, "the old root no longer vouches")
        #expect(try IndependentVerifier.verifyJWS(before, root: newRoot).status != 0)
        _ = daemon.stop()
        try daemon.start()
        #expect(try daemon.ctl(["certificate"]).stdout == String(contentsOfFile: newRoot, encoding: .utf8), "the new chain is kept")
        #expect(!FileManager.default.fileExists(atPath: daemon.stateDirectory + "/signing.next"))
    }

    @Test("rotate-key --revoke: the old leaf is on the intermediate's list, published beside both roots; openssl refuses it and accepts the new one; kept across a restart")
    func revocation() throws {
        let daemon = try Self.daemon()
        defer { daemon.remove() }
        let before = try #require(try daemon.ctlObject(["buy", Sample.app, Sample.levelPack])[string: "jwsRepresentation"])
        let published = [daemon.stateDirectory, daemon.runtimeDirectory].map { $0 + "/revoked-certificates.pem" }
        for path in published {
            let list = try ProcessRunner.run("/usr/bin/openssl", ["crl", "-in", path, "-noout", "-text"])
            #expect(list.status == 0 && list.stdout.contains("No Revoked Certificates"), "\(path): \(list.stdout) \(list.stderr)")
        }
        let rotated = try daemon.ctlObject(["rotate-key", "--revoke"])
        let serial = try #require(rotated[string: "revoked"])
        #expect(daemon.log().contains("Replaced and revoked the signing certificate"))
        #expect(daemon.log().contains(serial))
        let after = try #require(try daemon.ctlObject(["buy", Sample.app, Sample.seasonPass])[string: "jwsRepresentation"])

        // Independent: the leaves out of the two JWS, checked by openssl against the published list.
        func leafFile(_ jws: String, _ name: String) throws -> String {
            let header = try #require(Data(base64Encoded: Self.base64(String(jws.split(separator: ".")[0]))))
            let object = try #require(try JSONSerialization.jsonObject(with: header) as? JSONObject)
            let x5c = try #require(object["x5c"] as? [String])
            let path = daemon.directory.file(name)
            func pem(_ base64: String) -> String {
                var lines: [String] = []
                var rest = Substring(base64)
                while !rest.isEmpty { lines.append(String(rest.prefix(64))); rest = rest.dropFirst(64) }
                return "-----BEGIN CERTIFICATE-----\n" + lines.joined(separator: "\n") + "\n-----END CERTIFICATE-----\n"
            }
            try pem(x5c[0]).write(toFile: path, atomically: true, encoding: .utf8)
            try pem(x5c[1]).write(toFile: path + ".intermediate", atomically: true, encoding: .utf8)
            return path
        }
        for path in published {
            func verify(_ leaf: String) throws -> ProcessResult {
                try ProcessRunner.run("/usr/bin/openssl", [
                    "verify", "-x509_strict", "-crl_check", "-CRLfile", path, "-CAfile", daemon.directory.file("root.pem"),
                    "-untrusted", leaf + ".intermediate", leaf])
            }
            let old = try verify(try leafFile(before, "old-leaf.pem"))
            #expect(old.status != 0 && (old.stdout + old.stderr).contains("certificate revoked"), "\(old.stdout) \(old.stderr)")
            let new = try verify(try leafFile(after, "new-leaf.pem"))
            #expect(new.status == 0, "\(new.stdout) \(new.stderr)")
            let text = try ProcessRunner.run("/usr/bin/openssl", ["crl", "-in", path, "-noout", "-text"])
            #expect(text.stdout.contains("Serial Number: " + serial), "\(text.stdout)")
        }
        // The library's own reading of the published list refuses the old JWS as revoked.
        let root = try Certificate(pem: Array(try Data(contentsOf: URL(fileURLWithPath: daemon.directory.file("root.pem")))))
        let list = try #require(try RootCertificateLocation.revocations(besideRoot: daemon.runtimeDirectory + "/root-certificate.pem"))
        let verifier = SignedDataVerifier(roots: [root], revocationLists: [list])
        guard case .failure(let error) = verifier.verify(before) else {
            Issue.record("the revoked leaf's JWS verified")
            return
        }
        #expect(error.kind == .revokedCertificate)
        #expect((try? verifier.verify(after).get()) != nil)

        // Kept across a restart, republished; both flags at once are refused, by storekitctl and by the daemon.
        try FileManager.default.removeItem(atPath: published[1])
        _ = daemon.stop()
        try daemon.start()
        for path in published {
            let text = try ProcessRunner.run("/usr/bin/openssl", ["crl", "-in", path, "-noout", "-text"])
            #expect(text.stdout.contains("Serial Number: " + serial), "\(path): \(text.stdout) \(text.stderr)")
        }
        let both = try daemon.ctl(["rotate-key", "--revoke", "--chain"])
        #expect(both.status != 0 && both.stderr.contains("do not go together"), "\(both.stderr)")
        let control = try WireConnection(path: daemon.controlSocket)
        defer { control.close() }
        _ = try control.hello(app: "")
        try control.send(.control(requestID: 7, command: "rotate-key", arguments: ["revoke=1", "chain=1"]))
        var code: ResultCode?
        var text = ""
        while code == nil, let message = try? control.receive() {
            if case .controlResult(7, let answer, let words, _) = message {
                code = answer
                text = words
            }
        }
        #expect(code == .malformedRequest && text.contains("do not go together"), "\(text)")
    }

    @Test("rotate-key --revoke while a unit's six signatures wait on a signer's thread: they are made again with the new leaf, and no push carries the revoked one")
    func revocationWhileSigning() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        daemon.extraArguments = ["--enable-test-hooks"]
        try daemon.start()
        let hooks = try TestHooks(daemon)
        #expect(try hooks.run("debug-slow-signing", ["1000"]) == .ok)
        let connection = try Self.observer(of: daemon, timeout: 20)
        var bytes: [UInt8] = []
        for index in 0..<6 {
            let payment = ClientMessage.addPayment(.init(requestID: UInt32(1000 + index), key: "revoking-\(index)",
                                                         productID: Sample.coins, quantity: 1))
            Frame.append(body: payment.encode(), to: &bytes)
        }
        try connection.sendRaw(bytes)
        try #require(eventually { daemon.log().contains("(6 signatures) waits 1000 ms first") },
                     "the six purchases did not reach the signer's thread:\n\(daemon.log(tail: 20))")
        let rotated = try daemon.ctlObject(["rotate-key", "--revoke"])
        #expect(rotated[string: "revoked"] != nil)
        var signed: [UInt64: String] = [:]
        while signed.count < 6 {
            if case .updated(let records) = try connection.receive() {
                for record in records where record.state == .purchased { signed[record.id] = record.jwsRepresentation ?? "" }
            }
        }
        let published = daemon.stateDirectory + "/root-certificate.pem"
        let root = try Certificate(pem: Array(try Data(contentsOf: URL(fileURLWithPath: published))))
        let list = try #require(try RootCertificateLocation.revocations(besideRoot: published))
        #expect(list.entries.count == 1)
        let verifier = SignedDataVerifier(roots: [root], revocationLists: [list])
        for (id, jws) in signed {
            if case .failure(let error) = verifier.verify(jws) {
                Issue.record("transaction \(id): \(error)")
            }
        }
    }

    @Test("rotate-key --revoke while a history page of kept JWS waits on a signer's thread: the page arrives with every JWS made again by the new leaf")
    func revocationWhileAPageIsEncoded() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        daemon.extraArguments = ["--enable-test-hooks"]
        try daemon.start()
        let connection = try Self.observer(of: daemon, timeout: 20)
        // Ten non-consumables bought one by one: each signed and kept (the cache) by the old leaf.
        var bought = 0
        for index in 0..<10 {
            try connection.send(.addPayment(.init(requestID: UInt32(100 + index), key: "page-\(index)",
                                                  productID: index % 2 == 0 ? Sample.levelPack : Sample.seasonPass, quantity: 1)))
            while true {
                if case .result(let id, .ok, _, _, _) = try connection.receive(), id == UInt32(100 + index) { bought += 1; break }
            }
        }
        #expect(bought == 10)
        let hooks = try TestHooks(daemon)
        #expect(try hooks.run("debug-slow-signing", ["1000"]) == .ok)
        // A page of more than 8 records whose JWS are all kept is encoded on a signer's thread.
        try connection.send(.history(requestID: 500, afterID: 0))
        try #require(eventually { daemon.log().contains("waits 1000 ms first") },
                     "the page did not reach the signer's thread:\n\(daemon.log(tail: 20))")
        _ = try daemon.ctlObject(["rotate-key", "--revoke"])
        var page: [TransactionRecord] = []
        while true { if case .transactions(500, let records) = try connection.receive() { page = records; break } }
        #expect(page.count >= 10)
        let published = daemon.stateDirectory + "/root-certificate.pem"
        let root = try Certificate(pem: Array(try Data(contentsOf: URL(fileURLWithPath: published))))
        let list = try #require(try RootCertificateLocation.revocations(besideRoot: published))
        let verifier = SignedDataVerifier(roots: [root], revocationLists: [list])
        for record in page where record.state == .purchased {
            if case .failure(let error) = verifier.verify(record.jwsRepresentation ?? "") {
                Issue.record("transaction \(record.id): \(error)")
            }
        }
    }

    static func base64(_ base64url: String) -> String {
        var text = base64url.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        return text
    }

    @Test("SKReceiptRefreshRequest writes the receipt (0600, in a 0700 directory) and the delegate hears it finished; it lists what was bought")
    func receiptRefresh() throws {
        let daemon = try Self.daemon()
        defer { daemon.remove() }
        let bought = try daemon.ctlObject(["buy", Sample.app, Sample.levelPack])
        let file = daemon.dataHome + "/storekit/\(Sample.app)/receipt"
        #expect(!FileManager.default.fileExists(atPath: file))
        let refreshed = try daemon.app(["refresh-receipt"], timeout: appTimeout)
        #expect(refreshed.status == 0, "\(refreshed.stdout) \(refreshed.stderr)")
        let receipt = try #require(events(refreshed.stdout).first { $0["event"] as? String == "receipt" })
        #expect(receipt["valid"] as? Bool == true)
        #expect((receipt["transactions"] as? [String]) == [try #require(bought[string: "transactionIdentifier"])])
        #expect((try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int) == 0o600)
        #expect((try FileManager.default.attributesOfItem(atPath: daemon.dataHome + "/storekit/\(Sample.app)")[.posixPermissions] as? Int) == 0o700)
    }

    @Test("the example app validates the receipt before it grants and finishes; with a root that did not sign it, it grants nothing and leaves the transaction in the queue")
    func exampleAppValidatesReceipt() throws {
        let daemon = try Self.daemon()
        defer { daemon.remove() }
        let bought = try daemon.app(["buy", Sample.levelPack], timeout: appTimeout)
        #expect(bought.status == 0, "\(bought.stdout) \(bought.stderr)")
        #expect(bought.stdout.contains("\"granted\":true"), "\(bought.stdout)")
        let receiptFile = daemon.dataHome + "/storekit/\(Sample.app)/receipt"
        let info = try FileManager.default.attributesOfItem(atPath: receiptFile)
        #expect((info[.posixPermissions] as? Int) == 0o600)

        // Another daemon's root: the receipt the app is given is not signed by what it trusts.
        let stranger = try Self.daemon()
        defer { stranger.remove() }
        let forgedTrust = ["STOREKIT_ROOT_CERTIFICATE": stranger.directory.file("root.pem")]
        let refused = try ProcessRunner.run(Paths.binary("storekit-example-app"),
                                            ["--ledger", daemon.directory.file("ledger-forged"), "buy", Sample.seasonPass],
                                            environment: daemon.clientEnvironment.merging(forgedTrust) { $1 }, timeout: appTimeout)
        #expect(refused.status == 2, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stdout.contains("\"event\":\"refused\""), "\(refused.stdout)")
        #expect(refused.stdout.contains("does not verify"), "\(refused.stdout)")
        #expect(!refused.stdout.contains("\"granted\":true"))
        let unfinished = try daemon.ctlArray(["transactions", "--unfinished"])
        #expect(unfinished.contains { $0[string: "productIdentifier"] == Sample.seasonPass }, "not finished: it comes back")

        // A receipt file replaced by another daemon's (the app trusts the right root): refused too.
        let foreign = try stranger.ctl(["receipt", Sample.app])
        let foreignBytes = try #require(Data(base64Encoded: foreign.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        try foreignBytes.write(to: URL(fileURLWithPath: daemon.directory.file("foreign-receipt")))
        let check = try ProcessRunner.run(Paths.binary("storekit-example-app"),
                                          ["--ledger", daemon.directory.file("ledger-check"), "validate-receipt",
                                           daemon.directory.file("foreign-receipt")],
                                          environment: daemon.clientEnvironment, timeout: appTimeout)
        #expect(check.status != 0 && check.stdout.contains("does not verify"), "\(check.stdout) \(check.stderr)")
        let good = try ProcessRunner.run(Paths.binary("storekit-example-app"),
                                         ["--ledger", daemon.directory.file("ledger-check"), "validate-receipt", receiptFile],
                                         environment: daemon.clientEnvironment, timeout: appTimeout)
        #expect(good.status == 0, "\(good.stdout) \(good.stderr)")
    }
}
