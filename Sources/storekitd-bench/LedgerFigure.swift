import Foundation

/// One row of the PostgreSQL table: the daemon on a PostgreSQL ledger beside the same daemon on
/// its SQLite ledger and the Redis peer, all three measured in the same run, one after the other.
/// No targets: these figures are reported, not required.
struct LedgerFigure {
    let name: String
    let unit: String
    let postgres: Double
    let sqlite: Double?
    let redis: Double?

    var overSQLite: Double? { sqlite.map { $0 > 0 ? postgres / $0 : 0 } }
    var overRedis: Double? { redis.map { $0 > 0 ? postgres / $0 : 0 } }

    static func printTable(_ figures: [LedgerFigure], notes: [String]) {
        say("\nThe PostgreSQL ledger (--only postgres), beside SQLite and the Redis peer in this run:")
        let header = ["figure", "unit", "postgresql", "sqlite", "redis", "pg/sqlite", "pg/redis"]
        let rows = figures.map { figure in
            [figure.name, figure.unit, format(figure.postgres), figure.sqlite.map(format) ?? "-", figure.redis.map(format) ?? "-",
             figure.overSQLite.map { format($0) + "×" } ?? "-", figure.overRedis.map { format($0) + "×" } ?? "-"]
        }
        if !rows.isEmpty { Report.printColumns(header, rows) }
        for note in notes { say(note) }
    }

    /// The rows as JSON objects, appended to bench-results.json's list after the main figures.
    static func json(_ figures: [LedgerFigure], notes: [String]) -> [[String: Any]] {
        func value(_ number: Double?) -> Any { number.map { $0 as Any } ?? NSNull() }
        return figures.map { figure in
            [
                "figure": "PostgreSQL ledger: " + figure.name, "unit": figure.unit, "postgresql": figure.postgres,
                "sqlite": value(figure.sqlite), "redis": value(figure.redis),
                "postgresql_over_sqlite": value(figure.overSQLite), "postgresql_over_redis": value(figure.overRedis),
            ]
        } + (notes.isEmpty ? [] : [["figure": "PostgreSQL ledger: notes", "notes": notes]])
    }
}
