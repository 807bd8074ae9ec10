import Foundation
import StoreKitTestSupport
import StoreKitWire
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The state directory on a 2 MiB tmpfs (in a private mount namespace) that another file fills
/// up: new payments are refused with storageFull (an SKError for apps), reading, observing and
/// finishing go on, nothing acknowledged is lost, and purchases work again by themselves once
/// the space is back.
@Suite(.enabled(if: TestEnvironment.canMountInPrivateNamespace,
                "needs root with CAP_SYS_ADMIN: mounts a tmpfs in a private mount namespace (unshare --mount)"))
struct NothingLostDiskFullTests {
    /// A process holding a private mount namespace with a tmpfs on `directory` (the tmpfs lives
    /// as long as it does, across daemon restarts); the daemon is run inside it with nsenter.
    final class MountNamespace {
        let process = Process()
        let directory: String

        init(tmpfsOn directory: String, size: String) throws {
            self.directory = directory
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
            process.arguments = ["--mount", "--propagation", "private", "/bin/sh", "-c",
                                 "mount -t tmpfs -o size=\(size),mode=0700 tmpfs \"$0\" && exec sleep 600", directory]
            process.standardInput = FileHandle.nullDevice
            try process.run()
            let mounted = eventually {
                let table = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/mountinfo", encoding: .utf8)) ?? ""
                return table.contains(" \(directory) ") || !process.isRunning
            }
            guard mounted, process.isRunning else { throw IntegrationFailure("could not mount a tmpfs on \(directory)") }
        }

        deinit {
            // sleep may have inherited a blocked SIGTERM: SIGKILL.
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }

        /// `path` (inside the namespace) as this process sees it.
        func view(_ path: String) -> String { "/proc/\(process.processIdentifier)/root" + path }

        var enter: [String] { ["/usr/bin/nsenter", "-t", String(process.processIdentifier), "-m", "--"] }

        /// Free bytes on the tmpfs.
        var freeBytes: Int {
            var info = statvfs()
            guard statvfs(view(directory), &info) == 0 else { return -1 }
            return Int(info.f_bavail) * Int(info.f_frsize)
        }

        /// Writes `name` until the file system is full; returns the bytes written.
        @discardableResult
        func fill(_ name: String) throws -> Int {
            let fd = open(view(directory + "/" + name), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw IntegrationFailure("cannot create the filler: errno \(errno)") }
            defer { close(fd) }
            let chunk = [UInt8](repeating: 0xA5, count: 4096)
            var total = 0
            while true {
                let written = write(fd, chunk, chunk.count)
                if written <= 0 { break }
                total += written
            }
            guard errno == ENOSPC else { throw IntegrationFailure("filling stopped with errno \(errno), not ENOSPC") }
            fsync(fd)
            return total
        }

        func remove(_ name: String) { unlink(view(directory + "/" + name)) }
    }

    @Test func fullDiskRefusesNewPaymentsKeepsFinishingAndRecovers() throws {
        let daemon = try SupervisedDaemon()
        defer { daemon.remove() }
        let namespace = try MountNamespace(tmpfsOn: daemon.stateDirectory, size: "2m")
        daemon.launchPrefix = namespace.enter
        try daemon.start()
        let database = daemon.databasePath

        let buyer = try Client(daemon.base)
        let observer = try Client(daemon.base)
        #expect(try observer.subscribe().isEmpty)
        _ = try buyer.subscribe()
        var acknowledged: [UInt64] = []
        for _ in 0..<6 { acknowledged.append(try buyer.buy(Sample.coins).id) }

        // Another program takes every byte left.
        let filled = try namespace.fill("filler")
        #expect(namespace.freeBytes < 4096, "free after filling: \(namespace.freeBytes)")

        // New payments: refused at once with a clear, typed error; nothing is stored for them.
        let refused = try buyer.addPayment(Sample.coins)
        #expect(refused.code == .storageFull, "\(refused.code.name): \(refused.message)")
        #expect(refused.message.contains("full"), "\(refused.message)")
        #expect(refused.updated.isEmpty, "a refused payment must not show up as purchasing: \(refused.updated)")

        // Reading and observing go on.
        #expect(try daemon.base.transactions().count == acknowledged.count)
        let late = try Client(daemon.base)
        #expect(Set(try late.subscribe().map(\.id)) == Set(acknowledged))
        #expect(try buyer.unfinished().count == acknowledged.count)

        // Finishing goes on, and observers hear of it.
        for id in acknowledged.prefix(5) {
            let finish = try buyer.finish(id)
            #expect(finish.code == .ok, "finishing \(id) on a full disk: \(finish.code.name) \(finish.message)")
        }
        var removed: [UInt64] = []
        for _ in 0..<100 where removed.count < 5 {
            if case .removed(let records) = try observer.nextPush() { removed += records.map(\.id) }
        }
        #expect(removed == Array(acknowledged.prefix(5)), "the observer heard \(removed)")
        #expect(try buyer.addPayment(Sample.coins).code == .storageFull, "still full, still refused")
        #expect(try buyer.finish(acknowledged[5]).code == .ok)
        #expect(try late.subscribe().isEmpty)

        // An app: the library turns the refusal into a failed transaction with an SKError
        // (7, cloudServiceNetworkConnectionFailed) and the daemon's message.
        let app = try daemon.base.app(["buy", Sample.coins], timeout: appTimeout)
        let failure = updates(app.stdout).first { $0["state"] as? String == "failed" }
        #expect(app.status == 1, "\(app.stdout)\n\(app.stderr)")
        #expect((failure?["error"] as? [String: Any])?["code"] as? Int == 7, "\(app.stdout)")
        // storekitctl buy is refused the same way.
        let ctlBuy = try daemon.base.ctl(["buy", Sample.app, Sample.coins])
        #expect(ctlBuy.status == 1 && ctlBuy.stderr.contains("full"), "\(ctlBuy.stderr)")

        // A crash and a restart while the disk is still full: it starts, serves what it has and
        // still refuses new payments.
        daemon.crash()
        try daemon.start()
        let again = try Client(daemon.base)
        #expect(try again.subscribe().isEmpty)
        #expect(try again.addPayment(Sample.coins).code == .storageFull)
        #expect(try daemon.base.transactions().count == acknowledged.count)

        // Space comes back: purchases work again without anyone touching the daemon.
        namespace.remove("filler")
        var recovered: Reply?
        #expect(eventually(timeout: 10) {
            guard let reply = try? again.addPayment(Sample.coins), reply.code == .ok else { return false }
            recovered = reply
            return true
        }, "no purchase went through within 10 s after the space came back")
        let newID = try #require(recovered?.value)

        // Nothing acknowledged was lost, even by a crash right now.
        daemon.crash()
        try daemon.start()
        let rows = Dictionary(uniqueKeysWithValues: try storedRows(database, prefix: namespace.enter).map { ($0.id, $0) })
        for id in acknowledged + [newID] { #expect(rows[id] != nil, "transaction \(id) is missing") }
        for id in acknowledged { #expect(rows[id]?.finished == true, "finished \(id) is not finished") }
        #expect(rows.count == acknowledged.count + 1, "\(rows.count) rows: a refused payment was stored")
        #expect(try integrityCheck(database, prefix: namespace.enter) == "ok")
        let log = daemon.base.log()
        #expect(log.contains("almost full"), "the journal does not say why payments were refused")
        _ = filled
    }
}
