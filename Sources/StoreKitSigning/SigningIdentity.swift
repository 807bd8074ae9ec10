import CCrypto
import FoundationEssentials
import StoreKitPosix
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's signing key and its three-level chain: a long-lived root (the trust anchor apps
/// and servers are given), an intermediate, and a leaf whose key signs JWS and receipts.
///
/// Kept in `DIR` (0700, each file 0600, owned by the daemon's uid, never followed through a link:
/// checked at every start, see `secureFiles`), one file per level
/// holding its key and certificate, so that replacing the leaf is one rename:
/// `root.pem` (20 years), `intermediate.pem` (15 years), `leaf.pem` (2 years, replaced by
/// `storekitctl rotate-key` and automatically within 30 days of its end), and `revoked.pem`, the
/// intermediate's list of revoked leaves (`RevocationList`, published beside the root).
/// Replacing the leaf leaves every earlier signature verifiable: each JWS carries its own chain
/// and verifiers check it at the time it was signed; replacing it with `--revoke` adds the old
/// leaf to the list, and nothing it signed verifies any more.
public final class SigningIdentity: @unchecked Sendable {
    public let root: Certificate
    public let intermediate: Certificate
    public let leaf: Certificate
    let leafKey: SigningKey
    let intermediateKey: SigningKey
    /// The leaves taken back, signed by the intermediate.
    public let revocations: RevocationList
    /// The JWS header (`alg` and `x5c`), base64url, the same for every signature of this leaf.
    public let encodedHeader: String

    static let rootDays = 20 * 365
    static let intermediateDays = 15 * 365
    static let leafDays = 2 * 365
    static let renewLeafWithinDays = 30

    init(root: Certificate, intermediate: Certificate, intermediateKey: SigningKey, leaf: Certificate, leafKey: SigningKey,
         revocations: RevocationList) {
        self.root = root
        self.intermediate = intermediate
        self.intermediateKey = intermediateKey
        self.leaf = leaf
        self.leafKey = leafKey
        self.revocations = revocations
        let x5c = [leaf, intermediate, root].map { "\"" + Data($0.der).base64EncodedString() + "\"" }
        encodedHeader = Base64URL.encode(Array(("{\"alg\":\"ES256\",\"x5c\":[" + x5c.joined(separator: ",") + "]}").utf8))
    }

    /// Where the identity was loaded from, and whether anything was made.
    public enum Origin: Sendable, Equatable {
        /// `revokedLeafReplaced`: the leaf in place was on the revocation list (a `rotate-key
        /// --revoke` cut short between the list and the new leaf).
        case loaded, created, leafRenewed, revokedLeafReplaced
    }

    /// A key file, or the key directory, found with a mode that let other users in, and made
    /// private again. Whoever could read it may have copied the key: the daemon says so once in
    /// the journal, and the remedy is `storekitctl rotate-key --chain`.
    public struct ModeRepair: Sendable, Equatable, CustomStringConvertible {
        public let path: String
        public let found: mode_t
        public let made: mode_t

        public var description: String {
            "\(path) was \(String(found, radix: 8)), made \(String(made, radix: 8))"
        }
    }

    /// The files `directory` keeps, the root first.
    public static let fileNames = ["root.pem", "intermediate.pem", "leaf.pem", "revoked.pem"]

    /// Loads the identity in `directory`, making what is missing: a whole new chain on first
    /// start, a new leaf when the leaf is about to expire. The directory and its files are
    /// checked first (`secureFiles`); what was made private again is returned.
    public static func openOrCreate(directory: String, uid: uid_t = geteuid()) throws(SigningError)
        -> (identity: SigningIdentity, origin: Origin, repairs: [ModeRepair]) {
        _ = removeDirectory(directory + ".next")   // a chain replacement that a crash cut short
        let repairs = try secureFiles(directory: directory, uid: uid)
        let rootPath = directory + "/root.pem"
        if !FileSystem.exists(rootPath) {
            return (try create(in: directory), .created, repairs)
        }
        let (root, _) = try readPair(rootPath)
        let (intermediate, intermediateKey) = try readPair(directory + "/intermediate.pem")
        let (leaf, leafKey) = try readPair(directory + "/leaf.pem")
        let revocations = try readRevocations(directory, intermediate: intermediate, intermediateKey: intermediateKey)
        let identity = SigningIdentity(root: root, intermediate: intermediate, intermediateKey: intermediateKey,
                                       leaf: leaf, leafKey: leafKey, revocations: revocations)
        if let problem = identity.chainProblem(at: Date()) {
            throw SigningError("The signing chain in \(directory) does not verify: \(problem)")
        }
        if revocations.entry(revoking: leaf) != nil {
            return (try identity.rotatingLeaf(in: directory), .revokedLeafReplaced, repairs)
        }
        if leaf.notAfter.timeIntervalSinceNow < Double(renewLeafWithinDays) * 86_400 {
            return (try identity.rotatingLeaf(in: directory), .leafRenewed, repairs)
        }
        return (identity, .loaded, repairs)
    }

    /// Checks the key directory and its files as the database's are checked, at every start:
    /// the directory is a directory (not a link) and each key file a regular file with one link,
    /// all owned by `uid`. A looser mode with the right owner (what `cp -r`, git, a copy by a
    /// configuration tool or a restore from FAT or SMB leaves) is repaired to 0700/0600 and
    /// returned; anything else is refused, since another user could have put it there.
    /// Made 0700 when absent. Files are changed through a descriptor opened without following
    /// links, so a file swapped between the check and the change is never the one changed.
    public static func secureFiles(directory: String, uid: uid_t = geteuid()) throws(SigningError) -> [ModeRepair] {
        func refuse(_ reason: String) -> SigningError {
            SigningError("Refusing the signing key directory \(directory): \(reason)")
        }
        guard let status = try? FileSystem.status(of: directory, followingSymlinks: false) else {
            do {
                try PrivateDirectory.prepare(directory, mode: 0o700, uid: uid)
            } catch {
                throw refuse("\(error)")
            }
            return []
        }
        guard status.st_mode & S_IFMT == S_IFDIR else {
            throw refuse("\(directory) is not a directory (a symbolic link or another file is there)")
        }
        guard status.st_uid == uid else {
            throw refuse("it belongs to uid \(status.st_uid), not to storekitd's uid \(uid): "
                + "give it and its files to uid \(uid) (chown -R), then rotate the whole chain "
                + "(storekitctl rotate-key --chain), since another user held the key")
        }
        var repairs: [ModeRepair] = []
        if status.st_mode & 0o7077 != 0 {
            do throws(Errno) {
                try FileSystem.setPermissions(of: directory, to: 0o700)
            } catch {
                throw refuse("cannot make it private (0700): \(error)")
            }
            repairs.append(ModeRepair(path: directory, found: status.st_mode & 0o7777, made: 0o700))
        }
        for name in fileNames {
            let path = directory + "/" + name
            let file: FileDescriptor
            do throws(Errno) {
                file = try FileDescriptor.open(path, .readOnly, options: [.noFollow, .closeOnExec, FileDescriptor.OpenOptions(rawValue: O_NONBLOCK)])
            } catch .notFound {
                continue
            } catch .tooManySymbolicLinks {
                throw refuse("\(path) is a symbolic link; the key directory must hold its own files only")
            } catch {
                throw refuse("cannot open \(path): \(error)")
            }
            let info: stat
            do throws(Errno) {
                info = try file.status()
            } catch {
                throw refuse("cannot inspect \(path): \(error)")
            }
            guard info.st_mode & S_IFMT == S_IFREG else { throw refuse("\(path) is not a regular file") }
            guard info.st_nlink == 1 else {
                throw refuse("\(path) has \(info.st_nlink) hard links; the key directory must hold its own files only")
            }
            guard info.st_uid == uid else {
                throw refuse("\(path) belongs to uid \(info.st_uid), not to storekitd's uid \(uid): "
                    + "give it to uid \(uid) (chown), then rotate the whole chain (storekitctl rotate-key --chain)")
            }
            if info.st_mode & 0o7077 != 0 {
                do throws(Errno) {
                    try file.setPermissions(0o600)
                } catch {
                    throw refuse("cannot make \(path) private (0600): \(error)")
                }
                // The revocation list is public (published 0644): a looser mode exposes no key.
                if name != "revoked.pem" { repairs.append(ModeRepair(path: path, found: info.st_mode & 0o7777, made: 0o600)) }
            }
            try? file.close()
        }
        return repairs
    }

    /// A new leaf key and certificate under the same intermediate, written to `directory`.
    /// With `revokingCurrent`, the leaf in place is added to the revocation list first: a crash
    /// between the two leaves a revoked leaf in place, which the next start replaces.
    public func rotatingLeaf(in directory: String, revokingCurrent: Bool = false) throws(SigningError) -> SigningIdentity {
        var revocations = self.revocations
        if revokingCurrent {
            revocations = try RevocationList.issue(revoking: leaf, keeping: revocations, issuer: intermediate, key: intermediateKey)
            try Self.writeRevocations(revocations, to: directory)
        }
        let key = try SigningKey.generate()
        let certificate = try Certificate.issue(role: .leaf, commonName: "storekitd Signing", key: key,
                                                issuer: (intermediate, intermediateKey), validForDays: Self.leafDays)
        try Self.writePair(certificate, key, to: directory + "/leaf.pem")
        return SigningIdentity(root: root, intermediate: intermediate, intermediateKey: intermediateKey,
                               leaf: certificate, leafKey: key, revocations: revocations)
    }

    /// The key directory's revocation list, which must be the intermediate's; made (empty) when
    /// the directory has none yet (a chain made before lists were kept).
    static func readRevocations(_ directory: String, intermediate: Certificate, intermediateKey: SigningKey)
        throws(SigningError) -> RevocationList {
        let path = directory + "/revoked.pem"
        guard FileSystem.exists(path) else {
            let empty = try RevocationList.issue(issuer: intermediate, key: intermediateKey)
            try writeRevocations(empty, to: directory)
            return empty
        }
        let list: RevocationList
        do {
            list = try RevocationList(pem: try FileSystem.readContents(of: path))
        } catch let error as SigningError {
            throw SigningError("\(path): \(error); the revoked signing certificates are unknown: restore the file, or "
                               + "remove it and rotate the whole chain (storekitctl rotate-key --chain)")
        } catch {
            throw SigningError("Cannot read \(path): \(error)")
        }
        guard list.isIssued(by: intermediate) else {
            throw SigningError("\(path) is not signed by the intermediate certificate beside it: the revoked signing "
                               + "certificates are unknown: restore the file, or remove it and rotate the whole chain "
                               + "(storekitctl rotate-key --chain)")
        }
        return list
    }

    static func writeRevocations(_ list: RevocationList, to directory: String) throws(SigningError) {
        do {
            try FileSystem.writeAtomically(list.pem, to: directory + "/revoked.pem", permissions: 0o600)
        } catch {
            throw SigningError("Cannot write \(directory)/revoked.pem: \(error)")
        }
    }

    /// A whole new chain (root, intermediate and leaf, each with a new key) in place of the one in
    /// `directory`: for a key that may have been read by someone else. Made in `DIR.next`, then
    /// swapped with `directory` in one step (`renameat2(RENAME_EXCHANGE)`), so a crash leaves
    /// either the old chain or the new one, never a mix; the old files are then removed.
    /// What the old chain signed no longer verifies under the new root.
    public static func replacingChain(in directory: String) throws(SigningError) -> SigningIdentity {
        let next = directory + ".next"
        guard removeDirectory(next) else {
            throw SigningError("Cannot clear \(next), left there by an earlier replacement: it holds what storekitd did not "
                               + "put there; remove it by hand")
        }
        // Made here and now (never one found in place), private whatever the umask.
        guard mkdir(next, 0o700) == 0, chmod(next, 0o700) == 0 else {
            throw SigningError("Cannot make \(next): \(Errno.current)")
        }
        let identity = try create(in: next)
        do throws(Errno) {
            try FileSystem.exchange(next, directory)
        } catch {
            _ = removeDirectory(next)
            throw SigningError("Cannot put the new chain in place of \(directory): \(error)")
        }
        _ = removeDirectory(next)   // now the old chain
        return identity
    }

    /// Removes `directory` (a chain replacement's leftover) and the files in it; true when it is
    /// gone or was never there. Never follows a link: a symbolic link in its place is removed
    /// itself, never what it names, and the files are removed relative to the directory opened
    /// without following links. A directory of another owner, or one holding a directory that is
    /// not empty, is left alone (false).
    static func removeDirectory(_ directory: String) -> Bool {
        var info = stat()
        guard lstat(directory, &info) == 0 else { return errno == ENOENT }
        if info.st_mode & S_IFMT == S_IFLNK { return unlink(directory) == 0 }
        guard info.st_mode & S_IFMT == S_IFDIR, info.st_uid == geteuid() else { return false }
        let opened: FileDescriptor
        do throws(Errno) {
            opened = try FileDescriptor.open(directory, .readOnly, options: [.directory, .noFollow, .closeOnExec])
        } catch {
            return false
        }
        let names = (try? FileSystem.names(inDirectory: "/proc/self/fd/\(opened.rawValue)")) ?? []
        var removedAll = true
        for name in names {
            var entry = stat()
            guard fstatat(opened.rawValue, name, &entry, AT_SYMLINK_NOFOLLOW) == 0 else { removedAll = false; continue }
            let isDirectory = entry.st_mode & S_IFMT == S_IFDIR
            if unlinkat(opened.rawValue, name, isDirectory ? AT_REMOVEDIR : 0) != 0 { removedAll = false }
        }
        try? opened.close()
        return removedAll && rmdir(directory) == 0
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
        let revocations = try RevocationList.issue(issuer: intermediate, key: intermediateKey)
        try writeRevocations(revocations, to: directory)
        try writePair(root, rootKey, to: directory + "/root.pem")
        return SigningIdentity(root: root, intermediate: intermediate, intermediateKey: intermediateKey,
                               leaf: leaf, leafKey: leafKey, revocations: revocations)
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

    /// Writes the revocation list (PEM, mode 0644) to `path`, beside the published root.
    public func publishRevocations(to path: String) throws(SigningError) {
        do {
            try FileSystem.writeAtomically(revocations.pem, to: path, permissions: 0o644)
        } catch {
            throw SigningError("Cannot write the revocation list to \(path): \(error)")
        }
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
