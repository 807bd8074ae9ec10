import FoundationEssentials
import StoreKitWire

/// `storekitctl backup FILE`: an online, consistent copy of the daemon's database.
struct BackupCommand: Subcommand {
    static let name = "backup"
    static let summary = "copy the live database into FILE (absolute path, must not exist)"
    static let usage = """
        Usage: storekitctl backup FILE [-o json]

        Copies the daemon's database into FILE while it keeps serving (SQLite online backup): the
        copy holds every transaction committed before the command started. The daemon writes FILE,
        so FILE must be an absolute path the daemon may write (with the shipped unit: a path under
        its state directory), and it must not exist: a backup never overwrites. The copy is checked
        with PRAGMA integrity_check before the answer (path, bytes, transactions) is printed.

        Restore: stop the daemon, copy FILE over storekitd.sqlite in the state directory, remove
        storekitd.sqlite-wal and storekitd.sqlite-shm, start the daemon (docs/operations.md).
        """
    let path: String
    init(_ arguments: inout ArgumentList) throws(UsageError) {
        path = try arguments.positional("FILE")
        guard path.hasPrefix("/") else {
            throw UsageError("FILE must be an absolute path (the daemon writes it, from its own working directory): \(path)")
        }
    }
    var request: (command: ControlCommand, arguments: [String]) { (.backup, ["path=\(path)"]) }
    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}
