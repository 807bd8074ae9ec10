import StoreKitPosix
import StoreKitPostgres
import StoreKitWire

// `storekitctl migrate CONNINFO` (docs/fleet.md, "Moving over"): this daemon, which owns the
// SQLite file and its commit log, copies its ledger into a PostgreSQL database for the fleet
// (PostgresLedger+Import.swift) and keeps serving from SQLite; the admin then sets `Database=`
// and restarts. The file is read on a read-only connection: the copy writes nothing to it.

extension ControlCommands {
    /// Copies the SQLite ledger, as committed before this unit of work, into the PostgreSQL
    /// database `conninfo=` names, as this host (`HostName=`, `AccountFrom=`). Never throws: a
    /// failed copy fails this command only (and leaves nothing in PostgreSQL).
    func migrate(_ arguments: Arguments) -> Result {
        guard let conninfo = arguments["conninfo"], !conninfo.isEmpty else {
            return .failure(.invalidArgument, "migrate needs a CONNINFO (a libpq connection string)")
        }
        let store = engine.store
        guard !store.isDatabaseServer else {
            return .failure(.invalidArgument, "the daemon is already on \(engine.store.path); migrate copies an SQLite ledger")
        }
        if let missing = PostgresLedger.libraryProblem {
            return .failure(.invalidArgument, "migrate needs libpq: \(missing)")
        }
        let target = PostgresLedger.describe(conninfo)
        if let problem = PostgresLedger.problem(with: conninfo) {
            return .failure(.invalidArgument, "bad connection string: \(ConnectionSecrets.redacting(problem, of: conninfo))")
        }
        let member = configuration.fleetMember
        let started = Monotonic.milliseconds()
        let report: PostgresLedger.ImportReport
        let schema: String
        do {
            let ledger = try PostgresLedger(conninfo: PostgresLedger.withConnectTimeout(conninfo), member: member)
            defer { ledger.close() }
            schema = ledger.openReport
            // The copy runs in the serving loop: the watchdog is pinged while it makes progress.
            report = try ledger.importLedger(from: store) { [server] in
                let now = Monotonic.milliseconds()
                if let interval = server.notifier.watchdogPingInterval, now - server.lastWatchdog >= interval {
                    server.notifier.watchdog()
                    server.lastWatchdog = now
                }
            }
        } catch {
            let message = ConnectionSecrets.redacting(error.message, of: conninfo)
            server.logger.error("Migration of \(store.path) to \(target) failed: \(message)", id: .storageFailure)
            let code: ResultCode = switch error.code {
            case .io, .busy, .full, .corrupt: .storageFailure
            default: .invalidArgument
            }
            return .failure(code, "migrate to \(target) failed: \(message)")
        }
        let milliseconds = Monotonic.milliseconds() - started
        let rows = report.copied + report.present
        let message = report.copied == 0
            ? "nothing copied: all \(rows) rows were already in \(target)"
            : "copied \(report.copied) rows into \(target) (\(report.present) already there); "
                + "set Database= and restart storekitd to serve from it"
        server.logger.notice("Migrated \(store.path) to \(target) as host \(member.host): \(report.copied) rows copied, "
                             + "\(report.present) already there, verified (SHA-256 \(report.checksum)), \(milliseconds) ms")
        return Result(json: .object([
            ("database", .string(target)),
            ("host", .string(member.host)),
            ("accountFrom", .string(member.accountFrom.rawValue)),
            ("schema", .string(schema)),
            ("tables", .array(report.tables.map { table in
                .object([
                    ("table", .string(table.name)),
                    ("rows", .int(Int64(table.rows))),
                    ("copied", .int(Int64(table.copied))),
                    ("present", .int(Int64(table.present))),
                    ("checksum", .optional(table.checksum)),
                ])
            })),
            ("copied", .int(Int64(report.copied))),
            ("present", .int(Int64(report.present))),
            ("checksum", .string(report.checksum)),
            ("settingsKept", .array(report.settingsKept.map { .string($0) })),
            ("source", .string(store.path)),
            ("milliseconds", .int(milliseconds)),
            ("message", .string(message)),
        ]))
    }
}
