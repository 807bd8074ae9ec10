import Foundation
import StoreKitPosix
@testable import StoreKitSigning
import StoreKitTestSupport
import Testing

/// The key directory is checked at every open as the database is: a looser mode with the right
/// owner is repaired and reported, anything another user could have placed is refused.
@Suite("Signing key files")
struct KeyFileTests {
    static func mode(_ path: String) throws -> mode_t {
        try FileSystem.status(of: path, followingSymlinks: false).st_mode & 0o7777
    }

    @Test("a key directory copied with loose modes (0755, files 0644) is made 0700/0600 and each repair is reported")
    func looseModesAreRepaired() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let keys = directory.file("signing")
        let (identity, _, first) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(first.isEmpty)
        #expect(chmod(keys, 0o755) == 0)
        for name in SigningIdentity.fileNames { #expect(chmod(keys + "/" + name, 0o644) == 0) }

        let (again, origin, repairs) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(origin == .loaded)
        #expect(again.root.der == identity.root.der, "the same chain, not a new one")
        // The revocation list is made private too, but is no key: not reported as exposed.
        let keyFiles = SigningIdentity.fileNames.filter { $0 != "revoked.pem" }
        #expect(repairs.map(\.path) == [keys] + keyFiles.map { keys + "/" + $0 })
        #expect(repairs.map(\.found) == [0o755] + keyFiles.map { _ in 0o644 })
        #expect(try Self.mode(keys) == 0o700)
        for name in SigningIdentity.fileNames { #expect(try Self.mode(keys + "/" + name) == 0o600, "\(name)") }
        #expect(repairs[1].description == "\(keys)/root.pem was 644, made 600")

        let (_, _, none) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(none.isEmpty, "repaired once, then quiet")
    }

    @Test("a group-only or set-id bit counts as loose too")
    func groupAndSpecialBitsAreRepaired() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let keys = directory.file("signing")
        _ = try SigningIdentity.openOrCreate(directory: keys)
        #expect(chmod(keys + "/leaf.pem", 0o640) == 0)
        #expect(chmod(keys + "/intermediate.pem", 0o4600) == 0)
        let (_, _, repairs) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(Set(repairs.map(\.path)) == [keys + "/leaf.pem", keys + "/intermediate.pem"])
        #expect(try Self.mode(keys + "/intermediate.pem") == 0o600)
    }

    @Test("a symbolic link in place of the key directory is refused, not followed")
    func symlinkedDirectoryIsRefused() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let real = directory.file("real")
        _ = try SigningIdentity.openOrCreate(directory: real)
        #expect(symlink(real, directory.file("signing")) == 0)
        #expect { try SigningIdentity.openOrCreate(directory: directory.file("signing")) } throws: { error in
            "\(error)".contains("is not a directory")
        }
    }

    @Test("a key file with a second hard link (another copy someone keeps) is refused")
    func hardLinkedKeyIsRefused() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let keys = directory.file("signing")
        _ = try SigningIdentity.openOrCreate(directory: keys)
        #expect(link(keys + "/leaf.pem", directory.file("copy.pem")) == 0)
        #expect { try SigningIdentity.openOrCreate(directory: keys) } throws: { error in
            "\(error)".contains("leaf.pem has 2 hard links")
        }
        #expect(try Self.mode(keys + "/leaf.pem") == 0o600)
    }

    @Test("key files or a directory of another uid are refused with what to do", .enabled(if: getuid() == 0, "needs root to chown"))
    func foreignOwnerIsRefused() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let keys = directory.file("signing")
        _ = try SigningIdentity.openOrCreate(directory: keys)
        #expect(chown(keys + "/leaf.pem", 4321, 4321) == 0)
        #expect { try SigningIdentity.openOrCreate(directory: keys) } throws: { error in
            "\(error)".contains("leaf.pem belongs to uid 4321") && "\(error)".contains("rotate-key --chain")
        }
        #expect(chown(keys + "/leaf.pem", 0, 0) == 0)
        #expect(chown(keys, 4321, 4321) == 0)
        #expect { try SigningIdentity.openOrCreate(directory: keys) } throws: { error in
            "\(error)".contains("belongs to uid 4321")
        }
        // The daemon's uid is what counts, not root's: the same files are refused for uid 4321's daemon.
        #expect(chown(keys, 0, 0) == 0)
        #expect(throws: SigningError.self) { try SigningIdentity.secureFiles(directory: keys, uid: 4321) }
    }

    @Test("replacingChain puts a whole new chain in place in one step; the old root no longer verifies what it signs")
    func wholeChainIsReplaced() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let keys = directory.file("signing")
        let (old, _, _) = try SigningIdentity.openOrCreate(directory: keys)
        let new = try SigningIdentity.replacingChain(in: keys)
        #expect(new.root.der != old.root.der)
        #expect(new.intermediate.der != old.intermediate.der)
        #expect(new.chainProblem(at: Date()) == nil)
        #expect(!FileSystem.exists(keys + ".next"), "the old chain is removed")
        #expect(try Self.mode(keys) == 0o700)
        for name in SigningIdentity.fileNames { #expect(try Self.mode(keys + "/" + name) == 0o600) }
        let (reloaded, origin, _) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(origin == .loaded)
        #expect(reloaded.root.der == new.root.der)
        let jws = try reloaded.signJWS(payload: SignedDataTests.payload())
        #expect(SignedDataVerifier(roots: [new.root]).verify(jws).failureKind == nil)
        #expect(SignedDataVerifier(roots: [old.root]).verify(jws).failureKind != nil)
    }

    @Test("a symbolic link planted as DIR.next is removed itself: what it names is never emptied, at start or by a replacement")
    func plantedNextLinkIsNotFollowed() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let keys = directory.file("signing")
        _ = try SigningIdentity.openOrCreate(directory: keys)
        let victim = directory.file("victim")
        #expect(mkdir(victim, 0o755) == 0)
        try directory.write("victim/f1", "precious")
        #expect(symlink(victim, keys + ".next") == 0)
        _ = try SigningIdentity.openOrCreate(directory: keys)
        #expect(FileSystem.exists(victim + "/f1"), "the start emptied what the link named")
        #expect((try? FileSystem.status(of: keys + ".next", followingSymlinks: false)) == nil)
        #expect(symlink(victim, keys + ".next") == 0)
        let replaced = try SigningIdentity.replacingChain(in: keys)
        #expect(FileSystem.exists(victim + "/f1"), "the replacement emptied what the link named")
        #expect(try Self.mode(keys) == 0o700)
        #expect(replaced.chainProblem(at: Date()) == nil)
        // A link to the live keys is no way to delete them either.
        #expect(symlink(keys, keys + ".next") == 0)
        let again = try SigningIdentity.replacingChain(in: keys)
        let (loaded, _, _) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(loaded.root.der == again.root.der)
    }

    @Test("a DIR.next someone filled (a subdirectory with a file) stops the replacement; the keys stay as they were")
    func foreignNextDirectoryIsRefused() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let keys = directory.file("signing")
        let (old, _, _) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(mkdir(keys + ".next", 0o755) == 0 && mkdir(keys + ".next/sub", 0o755) == 0)
        try directory.write("signing.next/sub/f", "x")
        #expect { try SigningIdentity.replacingChain(in: keys) } throws: { error in "\(error)".contains("remove it by hand") }
        let (loaded, _, _) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(loaded.root.der == old.root.der)
        #expect(try Self.mode(keys) == 0o700)
    }

    @Test("a replacement cut short by a crash (a leftover DIR.next) leaves the old chain in use and is cleaned up")
    func leftoverNextDirectoryIsRemoved() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let keys = directory.file("signing")
        let (old, _, _) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(mkdir(keys + ".next", 0o700) == 0)
        try FileSystem.writeAtomically(Array("half".utf8), to: keys + ".next/leaf.pem", permissions: 0o600)
        let (loaded, _, _) = try SigningIdentity.openOrCreate(directory: keys)
        #expect(loaded.root.der == old.root.der)
        #expect(!FileSystem.exists(keys + ".next"))
    }
}
