import Foundation

/// One row of the PostgreSQL table: the daemon on a PostgreSQL ledger beside the same daemon on
/// its SQLite ledger and the Redis peer, all three measured in the same run, one after the other.
/// A row with `minimumOverSQLite` has a target (issue 33: the PostgreSQL ledger's purchase cycles
/// at least that share of SQLite's); the others are reported, not required.
struct LedgerFigure {
    let name: String
    let unit: String
    let postgres: Double
    let sqlite: Double?
    let redis: Double?
    var minimumOverSQLite: Double? = nil

    var overSQLite: Double? { sqlite.map { $0 > 0 ? postgres / $0 : 0 } }
    var overRedis: Double? { redis.map { $0 > 0 ? postgres / $0 : 0 } }
    var target: String { minimumOverSQLite.map { "≥ \(format($0))× sqlite" } ?? "report" }
    var met: Bool? {
        guard let minimumOverSQLite, let overSQLite else { return nil }
        return overSQLite >= minimumOverSQLite
    }

    static func printTable(_ figures: [LedgerFigure], notes: [String], commitRates: [CommitRate]) {
        say("\nThe PostgreSQL ledger (--only postgres), beside SQLite and the Redis peer in this run:")
        let header = ["figure", "unit", "postgresql", "sqlite", "redis", "pg/sqlite", "pg/redis", "target", "met"]
        let rows = figures.map { figure in
            [figure.name, figure.unit, format(figure.postgres), figure.sqlite.map(format) ?? "-", figure.redis.map(format) ?? "-",
             figure.overSQLite.map { format($0) + "×" } ?? "-", figure.overRedis.map { format($0) + "×" } ?? "-",
             figure.target, figure.met.map { $0 ? "yes" : "NO" } ?? "-"]
        }
        if !rows.isEmpty { Report.printColumns(header, rows) }
        if !commitRates.isEmpty { CommitRate.printTable(commitRates) }
        for note in notes { say(note) }
    }

    /// The rows as JSON objects, appended to bench-results.json's list after the main figures.
    static func json(_ figures: [LedgerFigure], notes: [String], commitRates: [CommitRate]) -> [[String: Any]] {
        func value(_ number: Double?) -> Any { number.map { $0 as Any } ?? NSNull() }
        return figures.map { figure in
            [
                "figure": "PostgreSQL ledger: " + figure.name, "unit": figure.unit, "postgresql": figure.postgres,
                "sqlite": value(figure.sqlite), "redis": value(figure.redis),
                "postgresql_over_sqlite": value(figure.overSQLite), "postgresql_over_redis": value(figure.overRedis),
                "target": figure.target, "met": figure.met.map { $0 as Any } ?? NSNull(),
            ]
        } + commitRates.map { rate in
            [
                "figure": "PostgreSQL ledger: cycles over PostgreSQL's own commits, \(rate.clients) client\(rate.clients == 1 ? "" : "s")",
                "clients": rate.clients, "pgbench_commits_per_second": rate.commits, "ledger_cycles_per_second": rate.cycles,
                "cycles_over_commits": rate.cyclesOverCommits, "ledger_commits_over_commits": rate.ledgerCommitsOverCommits,
            ]
        } + (notes.isEmpty ? [] : [["figure": "PostgreSQL ledger: notes", "notes": notes]])
    }
}

/// PostgreSQL's own commit rate at a number of clients (pgbench, one `INSERT` per transaction,
/// autocommit, synchronous_commit = on) beside the PostgreSQL ledger's purchase cycles at as many
/// clients in the same run: what share of the server's commits the daemon turns into purchases.
/// A purchase cycle is two of the ledger's commits (the payment, the finish), so the cycles are
/// given over the commits as they are and doubled.
struct CommitRate {
    let clients: Int
    /// pgbench's transactions per second, each one `INSERT` and its commit.
    let commits: Double
    /// The PostgreSQL ledger's purchase cycles per second at `clients` clients.
    let cycles: Double

    var cyclesOverCommits: Double { commits > 0 ? cycles / commits : 0 }
    var ledgerCommitsOverCommits: Double { 2 * cyclesOverCommits }

    static func printTable(_ rates: [CommitRate]) {
        say("\nPostgreSQL's own commit rate (pgbench, one INSERT per transaction, synchronous_commit = on) and the ledger's cycles:")
        let header = ["clients", "pgbench commits/s", "ledger cycles/s", "cycles/commits", "cycles×2/commits"]
        Report.printColumns(header, rates.map { rate in
            [String(rate.clients), format(rate.commits), format(rate.cycles), format(rate.cyclesOverCommits) + "×",
             format(rate.ledgerCommitsOverCommits) + "×"]
        })
    }
}
