@testable import StoreKitPostgres
import StoreKitLedger
import StoreKitTestSupport
import Testing

/// `settings(keys:)`: many settings read at once (what an app receipt of many subscription periods
/// needs, on the serving loop): the same answer as one read per key, in one round trip.
@Suite(.enabled(if: PostgresServer.unavailableReason == nil, Comment(rawValue: PostgresServer.unavailableReason ?? "")))
struct SettingsBatchTests {
    @Test("settings(keys:) answers as setting(_:) does key by key, awkward keys included, in one round trip whatever their number")
    func oneRoundTrip() throws {
        let ledger = try PostgresLedger(conninfo: try PostgresServer.shared().freshConnectionString(label: "settingsbatch"))
        defer { ledger.close() }
        let awkward = ["k \"quoted\"", "back\\slash", "{braces,comma}", "spaced key", "ünïcode", "", "quote\"\u{301} and backslash\\\u{301}"]
        var written: [String: String] = [:]
        try ledger.begin()
        for index in 0..<500 where index % 3 != 0 {
            written["offer.\(index)"] = "value \(index)"
            try ledger.setSetting("offer.\(index)", "value \(index)")
        }
        for (index, key) in awkward.enumerated() {
            written[key] = "awkward \(index)"
            try ledger.setSetting(key, "awkward \(index)")
        }
        try ledger.commit()

        let keys = (0..<500).map { "offer.\($0)" } + awkward + ["missing", "offer.1\""]
        let before = ledger.connection.roundTrips
        let found = try ledger.settings(keys: keys)
        #expect(ledger.connection.roundTrips - before == 1)
        #expect(found == written)
        var oneByOne: [String: String] = [:]
        for key in keys { if let value = try ledger.setting(key) { oneByOne[key] = value } }
        #expect(found == oneByOne)
        #expect(try ledger.settings(keys: []).isEmpty)
    }
}
