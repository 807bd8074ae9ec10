import CPosix
import Synchronization
import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

// Signals (stop, reload), the background integrity check, and a failed sync of the commit log.

extension Server {
    func handleSignals() {
        while let signal = signals.next() {
            switch signal {
            case SIGTERM, SIGINT:
                logger.notice("Received \(signal == SIGTERM ? "SIGTERM" : "SIGINT"), shutting down")
                running = false
            case SIGHUP:
                reload()
            default:
                break
            }
        }
    }

    func reload() {
        guard let reloader else { return }
        notifier.reloading()
        switch reloader(configuration) {
        case .success(let (newConfiguration, catalogs)):
            if newConfiguration.adminGroup != configuration.adminGroup {
                access = AccessPolicy(adminGroup: newConfiguration.adminGroup)
                logger.notice("AdminGroup= is now \(newConfiguration.adminGroup ?? "unset"): the control socket serves "
                              + "root, the daemon's user\(newConfiguration.adminGroup.map { " and members of \($0)" } ?? "")", id: .reloaded)
            }
            configuration = newConfiguration
            observerUIDs = newConfiguration.observerUIDs()
            engine.limits = Self.engineLimits(newConfiguration)
            if newConfiguration.familyGroups != engine.families {
                engine.families = newConfiguration.familyGroups
                familiesDueAt = Monotonic.milliseconds()
            }
            engine.replaceCatalogs(catalogs)
            proof.forgetReceipts()   // a product's kind or an app's version may have changed
            proof.forgetIdentities()
            logger.notice("Reloaded configuration: \(catalogs.count) app\(catalogs.count == 1 ? "" : "s")", id: .reloaded)
            logHostedContent()
            notifier.ready(status: statusLine())
        case .failure(let failure):
            logger.error("Reload failed, keeping the running configuration: \(failure.message)", id: .reloaded)
            notifier.ready(status: "Reload failed, running the old configuration: \(failure.message)")
        }
    }

    /// One line per product with hosted content: what was listed, and how much was read again.
    func logHostedContent() {
        for app in configuration.apps {
            for content in app.hostedContent {
                logger.info("Hosted content of \(app.id): \(content.summary)", fields: [("STOREKIT_APP", app.id),
                                                                                      ("STOREKIT_PRODUCT", content.productID)])
            }
        }
    }

    /// Reports from background threads (the integrity check), handed over under a lock.
    final class BackgroundResults: Sendable {
        private let integrityFailure = Mutex<String??>(nil)

        func setIntegrity(_ failure: String?) {
            integrityFailure.withLock { $0 = .some(failure) }
        }

        func takeIntegrity() -> String?? {
            integrityFailure.withLock { value in
                defer { value = nil }
                return value
            }
        }
    }

    /// Runs `PRAGMA integrity_check` on a background thread; a failure stops new writes, loudly.
    public func startIntegrityCheck() {
        guard let check = engine.store.integrityCheck else { return }   // PostgreSQL checks its own pages (data checksums, amcheck)
        let results = backgroundResults
        let wakeup = self.wakeup
        NamedThread.start("storekitd-check") {
            let failure: String?
            do {
                failure = try check()
            } catch {
                failure = "\(error)"
            }
            results.setIntegrity(failure)
            wakeup.signal()
        }
    }

    func handleBackgroundResults() {
        if let failure = ledger.syncFailure, fatalFailure == nil {
            // The kernel may have dropped the pages it could not write: nothing written since the
            // last good sync may be acknowledged, and a retry could report success falsely.
            // Starting over re-reads the log from the disk.
            let unacknowledged = gate.discardAll()
            fatalFailure = "\(failure) (\(ledger.commitLogPath)); \(unacknowledged) units of work are not acknowledged"
            running = false
            return
        }
        guard let result = backgroundResults.takeIntegrity() else { return }
        if let failure = result {
            writesStoppedReason = "integrity check failed"
            logger.error("Database \(ledger.path) failed its integrity check, new writes are stopped: \(failure)",
                         id: .integrityFailure)
            notifier.status(statusLine())
        } else {
            logger.info("Integrity check of \(ledger.path) passed", id: .recovery)
        }
    }
}
