import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing

/// `storekitctl backup FILE` while clients buy and finish: the copy is consistent, holds every
/// transaction acknowledged before the backup started, and restoring it (the procedure of
/// docs/operations.md) gives a daemon whose ledger is the original's at the backup moment.
@Suite struct NothingLostBackupTests {
    @Test(.enabled(if: TestEnvironment.isRoot, "needs root: the clients connect as other uids (setresuid)"))
    func backupUnderLoadRestoresToTheLedgerOfTheBackupMoment() throws {
        let daemon = try SupervisedDaemon()
        defer { daemon.remove() }
        try daemon.start()
        daemon.base.openDirectoriesToOtherUsers()

        let ledger = ToldLedger()
        let threads = ClientThreads()
        for (index, uid) in ([74001, 74002, 74002, 74003] as [UInt32]).enumerated() {
            threads.spawn("backup-load-\(index)") {
                guard let client = try? BuyingClient(daemon.base, uid: uid, ledger: ledger) else { return }
                client.run(until: threads, finishProbability: 0.5)
            }
        }
        #expect(eventually(timeout: 20) { ledger.keys.count >= 60 }, "the clients bought almost nothing")

        // What was acknowledged before the backup starts must all be in it.
        let toldBefore = ledger.entries
        let listedBefore = try daemon.base.transactions()
        let file = daemon.base.directory.file("backup-\(UUID().uuidString).sqlite")
        let answer = try #require(try daemon.base.ctlJSON(["backup", file]) as? [String: Any])
        let listedAfter = try daemon.base.transactions()
        let acknowledgedAtEnd = ledger.keys.count
        #expect(eventually(timeout: 20) { ledger.keys.count >= acknowledgedAtEnd + 20 }, "no purchases after the backup")
        threads.stop()
        #expect(threads.join())
        let final = try daemon.base.transactions()

        // The answer describes the file; the file is intact and self-contained.
        #expect(answer["path"] as? String == file)
        #expect(answer["bytes"] as? Int == fileBytes(file)?.count)
        #expect(answer["integrity"] as? String == "ok")
        #expect(try integrityCheck(file) == "ok")
        #expect(try sqlite3(file, "SELECT count(*) FROM transactions;", readOnly: true) == String(answer["transactions"] as? Int ?? -1))
        #expect(!FileManager.default.fileExists(atPath: file + "-wal") && !FileManager.default.fileExists(atPath: file + "-journal"))
        #expect(try sqlite3(file, "PRAGMA journal_mode;", readOnly: true) == "delete")
        #expect(listedBefore.count >= 60, "the load was too light: \(listedBefore.count) transactions before the backup")
        #expect(final.count > listedAfter.count, "no purchases went on after the backup")

        // A second backup to the same name is refused and leaves the first alone.
        let firstBytes = fileBytes(file)
        let again = try daemon.base.ctl(["backup", file])
        #expect(again.status == 1 && again.stderr.contains("already exists"), "\(again.stderr)")
        #expect(fileBytes(file) == firstBytes)
        #expect(try daemon.base.ctl(["backup", "relative.sqlite"]).status == 64)

        // The ledger at the backup moment, per queue: the queue's sequence counter in the copy.
        var snapshotSequence: [String: Int] = [:]
        for line in try sqlite3(file, "SELECT uid || '/' || app || ' ' || last FROM sequences;", readOnly: true).split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2 { snapshotSequence[String(parts[0])] = Int(parts[1]) }
        }

        // Restore as docs/operations.md says: stop, copy over storekitd.sqlite, remove -wal/-shm, start.
        daemon.terminate()
        let database = daemon.databasePath
        try FileManager.default.removeItem(atPath: database)
        try FileManager.default.copyItem(atPath: file, toPath: database)
        try? FileManager.default.removeItem(atPath: database + "-wal")
        try? FileManager.default.removeItem(atPath: database + "-shm")
        try daemon.start()
        let restored = try daemon.base.transactions()
        let restoredByID = Dictionary(uniqueKeysWithValues: restored.map { ($0.id, $0) })
        let finalByID = Dictionary(uniqueKeysWithValues: final.map { ($0.id, $0) })

        var problems: [String] = []
        // Everything acknowledged before the backup started is there, at least as far along.
        for (id, told) in toldBefore {
            guard let row = restoredByID[String(id)] else {
                problems.append("acknowledged transaction \(id) is not in the backup")
                continue
            }
            if !ToldLedger.reaches(row.state, from: told.state) { problems.append("\(id) is \(row.state), told \(told.state.name)") }
            if told.finished && !row.finished { problems.append("\(id) was finished before the backup, not in it") }
        }
        for row in listedBefore where restoredByID[row.id] == nil { problems.append("\(row.id), listed before the backup, is missing") }
        // Nothing from after the backup finished.
        let afterIDs = Set(listedAfter.map(\.id))
        for row in restored where !afterIDs.contains(row.id) { problems.append("\(row.id) was made after the backup finished") }
        // Identical to the original as of the copy's sequence counters: a row unchanged since then
        // is equal, a row changed since then was at an earlier sequence in the copy.
        for original in final {
            let queue = "\(original.uid)/\(original.app)"
            let cut = snapshotSequence[queue] ?? 0
            let copy = restoredByID[original.id]
            if original.sequence <= cut {
                if copy != original { problems.append("\(original.id): copy \(copy?.description ?? "missing") ≠ original \(original)") }
            } else if let copy, copy.sequence > cut {
                problems.append("\(original.id): copy at sequence \(copy.sequence), after the cut \(cut)")
            }
        }
        for row in restored where finalByID[row.id] == nil { problems.append("\(row.id) is in the copy but not in the original") }
        #expect(problems.isEmpty, "\(problems.prefix(20).joined(separator: "\n"))")

        // The restored daemon takes new purchases with new ids, after the copy's.
        let client = try Client(daemon.base)
        _ = try client.subscribe()
        let next = try client.buy(Sample.coins)
        #expect(restored.allSatisfy { UInt64($0.id)! < next.id })
    }

    /// A backup reads the database on another connection, so it needs every acknowledged change
    /// committed to SQLite first. While that commit fails (here on purpose, through a test hook),
    /// the backup is refused with the reason, while purchases and reads go on; the loop tries
    /// again by itself, and once commits work the changes reach the database and the backup.
    @Test func backupIsRefusedWhileSQLiteCannotCommit() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        daemon.extraArguments = ["--enable-test-hooks"]
        try daemon.start()
        let buyer = try Client(daemon)
        _ = try buyer.subscribe()
        var acknowledged: [UInt64] = []
        for _ in 0..<3 { acknowledged.append(try buyer.buy(Sample.coins).id) }
        func committedCount() throws -> Int {
            Int(try sqlite3(daemon.databasePath, "SELECT count(*) FROM transactions;", readOnly: true)) ?? -1
        }
        #expect(eventually(timeout: 5) { (try? committedCount()) == acknowledged.count })

        let hooks = try TestHooks(daemon)
        func failFlushes(_ arguments: [String]) throws -> ResultCode { try hooks.run("debug-fail-saves", arguments) }
        #expect(try failFlushes(["on"]) == .invalidArgument)
        #expect(try failFlushes(["60000"]) == .ok)
        acknowledged.append(try buyer.buy(Sample.coins).id)   // in the commit log only

        let file = daemon.directory.file("backup-\(UUID().uuidString).sqlite")
        let refused = try daemon.ctl(["backup", file])
        #expect(refused.status == 1 && refused.stderr.contains("could not save"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: file))
        // Reads go through the serving connection and need no commit; purchases go on.
        #expect(try daemon.ctl(["status"]).status == 0)
        #expect(Set(try daemon.transactions().map(\.id)) == Set(acknowledged.map(String.init)))
        acknowledged.append(try buyer.buy(Sample.coins).id)
        #expect(try committedCount() == 3)

        // Commits fail for 2.5 s more, then work again: with no request at all, the loop's next
        // try commits everything. It tries again every second, so it failed two or three more
        // times meanwhile, and says the same failure at most every 10 s: once.
        let failingUntil = Date().addingTimeInterval(2.5)
        #expect(try failFlushes(["2500"]) == .ok)
        #expect(eventually { (try? committedCount()) == acknowledged.count },
                "the loop did not commit by itself: \((try? committedCount()) ?? -1) rows")
        #expect(Date() > failingUntil, "committed while commits still failed")
        #expect(eventually { daemon.log().contains("Saved to \(daemon.databasePath) again") })
        let failures = daemon.log().components(separatedBy: "\n").filter { $0.contains("Failed to save to") }
        #expect(failures.count == 1, "\(failures)")
        #expect(failures.first?.contains("saves fail on purpose") == true)
        let answer = try #require(try daemon.ctlJSON(["backup", file]) as? [String: Any])
        #expect(answer["transactions"] as? Int == acknowledged.count)
        let stored = try sqlite3(file, "SELECT id FROM transactions ORDER BY id;", readOnly: true)
        #expect(stored == acknowledged.sorted().map(String.init).joined(separator: "\n"))
    }
}
