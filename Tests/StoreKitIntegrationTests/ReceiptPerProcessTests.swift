import Foundation
import StoreKitTestSupport
import Testing

/// Two processes of one user and app share one receipt file (an observer, and a purchase beside
/// it): each fetches a receipt before it tells its observer of a batch and writes it there, so
/// one may write a receipt it fetched earlier just after the other wrote a newer one. An app
/// validating the file then missed its own purchase and refused it (7 of 120 purchases). Each
/// batch is now validated against the receipt fetched for it.
@Suite("one user's processes never undercut each other")
struct ReceiptPerProcessTests {
    @Test("an observer beside five buyers, 120 purchases of one user: no purchase is refused for a receipt that does not list it; each run waits for its own; every one is granted once",
          .enabled(if: ProcessInfo.processInfo.environment["STOREKIT_SANITIZER"] == nil,
                   "120 purchases by four processes: minutes under a sanitizer"))
    func observerBesidePurchases() throws {
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let ledger = daemon.directory.file("ledger")
        let observer = try RunningProcess(Paths.binary("storekit-example-app"), ["--ledger", ledger, "observe"],
                                          environment: daemon.clientEnvironment)
        defer { observer.stop() }
        #expect(eventually { ((try? daemon.ctlJSON(["status"])) as? [String: Any])?["observers"] as? Int == 1 },
                "the observer did not subscribe: \(observer.errorOutput)")
        // Five buyers at a time beside the observer: six processes writing one receipt file.
        let refusals = LockedValue<[String]>([])
        let done = LockedValue<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 5) { buyer in
            for index in 1...24 {
                do {
                    let result = try daemon.app(["buy", Sample.coins], ledger: ledger)
                    if result.status != 0 {
                        refusals.withLock { $0.append("buyer \(buyer) purchase \(index): exit \(result.status): \(result.stdout.suffix(300))") }
                    }
                    // The transaction this run made, as it says when it exits.
                    let own = events(result.stdout).filter { $0["event"] as? String == "purchaseDone" }
                        .compactMap { $0["transactionIdentifier"] as? String }
                    done.withLock { $0 += own }
                } catch {
                    refusals.withLock { $0.append("buyer \(buyer) purchase \(index): \(error)") }
                }
            }
        }
        let refused = refusals.withLock { $0 }
        #expect(refused.isEmpty, "\(refused.count) of 120 purchases refused:\n\(refused.prefix(3).joined(separator: "\n"))")
        // Each run waited for its own purchase, not another process's of the same product.
        let own = done.withLock { $0 }
        let twice = Dictionary(grouping: own) { $0 }.filter { $0.value.count > 1 }.keys.prefix(3)
        #expect(own.count == 120 && Set(own).count == 120, "runs named \(Set(own).count) distinct transactions of \(own.count): \(Array(twice))")
        let granted = (try? String(contentsOfFile: ledger, encoding: .utf8))?.split(separator: "\n") ?? []
        #expect(granted.count == 120, "the ledger holds \(granted.count) grants")
        #expect(Set(granted.map { $0.split(separator: " ").first ?? "" }).count == granted.count, "a purchase granted twice")
        #expect(!observer.output.contains("\"refused\""), "the observer refused: \(observer.output.suffix(500))")
    }
}
