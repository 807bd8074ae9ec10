import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Hosted content through the real daemon and the real example app: a purchase's content is
/// downloaded, checked and in place before the transaction is finished; only its owner gets it;
/// a paused download goes on after a daemon crash from what it copied; a full disk, a changed
/// file and a refund each fail it with nothing left as finished; a restore offers it again.
@Suite struct HostedContentTests {
    static let pack = "com.example.game.level_pack"

    /// The sample config's content of the level pack.
    static var sampleContent: String { Paths.sampleConfig + "/content/level_pack" }

    /// A daemon whose level pack comes with `files` (path → bytes), written under its config dir.
    static func daemon(with files: [String: [UInt8]]) throws -> DaemonProcess {
        let daemon = try DaemonProcess()
        let config = (daemon.configFile as NSString).deletingLastPathComponent
        for (path, bytes) in files {
            let url = URL(fileURLWithPath: config + "/content/test_pack/" + path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(bytes).write(to: url)
        }
        try """
            [App]
            ID=com.example.game
            Catalog=catalog/example.storekit

            [HostedContent]
            Product=\(pack)
            Path=content/test_pack
            Version=2.5
            """.write(toFile: config + "/apps.d/com.example.game.conf", atomically: true, encoding: .utf8)
        return daemon
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SeededRandomNumberGenerator(seed: UInt64(count))
        var bytes = [UInt8](repeating: 0, count: count)
        for index in stride(from: 0, to: count, by: 8) {
            var value = generator.next()
            for offset in index..<min(index + 8, count) {
                bytes[offset] = UInt8(truncatingIfNeeded: value)
                value >>= 8
            }
        }
        return bytes
    }

    static func text(_ object: [String: Any]?, _ key: String) -> String {
        (object?[key] as? String) ?? ""
    }

    static func downloads(_ output: String) -> [[String: Any]] {
        events(output).filter { $0["event"] as? String == "download" }
    }

    static func finalFolder(_ daemon: DaemonProcess, cacheHome: String? = nil) -> String {
        (cacheHome ?? daemon.cacheHome) + "/storekit/com.example.game/downloads/" + pack
    }

    /// `sha256sum`'s digest of a file: an independent check of the daemon's.
    static func sha256sum(_ path: String) throws -> [UInt8] {
        let result = try ProcessRunner.run("/usr/bin/sha256sum", [path])
        let hex = Array(result.stdout.prefix(64))
        return stride(from: 0, to: hex.count, by: 2).map { UInt8(String(hex[$0...$0 + 1]), radix: 16)! }
    }

    /// Whether two folders hold the same files with the same bytes (`diff -r`).
    static func sameTree(_ first: String, _ second: String) throws -> Bool {
        try ProcessRunner.run("/usr/bin/diff", ["-r", first, second]).status == 0
    }

    func app(_ daemon: DaemonProcess, _ arguments: [String], prefix: [String] = [],
             environment: [String: String] = [:]) throws -> ProcessResult {
        let command = prefix + [Paths.binary("storekit-example-app"), "--ledger", daemon.directory.file("ledger")] + arguments
        return try ProcessRunner.run(command[0], Array(command.dropFirst()),
                                     environment: daemon.clientEnvironment.merging(environment) { $1 }, timeout: 60)
    }

    @Test("buy: the content is downloaded, checked and in Apple's layout before the transaction is granted and finished")
    func purchaseDownloadsBeforeFinishing() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let result = try app(daemon, ["buy", Self.pack])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        let lines = events(result.stdout)
        let finishedAt = lines.firstIndex { $0["event"] as? String == "download" && $0["state"] as? String == "finished" }
        let grantedAt = lines.firstIndex { $0["event"] as? String == "updated" && $0["granted"] as? Bool == true }
        let removedAt = lines.firstIndex { $0["event"] as? String == "removed" }
        #expect(finishedAt != nil && grantedAt != nil && removedAt != nil, "\(result.stdout)")
        if let finishedAt, let grantedAt, let removedAt { #expect(finishedAt < grantedAt && grantedAt < removedAt) }
        let downloads = Self.downloads(result.stdout)
        #expect(downloads.first?["state"] as? String == "active")
        let progress = downloads.compactMap { $0["progress"] as? Double }
        #expect(progress == progress.sorted() && progress.last == 1, "progress only grows, to 1: \(progress)")
        #expect(downloads.last?["expectedContentLength"] as? Int == 469 && downloads.last?["contentVersion"] as? String == "1.0")

        let folder = Self.finalFolder(daemon)
        #expect(downloads.last?["contentURL"] as? String == folder)
        #expect(try Self.sameTree(Self.sampleContent, folder + "/Contents"), "Contents/ holds the registered folder's files")
        let plist = try PropertyListSerialization.propertyList(from: Data(contentsOf: URL(fileURLWithPath: folder + "/ContentInfo.plist")), format: nil)
        let info = try #require(plist as? [String: Any])
        #expect(info["ContentVersion"] as? String == "1.0" && info["IAPProductIdentifier"] as? String == Self.pack)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: daemon.cacheHome + "/storekit/com.example.game/downloads")
        #expect(leftovers.sorted() == [".locks", Self.pack], "no staging folder is left: \(leftovers)")
        #expect(try daemon.transactions().allSatisfy(\.finished))
    }

    @Test("only the owner of a purchased, unrefunded transaction gets its content; the file comes as a read-only descriptor")
    func onlyTheOwnerGetsContent() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        daemon.openDirectoriesToOtherUsers()
        let owner = try Client(daemon)
        _ = try owner.subscribe()
        let purchase = try owner.buy(Self.pack)
        owner.connection.acceptsDescriptors = true
        #expect(owner.connection.hostedContent == [HostedContentRecord(productID: Self.pack, version: "1.0", length: 469)])

        // The manifest: every file of the folder, its length and SHA-256 as sha256sum computes it.
        let id = owner.makeRequestID()
        try owner.connection.send(.content(requestID: id, transactionID: purchase.id))
        guard case .content(id, let manifest) = try owner.connection.receive() else {
            Issue.record("no manifest")
            return
        }
        #expect(manifest.files.map(\.path) == ["Levels/level1.json", "Levels/level2.json", "Levels/level3.json", "README.txt"])
        for file in manifest.files {
            let path = Self.sampleContent + "/" + file.path
            #expect(file.sha256 == (try Self.sha256sum(path)), "\(file.path)")
            #expect(file.length == UInt64((try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? -1))
        }

        // File 3: a descriptor of the file itself, opened read-only.
        let open = owner.makeRequestID()
        try owner.connection.send(.openContent(requestID: open, transactionID: purchase.id, file: 3))
        guard case .contentFile(open, 3, let length) = try owner.connection.receive(), let fd = owner.connection.takeDescriptor() else {
            Issue.record("no file descriptor")
            return
        }
        defer { close(fd) }
        #expect(length == manifest.files[3].length)
        var bytes = [UInt8](repeating: 0, count: Int(length) + 16)
        #expect(pread(fd, &bytes, bytes.count, 0) == Int(length))
        #expect(Array(bytes.prefix(Int(length))) == Array(try Data(contentsOf: URL(fileURLWithPath: Self.sampleContent + "/README.txt"))))
        #expect(fcntl(fd, F_GETFL) & O_ACCMODE == O_RDONLY)
        #expect(write(fd, "x", 1) == -1 && errno == EBADF, "the app cannot change the store's content")
        #expect(try owner.request { .openContent(requestID: $0, transactionID: purchase.id, file: 4) }.code == .invalidArgument)

        // Another uid: as if the transaction did not exist; nothing is passed.
        let stranger = try Client(daemon, asUID: 4242)
        stranger.connection.acceptsDescriptors = true
        for message in [{ (id: UInt32) in ClientMessage.content(requestID: id, transactionID: purchase.id) },
                        { (id: UInt32) in ClientMessage.openContent(requestID: id, transactionID: purchase.id, file: 0) }] {
            let reply = try stranger.request(message)
            #expect(reply.code == .noContent && reply.message.contains("not in this queue"), "\(reply.message)")
        }
        #expect(stranger.connection.takeDescriptor() == nil)

        // A consumable has no content; an unknown transaction is not this queue's.
        let coins = try owner.buy("com.example.game.coins100")
        #expect(try owner.request { .content(requestID: $0, transactionID: coins.id) }.message.contains("comes with no hosted content"))
        #expect(try owner.request { .content(requestID: $0, transactionID: 12345) }.code == .noContent)

        // A refunded transaction's content is no longer the buyer's.
        #expect(try daemon.ctl(["refund", String(purchase.id)]).status == 0)
        let refunded = try owner.request { .openContent(requestID: $0, transactionID: purchase.id, file: 0) }
        #expect(refunded.code == .noContent && refunded.message.contains("refunded"), "\(refunded.message)")

        // A version-2 client is told of no content and cannot ask for it; its pushes are signed,
        // as before version 3.
        let older = try Client(daemon, version: 2)
        #expect(older.connection.hostedContent.isEmpty)
        _ = try older.subscribe()
        let pushed = try older.buy("com.example.game.coins100")
        #expect(pushed.jwsRepresentation?.split(separator: ".").count == 3, "a version-2 observer's purchase is signed")
        try older.connection.send(.content(requestID: 1, transactionID: purchase.id))
        guard case .result(_, let code, _, _, _) = try older.connection.receive() else { return }
        #expect(code == .malformedRequest)
    }

    @Test("a paused download goes on from what it copied after the daemon is killed and started again")
    func pausedDownloadResumesAfterDaemonCrash() throws {
        let big = Self.randomBytes(48 << 20)
        let daemon = try Self.daemon(with: ["big.bin": big, "notes/readme.txt": Array("level notes\n".utf8)])
        defer { daemon.remove() }
        try daemon.start()
        let paused = try app(daemon, ["--pause-download", "buy", Self.pack])
        #expect(paused.status == 4, "\(paused.stdout)\n\(paused.stderr)")
        let pausedAt = try #require(Self.downloads(paused.stdout).last { $0["state"] as? String == "paused" }?["progress"] as? Double)
        #expect(pausedAt > 0 && pausedAt < 1, "paused part way: \(pausedAt)")
        #expect(!FileManager.default.fileExists(atPath: Self.finalFolder(daemon)), "nothing is at contentURL before the download ends")
        #expect(try daemon.transactions().contains { $0.productIdentifier == Self.pack && !$0.finished })

        daemon.kill()
        try daemon.start()
        let observer = try RunningProcess(Paths.binary("storekit-example-app"),
                                          ["--ledger", daemon.directory.file("ledger"), "observe"], environment: daemon.clientEnvironment)
        #expect(observer.waitForOutput(timeout: 60) { events($0).contains { $0["event"] as? String == "removed" } }, "\(observer.output)")
        observer.stop()
        let resumed = Self.downloads(observer.output)
        let firstProgress = try #require(resumed.first { ($0["progress"] as? Double ?? 0) > 0 }?["progress"] as? Double)
        print("hosted content: paused at \(pausedAt), the next run went on from \(firstProgress)")
        #expect(firstProgress >= pausedAt, "went on from \(firstProgress), paused at \(pausedAt): not started over")
        #expect(resumed.last?["state"] as? String == "finished")
        let folder = Self.finalFolder(daemon)
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: folder + "/Contents/big.bin"))) == big)
        #expect(try String(contentsOfFile: folder + "/Contents/notes/readme.txt", encoding: .utf8) == "level notes\n")
        #expect(try daemon.transactions().allSatisfy(\.finished))
    }

    @Test("a file changed after the daemon listed it fails the SHA-256 check; a file gone fails with the daemon's reason")
    func changedContentFails() throws {
        let daemon = try Self.daemon(with: ["a.txt": Array("first file\n".utf8), "b.txt": Array("second file\n".utf8)])
        defer { daemon.remove() }
        try daemon.start()
        let config = (daemon.configFile as NSString).deletingLastPathComponent
        try "SECOND FILE\n".write(toFile: config + "/content/test_pack/b.txt", atomically: false, encoding: .utf8)
        let changed = try app(daemon, ["buy", Self.pack])
        #expect(changed.status == 3, "\(changed.stdout)\n\(changed.stderr)")
        let failure = try #require(Self.downloads(changed.stdout).last)
        #expect(failure["state"] as? String == "failed")
        #expect(Self.text(failure, "error").contains("does not match the SHA-256"), "\(failure)")
        #expect(!FileManager.default.fileExists(atPath: Self.finalFolder(daemon)))

        try FileManager.default.removeItem(atPath: config + "/content/test_pack/b.txt")
        let gone = try app(daemon, ["buy", Self.pack])
        #expect(gone.status == 3, "\(gone.stdout)\n\(gone.stderr)")
        #expect(Self.text(Self.downloads(gone.stdout).last, "error").contains("cannot open"), "\(gone.stdout)")
        #expect(daemon.log().contains("Hosted content of \(Self.pack) for com.example.game: cannot open"), "the log says which file")
        #expect(!FileManager.default.fileExists(atPath: Self.finalFolder(daemon)))
    }

    @Test("a restore offers the content again; the restored transaction is finished once it is in")
    func restoreOffersContentAgain() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        #expect(try app(daemon, ["buy", Self.pack]).status == 0)
        try FileManager.default.removeItem(atPath: daemon.cacheHome)
        // Another device of the buyer: its own grant ledger, no content.
        let restore = try ProcessRunner.run(Paths.binary("storekit-example-app"),
                                            ["--ledger", daemon.directory.file("ledger-2"), "restore"],
                                            environment: daemon.clientEnvironment, timeout: 60)
        #expect(restore.status == 0, "\(restore.stdout)\n\(restore.stderr)")
        let restored = try #require(updates(restore.stdout).last { $0["state"] as? String == "restored" && $0["granted"] as? Bool == true })
        #expect(Self.downloads(restore.stdout).contains {
            $0["state"] as? String == "finished" && $0["transactionIdentifier"] as? String == restored["transactionIdentifier"] as? String
        })
        #expect(try Self.sameTree(Self.sampleContent, Self.finalFolder(daemon) + "/Contents"))
    }

    @Test("[HostedContent] mistakes are refused at start with FILE:LINE")
    func configurationMistakes() throws {
        let cases: [(String, String)] = [
            ("[HostedContent]\nProduct=com.example.game.coins100\nPath=content/level_pack\n", "non-consumable"),
            ("[HostedContent]\nProduct=com.example.game.unknown\nPath=content/level_pack\n", "does not have"),
            ("[HostedContent]\nProduct=\(Self.pack)\nPath=content/missing\n", "cannot read the folder"),
            ("[HostedContent]\nProduct=\(Self.pack)\n", "missing required key Path="),
            ("[HostedContent]\nProduct=\(Self.pack)\nPath=content/level_pack\nSize=3\n", "unknown key 'Size'"),
            ("[HostedContent]\nProduct=\(Self.pack)\nPath=content/empty\n", "holds no file"),
            ("[HostedContent]\nProduct=\(Self.pack)\nPath=content/level_pack\nVersion=1 0\n", "invalid value '1 0' for Version="),
        ]
        for (section, expected) in cases {
            let (result, directory) = try DaemonConfigExitTests.runDaemon { directory in
                try FileManager.default.createDirectory(atPath: directory.file("config/content/empty"), withIntermediateDirectories: true)
                try "[App]\nID=com.example.game\nCatalog=catalog/example.storekit\n\n\(section)"
                    .write(toFile: directory.file("config/apps.d/com.example.game.conf"), atomically: true, encoding: .utf8)
            }
            defer { directory.remove() }
            #expect(result.status == 1, "\(section)")
            #expect(result.stderr.contains("com.example.game.conf:5") || result.stderr.contains("com.example.game.conf:"), "\(result.stderr)")
            #expect(result.stderr.contains(expected), "\(section): \(result.stderr)")
        }
    }

    @Test("a full disk fails the download with its error, keeps the transaction unfinished, and leaves nothing at contentURL",
          .enabled(if: TestEnvironment.canMountInPrivateNamespace,
                   "needs root with CAP_SYS_ADMIN: mounts a tmpfs in a private mount namespace (unshare --mount)"))
    func fullDiskFails() throws {
        let daemon = try Self.daemon(with: ["big.bin": Self.randomBytes(8 << 20)])
        defer { daemon.remove() }
        try daemon.start()
        let cacheHome = daemon.directory.file("small-cache")
        let namespace = try NothingLostDiskFullTests.MountNamespace(tmpfsOn: cacheHome, size: "4m")
        let result = try app(daemon, ["buy", Self.pack], prefix: namespace.enter, environment: ["XDG_CACHE_HOME": cacheHome])
        #expect(result.status == 3, "\(result.stdout)\n\(result.stderr)")
        let failure = try #require(Self.downloads(result.stdout).last)
        #expect(failure["state"] as? String == "failed")
        #expect(Self.text(failure, "error").contains("No space left on device"), "\(failure)")
        #expect(!FileManager.default.fileExists(atPath: namespace.view(Self.finalFolder(daemon, cacheHome: cacheHome))))
        #expect(try daemon.transactions().contains { $0.productIdentifier == Self.pack && !$0.finished },
                "the transaction waits for its content")
    }
}

extension HostedContentTests {
    @Test("storekitctl shows a product's content as the daemon listed it, and products says which are downloadable")
    func storekitctlShowsContent() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let content = try #require(try daemon.ctlJSON(["content", Sample.app, Self.pack]) as? [String: Any])
        #expect(content["contentVersion"] as? String == "1.0" && content["contentLength"] as? Int == 469)
        let files = try #require(content["files"] as? [[String: Any]])
        #expect(files.map { $0["path"] as? String ?? "" } == ["Levels/level1.json", "Levels/level2.json", "Levels/level3.json", "README.txt"])
        for file in files {
            let digest = try Self.sha256sum(Self.sampleContent + "/" + (file["path"] as? String ?? ""))
            #expect(file["sha256"] as? String == digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined())
        }
        let table = try daemon.ctl(["content", Sample.app, Self.pack])
        #expect(table.status == 0 && table.stdout.contains("Levels/level2.json") && table.stdout.contains("contentVersion"), "\(table.stdout)")
        let none = try daemon.ctl(["content", Sample.app, "com.example.game.coins100"])
        #expect(none.status != 0 && none.stderr.contains("comes with no hosted content"), "\(none.stderr)")

        let products = try #require(try daemon.ctlJSON(["products", Sample.app]) as? [[String: Any]])
        let pack = try #require(products.first { $0["productIdentifier"] as? String == Self.pack })
        #expect(pack["isDownloadable"] as? Bool == true && pack["downloadContentVersion"] as? String == "1.0")
        #expect(pack["downloadContentLengths"] as? [Int] == [469])
        #expect(products.filter { $0["isDownloadable"] as? Bool == true }.count == 1)
    }
}

extension HostedContentTests {
    @Test("a reload lists the content again and hashes only what changed; a download gets the new bytes")
    func reloadHashesOnlyWhatChanged() throws {
        let daemon = try Self.daemon(with: ["a.txt": Array("first\n".utf8), "b.txt": Array("second\n".utf8),
                                            "c/d.txt": Array("third\n".utf8)])
        defer { daemon.remove() }
        try daemon.start()
        #expect(eventually { daemon.log().contains("Hosted content of com.example.game: \(Self.pack) 2.5: 3 files, 19 bytes") })
        let config = (daemon.configFile as NSString).deletingLastPathComponent
        try "SECOND\n".write(toFile: config + "/content/test_pack/b.txt", atomically: false, encoding: .utf8)
        let before = try #require(try daemon.ctlJSON(["content", Sample.app, Self.pack]) as? [String: Any])
        kill(daemon.process!.processIdentifier, SIGHUP)
        #expect(eventually { daemon.log().contains("3 files, 19 bytes from \(config)/content/test_pack (1 hashed again, the others unchanged)") },
                "\(daemon.log(tail: 10))")
        let after = try #require(try daemon.ctlJSON(["content", Sample.app, Self.pack]) as? [String: Any])
        let digests = { (json: [String: Any]) in ((json["files"] as? [[String: Any]]) ?? []).map { $0["sha256"] as? String ?? "" } }
        #expect(digests(before)[0] == digests(after)[0] && digests(before)[2] == digests(after)[2])
        #expect(digests(before)[1] != digests(after)[1])
        let expected = try Self.sha256sum(config + "/content/test_pack/b.txt").map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        #expect(digests(after)[1] == expected)
        let bought = try app(daemon, ["buy", Self.pack])
        #expect(bought.status == 0, "\(bought.stdout)")
        #expect(try String(contentsOfFile: Self.finalFolder(daemon) + "/Contents/b.txt", encoding: .utf8) == "SECOND\n")
    }
}

extension HostedContentTests {
    @Test("a connection that asks for files faster than it reads them gets 16, then quotaExceeded until it reads them")
    func descriptorsOnTheirWayAreBounded() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let client = try Client(daemon)
        _ = try client.subscribe()
        let purchase = try client.buy(Self.pack)
        client.connection.acceptsDescriptors = true
        let first = client.makeRequestID()
        for offset in 0..<40 {
            try client.connection.send(.openContent(requestID: first + UInt32(offset), transactionID: purchase.id, file: 0))
        }
        for _ in 1..<40 { _ = client.makeRequestID() }
        // Not read while the daemon answers (40 small requests take it milliseconds): what it
        // sends stays unread in this socket.
        Thread.sleep(forTimeInterval: 1)
        var files = 0
        var refused = 0
        while files + refused < 40 {
            switch try client.connection.receive() {
            case .contentFile: files += 1
            case .result(_, .quotaExceeded, _, _, _): refused += 1
            case let other: Issue.record("unexpected \(other)")
            }
        }
        #expect(files == HostedContentTests.descriptorsPerConnection && refused == 40 - files, "\(files) files, \(refused) refused")
        var descriptors: [Int32] = []
        while let fd = client.connection.takeDescriptor() { descriptors.append(fd) }
        #expect(descriptors.count == files)
        for fd in descriptors { close(fd) }
        // Everything read: the next asks are answered again.
        let again = client.makeRequestID()
        try client.connection.send(.openContent(requestID: again, transactionID: purchase.id, file: 0))
        guard case .contentFile(again, 0, _) = try client.connection.receive() else {
            Issue.record("not answered after the files were read")
            return
        }
        if let fd = client.connection.takeDescriptor() { close(fd) }
    }

    static let descriptorsPerConnection = 16
}
