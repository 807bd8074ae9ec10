import CCrypto
import FoundationEssentials
import StoreKitPosix
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's signing key and its three-level chain: a long-lived root (the trust anchor apps
/// and servers are given), an intermediate, and a leaf whose key signs JWS and receipts.
///
/// Kept in `DIR` (made 0700, each file 0600, never followed through a link), one file per level
/// holding its key and certificate, so that replacing the leaf is one rename:
/// `root.pem` (20 years), `intermediate.pem` (15 years), `leaf.pem` (2 years, replaced by
/// `storekitctl rotate-key` and automatically within 30 days of its end). Replacing the leaf
/// leaves every earlier signature verifiable: each JWS carries its own chain and verifiers check
/// it at the time it was signed.
public final class SigningIdentity: @unchecked Sendable {
    public let root: Certificate
    public let intermediate: Certificate
    public let leaf: Certificate
    let leafKey: SigningKey
    let intermediateKey: SigningKey
    /// The JWS header (`alg` and `x5c`), base64url, the same for every signature of this leaf.
    let encodedHeader: String

    static let rootDays = 20 * 365
    static let intermediateDays = 15 * 365
    static let leafDays = 2 * 365
    static let renewLeafWithinDays = 30

    init(root: Certificate, intermediate: Certificate, intermediateKey: SigningKey, leaf: Certificate, leafKey: SigningKey) {
        self.root = root
        self.intermediate = intermediate
        self.intermediateKey = intermediateKey
        self.leaf = leaf
        self.leafKey = leafKey
        let x5c = [leaf, intermediate, root].map { "\"" + Data($0.der).base64EncodedString() + "\"" }
        encodedHeader = Base64URL.encode(Array(("{\"alg\":\"ES256\",\"x5c\":[" + x5c.joined(separator: ",") + "]}").utf8))
    }

    /// Where the identity was loaded from, and whether anything was made.
    public enum Origin: Sendable, Equatable {
        case loaded, created, leafRenewed
    }

    /// Loads the identity in `directory`, making what is missing: a whole new chain on first
    /// start, a new leaf when the leaf is about to expire.
    public static func openOrCreate(directory: String) throws(SigningError) -> (SigningIdentity, Origin) {
        do {
            try PrivateDirectory.prepare(directory, mode: 0o700)
        } catch {
            throw SigningError("Refusing the key directory \(directory): \(error)")
        }
        let rootPath = directory + "/root.pem"
        if !FileSystem.exists(rootPath) {
            return (try create(in: directory), .created)
        }
        let (root, _) = try readPair(rootPath)
        let (intermediate, intermediateKey) = try readPair(directory + "/intermediate.pem")
        let (leaf, leafKey) = try readPair(directory + "/leaf.pem")
        let identity = SigningIdentity(root: root, intermediate: intermediate, intermediateKey: intermediateKey,
                                       leaf: leaf, leafKey: leafKey)
        if let problem = identity.chainProblem(at: Date()) {
            throw SigningError("The signing chain in \(directory) does not verify: \(problem)")
        }
        if leaf.notAfter.timeIntervalSinceNow < Double(renewLeafWithinDays) * 86_400 {
            return (try identity.rotatingLeaf(in: directory), .leafRenewed)
        }
        return (identity, .loaded)
    }

    /// A new leaf key and certificate under the same intermediate, written to `directory`.
    public func rotatingLeaf(in directory: String) throws(SigningError) -> SigningIdentity {
        let key = try SigningKey.generate()
        let certificate = try Certificate.issue(role: .leaf, commonName: "storekitd Signing", key: key,
                                                issuer: (intermediate, intermediateKey), validForDays: Self.leafDays)
        try Self.writePair(certificate, key, to: directory + "/leaf.pem")
        return SigningIdentity(root: root, intermediate: intermediate, intermediateKey: intermediateKey,
                               leaf: certificate, leafKey: key)
    }

    static func create(in directory: String) throws(SigningError) -> SigningIdentity {
        let rootKey = try SigningKey.generate()
        let root = try Certificate.issue(role: .root, commonName: "storekitd Root CA", key: rootKey, issuer: nil,
                                         validForDays: rootDays)
        let intermediateKey = try SigningKey.generate()
        let intermediate = try Certificate.issue(role: .intermediate, commonName: "storekitd Intermediate CA",
                                                 key: intermediateKey, issuer: (root, rootKey), validForDays: intermediateDays)
        let leafKey = try SigningKey.generate()
        let leaf = try Certificate.issue(role: .leaf, commonName: "storekitd Signing", key: leafKey,
                                         issuer: (intermediate, intermediateKey), validForDays: leafDays)
        // The leaf and intermediate first: a crash before the root is written leaves no root, and
        // the next start makes a whole new chain.
        try writePair(leaf, leafKey, to: directory + "/leaf.pem")
        try writePair(intermediate, intermediateKey, to: directory + "/intermediate.pem")
        try writePair(root, rootKey, to: directory + "/root.pem")
        return SigningIdentity(root: root, intermediate: intermediate, intermediateKey: intermediateKey,
                               leaf: leaf, leafKey: leafKey)
    }

    /// nil when the leaf chains to the root at `date` under strict rules, else why not.
    public func chainProblem(at date: Date) -> String? {
        SignedDataVerifier(roots: [root]).verifyChain(leaf: leaf, intermediate: intermediate, at: date)
    }

    /// Signs `payload` (a JSON object's bytes) as a compact JWS: ES256, `x5c` = leaf, intermediate, root.
    public func signJWS(payload: [UInt8]) throws(SigningError) -> String {
        let signingInput = encodedHeader + "." + Base64URL.encode(payload)
        let signature = try leafKey.signatureES256(over: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Writes the root certificate (PEM, mode 0644) to `path`, for apps and servers to trust.
    public func publishRoot(to path: String) throws(SigningError) {
        do {
            try FileSystem.writeAtomically(root.pem, to: path, permissions: 0o644)
        } catch {
            throw SigningError("Cannot write the root certificate to \(path): \(error)")
        }
    }

    static func readPair(_ path: String) throws(SigningError) -> (Certificate, SigningKey) {
        let bytes: [UInt8]
        do {
            bytes = try FileSystem.readContents(of: path)
        } catch {
            throw SigningError("Cannot read \(path): \(error)")
        }
        do {
            return (try Certificate(pem: bytes), try SigningKey(pem: bytes))
        } catch {
            throw SigningError("\(path): \(error)")
        }
    }

    static func writePair(_ certificate: Certificate, _ key: SigningKey, to path: String) throws(SigningError) {
        do {
            try FileSystem.writeAtomically(try key.privateKeyPEM() + certificate.pem, to: path, permissions: 0o600)
        } catch let error as SigningError {
            throw error
        } catch {
            throw SigningError("Cannot write \(path): \(error)")
        }
    }
}
