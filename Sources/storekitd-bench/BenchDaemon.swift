import StoreKitPosix
#if canImport(Glibc)
import Glibc
#endif

/// storekitd on temporary directories, started the way systemd would (NOTIFY_SOCKET), so that
/// the time to READY=1 is measured exactly. `dropIn` (e.g. a `[Store]` section naming a
/// PostgreSQL ledger) goes into `storekitd.conf.d/`.
final class BenchDaemon {
    let directory: String
    let binary: String
    let appCount: Int
    var pid: pid_t = 0
    var clientSocket: String { directory + "/run/storekitd.sock" }
    var controlSocket: String { directory + "/run/control.sock" }
    var databasePath: String { directory + "/state/storekitd.sqlite" }

    init(directory: String, binary: String, appCount: Int, dropIn: String? = nil) throws {
        self.directory = directory
        self.binary = binary
        self.appCount = appCount
        mkdir(directory + "/config", 0o755)
        mkdir(directory + "/config/apps.d", 0o755)
        mkdir(directory + "/state", 0o700)
        try write(directory + "/config/catalog.storekit", benchCatalog)
        // Limits raised for the fan-out figure; per-transaction info lines are not logged (notice),
        // as a production journal would rate-limit them anyway.
        try write(directory + "/config/storekitd.conf", """
            [Daemon]
            LogLevel=notice
            [Limits]
            MaxConnections=20000
            MaxConnectionsPerUID=20000
            OutputHighWaterMark=1G
            # The replay figure queues 100,000 signed transactions (~3.3 KB each) to one observer.
            OutputBudget=1G
            # The throughput figures are one uid's; the replay figure holds 100,000 unfinished.
            MaxRequestsPerUIDPerSecond=0
            MaxUnfinishedPerQueue=1000000
            """)
        if let dropIn {
            mkdir(directory + "/config/storekitd.conf.d", 0o755)
            try write(directory + "/config/storekitd.conf.d/bench.conf", dropIn)
        }
        for index in 0..<appCount {
            try write(directory + "/config/apps.d/bench-\(index).conf", "[App]\nID=bench.app\(index)\nCatalog=catalog.storekit\n")
        }
    }

    static func appID(_ index: Int) -> String { "bench.app\(index)" }

    /// Starts the daemon; returns milliseconds from exec to READY=1.
    @discardableResult
    func start() throws -> Double {
        let notifyPath = directory + "/notify.sock"
        let notify = try UnixSocket.bindDatagram(path: notifyPath)
        defer { UnixSocket.close(notify) }
        let environment = currentEnvironment().filter { !$0.hasPrefix("NOTIFY_SOCKET=") } + ["NOTIFY_SOCKET=" + notifyPath]
        let started = monotonicNanoseconds()
        pid = try spawn(binary, [binary, "--config", directory + "/config/storekitd.conf", "--runtime-dir",
                                 directory + "/run", "--state-dir", directory + "/state", "--log-target", "stderr"],
                        environment: environment)
        while true {
            guard let datagram = UnixSocket.receiveDatagram(notify, timeoutMilliseconds: 30_000) else {
                throw BenchError("storekitd did not send READY=1 within 30 s (try it by hand with the config in \(directory))")
            }
            if datagram.split(separator: "\n").contains("READY=1") {
                return Double(monotonicNanoseconds() - started) / 1e6
            }
        }
    }

    func stop() {
        guard pid > 0 else { return }
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        pid = 0
    }
}

func write(_ path: String, _ text: String) throws {
    guard let file = fopen(path, "w") else { throw BenchError("cannot write \(path)") }
    fputs(text, file)
    fclose(file)
}

let benchCatalog = """
    {
      "identifier" : "BENCH", "nonRenewingSubscriptions" : [], "subscriptionGroups" : [],
      "products" : [
        { "displayPrice" : "0.99", "familyShareable" : false, "internalID" : "1", "localizations" : [
            { "description" : "Coins", "displayName" : "Coins", "locale" : "en_US" } ],
          "productID" : "bench.coins", "referenceName" : "Coins", "type" : "Consumable" },
        { "displayPrice" : "4.99", "familyShareable" : false, "internalID" : "2", "localizations" : [
            { "description" : "Pack", "displayName" : "Pack", "locale" : "en_US" } ],
          "productID" : "bench.pack", "referenceName" : "Pack", "type" : "NonConsumable" }
      ],
      "settings" : { "_storefront" : "USA", "_locale" : "en_US" },
      "version" : { "major" : 4, "minor" : 0 }
    }
    """
