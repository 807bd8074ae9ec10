import Foundation
import StoreKitPosix
@testable import StoreKitSigning
import StoreKitTestSupport
import Testing

@Suite("Signing identity and JWS")
struct SignedDataTests {
    static func payload(_ date: Date = Date()) -> [UInt8] {
        Array(#"{"transactionId":"2000000000000001","bundleId":"com.example.game","signedDate":\#(Int64(date.timeIntervalSince1970 * 1000))}"#.utf8)
    }

    @Test("the first open makes a chain that OpenSSL's strict verification accepts; later opens load it")
    func chainIsMadeOnceAndVerifies() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let keys = directory.file("signing")
        let (identity, origin, _) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(origin == .created)
        #expect(identity.chainProblem(at: Date()) == nil)
        for file in ["root.pem", "intermediate.pem", "leaf.pem"] {
            let info = try FileSystem.status(of: keys + "/" + file)
            #expect(info.st_mode & 0o777 == 0o600, "\(file)")
        }
        #expect(try FileSystem.status(of: keys).st_mode & 0o777 == 0o700)
        let (again, originAgain, _) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(originAgain == .loaded)
        #expect(again.root.der == identity.root.der)
        #expect(again.leaf.der == identity.leaf.der)

        // Independent: openssl verify -x509_strict, and the marker extensions as openssl prints them.
        try Data(identity.root.pem).write(to: URL(fileURLWithPath: directory.file("root.pem")))
        try Data(identity.intermediate.pem).write(to: URL(fileURLWithPath: directory.file("intermediate.pem")))
        try Data(identity.leaf.pem).write(to: URL(fileURLWithPath: directory.file("leaf.pem")))
        let verify = try ProcessRunner.run("/usr/bin/openssl", [
            "verify", "-x509_strict", "-CAfile", directory.file("root.pem"),
            "-untrusted", directory.file("intermediate.pem"), directory.file("leaf.pem")])
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
        let text = try ProcessRunner.run("/usr/bin/openssl", ["x509", "-noout", "-text", "-in", directory.file("leaf.pem")])
        #expect(text.stdout.contains("1.2.840.113635.100.6.11.1"))
        #expect(text.stdout.contains("Digital Signature"))
        let intermediateText = try ProcessRunner.run("/usr/bin/openssl", ["x509", "-noout", "-text", "-in", directory.file("intermediate.pem")])
        #expect(intermediateText.stdout.contains("1.2.840.113635.100.6.2.1"))
        #expect(intermediateText.stdout.contains("CA:TRUE, pathlen:0"))
    }

    @Test("a JWS verifies with the root; one changed byte anywhere is reported with its reason")
    func tamperedJWSIsRefused() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let (identity, _, _) = try SigningIdentity.openOrCreate(directory: directory.file("signing"))
        let payload = Self.payload()
        let jws = try identity.signJWS(payload: payload)
        let verifier = SignedDataVerifier(roots: [identity.root])
        #expect(try verifier.verify(jws).get() == payload)

        // Every position of every part, one character changed: never trusted.
        let characters = Array(jws)
        var refused = 0
        for index in stride(from: 0, to: characters.count, by: max(1, characters.count / 300)) where characters[index] != "." {
            var changed = characters
            changed[index] = changed[index] == "A" ? "B" : "A"
            if case .failure = verifier.verify(String(changed)) { refused += 1 } else {
                Issue.record("a change at \(index) was trusted")
            }
        }
        #expect(refused > 100)

        // Another daemon's root does not anchor this chain.
        let other = TemporaryDirectory()
        defer { other.remove() }
        let (stranger, _, _) = try SigningIdentity.openOrCreate(directory: other.file("signing"))
        guard case .failure(let error) = SignedDataVerifier(roots: [stranger.root]).verify(jws) else {
            Issue.record("a foreign root was accepted")
            return
        }
        #expect(error.kind == .invalidCertificateChain)
        // Signed by the stranger's key with this chain in the header: the signature fails.
        let forgedSignature = try stranger.signJWS(payload: Self.payload()).split(separator: ".")[2]
        let parts = jws.split(separator: ".")
        let forged = "\(parts[0]).\(parts[1]).\(forgedSignature)"
        #expect(verifier.verify(forged).failureKind == .invalidSignature)
        #expect(verifier.verify("a.b").failureKind == .invalidEncoding)
        #expect(verifier.verify("\(parts[0]).\(parts[1])=.\(parts[2])").failureKind == .invalidEncoding)
    }

    @Test("a header or payload with malformed JSON anywhere in it, or a signedDate that is no number, is refused as such")
    func malformedJSONIsRefused() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let (identity, _, _) = try SigningIdentity.openOrCreate(directory: directory.file("signing"))
        let parts = try identity.signJWS(payload: Self.payload()).split(separator: ".").map(String.init)
        let verifier = SignedDataVerifier(roots: [identity.root])
        let header = String(decoding: try #require(Base64URL.decode(parts[0][...])), as: UTF8.self)
        func encoded(_ text: String) -> String { Base64URL.encode(Array(text.utf8)) }
        func withHeader(_ text: String) -> String { "\(encoded(text)).\(parts[1]).\(parts[2])" }
        func withPayload(_ text: String) -> String { "\(parts[0]).\(encoded(text)).\(parts[2])" }
        // The real header with one more member, malformed: refused as encoding, before the chain.
        for member in [#""kid":"\x""#, #""kid":"\uZZZZ""#, #""kid":01"#, #""kid":1."#, "\"kid\":\"a\u{01}b\""] {
            let text = String(header.dropLast()) + "," + member + "}"
            #expect(verifier.verify(withHeader(text)).failureKind == .invalidEncoding, "\(text)")
        }
        #expect(verifier.verify(withHeader("[1,2]")).failureKind == .invalidEncoding)
        #expect(verifier.verify(withHeader(header.replacingOccurrences(of: "\"x5c\":[", with: "\"x5c\":[1,")))
                    .failureKind == .invalidCertificateChain, "an x5c member that is no string")
        #expect(verifier.verify(withPayload(#"{"signedDate":true}"#)).failureKind == .invalidEncoding)
        #expect(verifier.verify(withPayload(#"{"signedDate":"1700000000000"}"#)).failureKind == .invalidEncoding)
        #expect(verifier.verify(withPayload(#"{"a":"\x","signedDate":1}"#)).failureKind == .invalidEncoding)
        #expect(verifier.verify(withPayload("\"text\"")).failureKind == .invalidEncoding)
        // Well-formed, and signed over another payload: only the signature fails.
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        #expect(verifier.verify(withPayload(#"{"signedDate":\#(now),"nested":{"a":[null,true,1.5e3]}}"#)).failureKind
                == .invalidSignature)
    }

    @Test("a rotated leaf signs from then on; what the old leaf signed still verifies")
    func rotationKeepsOldSignaturesVerifiable() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let keys = directory.file("signing")
        let (identity, _, _) = try SigningIdentity.openOrCreate(directory: keys)
        let before = try identity.signJWS(payload: Self.payload())
        let rotated = try identity.rotatingLeaf(in: keys)
        #expect(rotated.leaf.der != identity.leaf.der)
        #expect(rotated.root.der == identity.root.der)
        let (reloaded, origin, _) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(origin == .loaded)
        #expect(reloaded.leaf.der == rotated.leaf.der)
        let after = try reloaded.signJWS(payload: Self.payload())
        let verifier = SignedDataVerifier(roots: [identity.root])
        #expect(verifier.verify(before).failureKind == nil)
        #expect(verifier.verify(after).failureKind == nil)
    }

    @Test("a leaf that ends within 30 days is replaced at open, under the same root; what it signed still verifies")
    func leafNearItsEndIsRenewed() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let keys = directory.file("signing")
        let (identity, _, _) = try SigningIdentity.openOrCreate(directory: keys)
        let key = try SigningKey.generate()
        let ending = try Certificate.issue(role: .leaf, commonName: "storekitd Signing", key: key,
                                           issuer: (identity.intermediate, identity.intermediateKey), validForDays: 10)
        try SigningIdentity.writePair(ending, key, to: keys + "/leaf.pem")
        let short = SigningIdentity(root: identity.root, intermediate: identity.intermediate,
                                    intermediateKey: identity.intermediateKey, leaf: ending, leafKey: key,
                                    revocations: identity.revocations)
        let signedBefore = try short.signJWS(payload: Self.payload())

        let (renewed, origin, _) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(origin == .leafRenewed)
        #expect(renewed.leaf.der != ending.der)
        #expect(renewed.root.der == identity.root.der)
        #expect(renewed.leaf.notAfter.timeIntervalSinceNow > 365 * 86_400)
        let (again, originAgain, _) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(originAgain == .loaded, "the renewed leaf was kept")
        #expect(again.leaf.der == renewed.leaf.der)
        #expect(SignedDataVerifier(roots: [identity.root]).verify(signedBefore).failureKind == nil)
    }

    @Test("a damaged key file stops the open with the file's name instead of making a new chain")
    func damagedKeyFileIsRefused() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let keys = directory.file("signing")
        _ = try SigningIdentity.openOrCreate(directory: keys)
        try FileSystem.writeAtomically(Array("garbage".utf8), to: keys + "/leaf.pem", permissions: 0o600)
        #expect { try SigningIdentity.openOrCreate(directory: keys) } throws: { error in
            "\(error)".contains("leaf.pem")
        }
        try FileSystem.remove(keys + "/leaf.pem")
        try FileManager.default.createSymbolicLink(atPath: keys + "/leaf.pem", withDestinationPath: keys + "/root.pem")
        #expect { try SigningIdentity.openOrCreate(directory: keys) } throws: { error in
            "\(error)".contains("leaf.pem")
        }
    }

    @Test("PyJWT and openssl, given only the root, accept the JWS and refuse a changed one")
    func independentVerifierAgrees() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let (identity, _, _) = try SigningIdentity.openOrCreate(directory: directory.file("signing"))
        try identity.publishRoot(to: directory.file("root-certificate.pem"))
        let jws = try identity.signJWS(payload: Self.payload())
        let good = try IndependentVerifier.verifyJWS(jws, root: directory.file("root-certificate.pem"))
        #expect(good.status == 0, "\(good.stderr)")
        #expect(good.stdout.contains("\"bundleId\": \"com.example.game\""))
        var parts = jws.split(separator: ".").map(String.init)
        var payload = Array(parts[1])
        payload[10] = payload[10] == "A" ? "B" : "A"
        parts[1] = String(payload)
        let bad = try IndependentVerifier.verifyJWS(parts.joined(separator: "."), root: directory.file("root-certificate.pem"))
        #expect(bad.status != 0)
    }
}

extension Result where Failure == SignedDataVerificationError {
    var failureKind: SignedDataVerificationError.Kind? {
        if case .failure(let error) = self { return error.kind }
        return nil
    }

    var failureReason: String? {
        if case .failure(let error) = self { return error.reason }
        return nil
    }
}
