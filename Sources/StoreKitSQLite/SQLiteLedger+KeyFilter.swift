import CSQLite
import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

// The payment-key filter: proves most new payment keys new without an index lookup.

extension SQLiteLedger {
    // MARK: The payment-key filter

    /// Starts building, on a thread with its own read connection, a filter of the payment keys that
    /// proves most new keys new without an index lookup (PaymentKeyFilter.swift). For the daemon,
    /// after opening. The build needs every acknowledged key committed: while anything is not
    /// (between saves, or units of work lost with SQLite's transaction), it starts after the
    /// next save instead. A build that fails is tried again after `keyFilterRetry` seconds.
    public func startPaymentKeyFilter() {
        keyFilterWanted = true
        startKeyFilterIfReady()
    }

    /// Seconds between attempts to build the filter after one failed.
    static let keyFilterRetry: Int64 = 30

    /// Starts a build if one is wanted, none runs or is due again, and everything is committed
    /// (then the build's reads see every key but those inserted from here on, which
    /// `noteKeyInserted` keeps for it).
    func startKeyFilterIfReady(capacity: Int = 0) {
        guard keyFilterWanted, keyFilterBuild == nil, !sqliteOpen, !needsCatchUp, held.isEmpty else { return }
        let now = Monotonic.milliseconds()
        if keyFilter == nil, let failed = keyFilterFailedAt, now - failed < Self.keyFilterRetry * 1000 { return }
        keyFilter = nil
        keysDuringBuild.removeAll()
        keyFilterBuild = PaymentKeyFilterBuild(path: path, minimumCapacity: capacity, chunk: keyFilterChunk,
                                               beforeReading: keyFilterBuildHook)
    }

    func noteKeyInserted(_ key: StoredPaymentKey) {
        if keyFilter != nil {
            keyFilter?.insert(key)
        } else if keyFilterBuild != nil {
            keysDuringBuild.append(key)
        }
    }

    /// The filter, once the build has finished (nil while it runs, or if it failed).
    func currentKeyFilter() -> PaymentKeyFilter? {
        if let build = keyFilterBuild {
            switch build.take() {
            case .building:
                return nil
            case .built(var filter):
                for key in keysDuringBuild { filter.insert(key) }
                keyFilter = filter
                keyFilterFailedAt = nil
            case .failed, .taken:
                keyFilterFailedAt = Monotonic.milliseconds()
            }
            keyFilterBuild = nil
            keysDuringBuild = []
        }
        return keyFilter
    }

    /// After a save (nothing uncommitted): a filter too full to be of use is built again, larger;
    /// one that could not start or failed is tried again.
    func keepKeyFilterUseful() {
        _ = currentKeyFilter()
        if let filter = keyFilter {
            if filter.isFull { keyFilter = nil; startKeyFilterIfReady(capacity: 2 * filter.count) }
        } else {
            startKeyFilterIfReady()
        }
    }

    /// Writes the held rows into the SQLite transaction, oldest first.
}
