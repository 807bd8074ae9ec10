import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Family Sharing through the real daemon: root and uid 65534 (`nobody`) are one family in
/// storekitd.conf. What root buys of a family-shareable product reaches nobody's observer as a
/// transaction of its own, signed FAMILY_SHARED (checked by openssl and Apple's library) and
/// listed in nobody's receipt; a reload that ends the family, and a refund, take it back.
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root: the family's second member connects as uid 65534"))
struct FamilySharingIntegrationTests {
    static let nobody: UInt32 = 65534
    static let family = "[Family]\nMembers=root nobody\n"

    /// Pushes until `match` gives a value (nil after the receive timeout).
    static func push<T>(_ client: Client, _ match: (ServerMessage) -> T?) -> T? {
        while let message = try? client.nextPush() {
            if let value = match(message) { return value }
        }
        return nil
    }

    static func updated(_ message: ServerMessage) -> [TransactionRecord]? {
        if case .updated(let records) = message { return records }
        return nil
    }

    static func revoked(_ message: ServerMessage) -> [String]? {
        if case .entitlementsRevoked(let products) = message { return products }
        return nil
    }

    static func entitlements(_ daemon: DaemonProcess, uid: UInt32) throws -> [String] {
        let listed = try #require(try daemon.ctlJSON(["entitlements", "--uid", String(uid), Sample.app]) as? [[String: Any]])
        return listed.compactMap { $0["productIdentifier"] as? String }
    }

    static func reload(_ daemon: DaemonProcess, settings: String) throws {
        let conf = try String(contentsOfFile: daemon.configFile, encoding: .utf8)
        let base = conf.components(separatedBy: "\n[Family]").first ?? conf
        try (base + "\n" + settings).write(toFile: daemon.configFile, atomically: true, encoding: .utf8)
        kill(daemon.process!.processIdentifier, SIGHUP)
    }

    @Test("a purchase reaches the other member as FAMILY_SHARED, in its entitlements and receipt; leaving revokes it, joining again shares it, a refund revokes it")
    func purchaseSharedRevokedAndSharedAgain() throws {
        let daemon = try ProofOfPurchaseTests.daemon(environment: "Sandbox", settings: Self.family)
        defer { daemon.remove() }
        let status = try #require(try daemon.ctlJSON(["status"]) as? [String: Any])
        #expect(status["families"] as? [[String]] == [["root", "nobody"]])
        daemon.openDirectoriesToOtherUsers()

        let member = try Client(daemon, asUID: Self.nobody)
        member.connection.setReceiveTimeout(10)
        #expect(try member.subscribe().isEmpty)
        let buyer = try Client(daemon)
        _ = try buyer.subscribe()
        let purchase = try buyer.buy(Sample.levelPack)

        // The member's observer is told of a transaction of its own, restored from root's purchase.
        let copy = try #require(Self.push(member) { Self.updated($0)?.first }, "no update reached the member")
        #expect(copy.state == .restored && copy.originalID == purchase.id && copy.productID == Sample.levelPack)
        #expect(copy.uid == Self.nobody && copy.id != purchase.id)
        let jws = try #require(copy.jwsRepresentation, "the push is signed")
        let verified = try IndependentVerifier.verifyJWS(jws, root: daemon.directory.file("root.pem"))
        #expect(verified.status == 0, "\(verified.stderr)")
        let payload = try ProofOfPurchaseTests.payload(verified)
        #expect(payload[string: "inAppOwnershipType"] == "FAMILY_SHARED")
        #expect(payload[string: "originalTransactionId"] == String(purchase.id))
        #expect(try ProofOfPurchaseTests.payload(try IndependentVerifier.verifyJWS(
            try #require(purchase.jwsRepresentation), root: daemon.directory.file("root.pem")))[string: "inAppOwnershipType"] == "PURCHASED")
        if IndependentVerifier.appleLibraryPython != nil {
            let apple = try IndependentVerifier.verifyWithAppleLibrary(jws, rootDER: daemon.directory.file("root.der"),
                                                                       bundleID: Sample.app, kind: "transaction")
            #expect(apple.status == 0, "\(apple.stderr)")
            #expect(apple.stdout.contains("FAMILY_SHARED"), "\(apple.stdout)")
        }
        #expect(try Self.entitlements(daemon, uid: Self.nobody) == [Sample.levelPack])

        // The member's receipt lists its own transaction.
        let receiptID = member.makeRequestID()
        try member.connection.send(.receipt(requestID: receiptID))
        let receipt = try #require(Self.push(member) { message -> [UInt8]? in
            if case .receipt(let id, let data) = message, id == receiptID { return data }
            return nil
        })
        let file = daemon.directory.file("member-receipt")
        try Data(receipt).write(to: URL(fileURLWithPath: file))
        let opened = try ProcessRunner.run("/usr/bin/openssl", [
            "cms", "-verify", "-inform", "DER", "-in", file, "-CAfile", daemon.directory.file("root.pem"), "-out", file + ".payload"])
        #expect(opened.status == 0, "\(opened.stderr)")
        let receiptPayload = try Data(contentsOf: URL(fileURLWithPath: file + ".payload"))
        #expect(receiptPayload.range(of: Data(String(copy.id).utf8)) != nil, "the receipt lists the family copy")

        // The family ends (a reload): the member loses it, and is told.
        try Self.reload(daemon, settings: "")
        #expect(Self.push(member) { Self.revoked($0) } == [Sample.levelPack], "\(daemon.log(tail: 10))")
        #expect(try Self.entitlements(daemon, uid: Self.nobody).isEmpty)
        #expect(try Self.entitlements(daemon, uid: 0) == [Sample.levelPack], "the buyer keeps it")
        #expect(daemon.log().contains("Families applied (0 families): 0 purchases shared, 1 queues lost shared purchases"))

        // Together again: a new copy; then the buyer's refund takes it back.
        try Self.reload(daemon, settings: Self.family)
        let again = try #require(Self.push(member) { Self.updated($0)?.first }, "\(daemon.log(tail: 10))")
        #expect(again.originalID == purchase.id && again.id != copy.id && again.revocationDate == nil)
        #expect(try Self.entitlements(daemon, uid: Self.nobody) == [Sample.levelPack])
        let refusal = try daemon.ctl(["refund", String(again.id)])
        #expect(refusal.status != 0 && refusal.stderr.contains("Family Sharing"), "\(refusal.stderr)")
        _ = try daemon.ctlOK(["refund", String(purchase.id)])
        #expect(Self.push(member) { Self.revoked($0) } == [Sample.levelPack])
        #expect(try Self.entitlements(daemon, uid: Self.nobody).isEmpty)
    }

    @Test("families persist: a restart applies nothing again; a family changed while the daemon was down is applied at its start")
    func familiesAppliedAtStart() throws {
        let daemon = try ProofOfPurchaseTests.daemon(settings: Self.family)
        defer { daemon.remove() }
        let buyer = try Client(daemon)
        _ = try buyer.subscribe()
        let purchase = try buyer.buy(Sample.levelPack)
        buyer.close()
        #expect(try Self.entitlements(daemon, uid: Self.nobody) == [Sample.levelPack])
        #expect(daemon.stop() == 0)
        try daemon.start()
        #expect(try daemon.transactions(["--uid", String(Self.nobody)]).count == 1, "a restart shares nothing again")
        #expect(daemon.stop() == 0)
        let conf = try String(contentsOfFile: daemon.configFile, encoding: .utf8)
        try conf.replacingOccurrences(of: Self.family, with: "").write(toFile: daemon.configFile, atomically: true, encoding: .utf8)
        try daemon.start()
        #expect(eventually { (try? Self.entitlements(daemon, uid: Self.nobody))?.isEmpty == true }, "\(daemon.log(tail: 10))")
        let copies = try daemon.transactions(["--uid", String(Self.nobody)])
        #expect(copies.count == 1 && copies.first?.originalTransactionIdentifier == String(purchase.id))
    }
}
