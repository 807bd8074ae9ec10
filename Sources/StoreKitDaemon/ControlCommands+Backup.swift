import StoreKitEngine
import StoreKitLedger
import StoreKitWire

// `storekitctl backup FILE`: an online copy of the live database (see SQLiteLedger+Backup.swift).

extension ControlCommands {
    /// Writes a consistent copy of the database, as committed before this unit of work, to the
    /// absolute path `path=` (which must not exist), checks it and answers with what it holds.
    /// Never throws: a failed backup fails this command only, not the requests batched with it.
    func backup(_ arguments: Arguments) -> Result {
        guard let path = arguments["path"], !path.isEmpty else { return .failure(.invalidArgument, "backup needs a FILE") }
        guard path.hasPrefix("/") else {
            return .failure(.invalidArgument, "the backup file must be an absolute path (the daemon writes it): \(path)")
        }
        let report: BackupReport
        do {
            report = try engine.store.backup(to: path)
        } catch where error.code == .unsupported {
            return .failure(.invalidArgument, error.message)
        } catch {
            let code: ResultCode
            switch error.code {
            case .full: code = .storageFull
            case .other: code = .invalidArgument
            default: code = .storageFailure
            }
            server.logger.error("Backup of \(engine.store.path) to \(path) failed: \(error.message)", id: .storageFailure)
            return .failure(code, "backup to \(path) failed: \(error.message)")
        }
        server.logger.notice("Backed up \(engine.store.path) to \(path): \(report.transactions) transactions, "
                             + "\(report.bytes) bytes, integrity ok, \(report.milliseconds) ms")
        return Result(json: .object([
            ("path", .string(report.path)),
            ("bytes", .int(Int64(report.bytes))),
            ("pages", .int(Int64(report.pages))),
            ("transactions", .int(Int64(report.transactions))),
            ("unfinishedTransactions", .int(Int64(report.unfinishedTransactions))),
            ("highestSequence", .int(Int64(report.highestSequence))),
            ("integrity", .string("ok")),
            ("milliseconds", .int(Int64(report.milliseconds))),
            ("database", .string(engine.store.path)),
        ]))
    }
}
