/// `storekitctl migrate CONNINFO`: the daemon copies its SQLite ledger into PostgreSQL.
struct MigrateCommand: Subcommand {
    static let name = "migrate"
    static let summary = "copy the SQLite ledger into the PostgreSQL database CONNINFO (verified)"
    static let usage = """
        Usage: storekitctl migrate CONNINFO|- [-o json]

        The running daemon copies its SQLite ledger (everything acknowledged before the command)
        into the PostgreSQL database CONNINFO names (a libpq connection string, one argument:
        'host=/run/postgresql dbname=storekit' or postgresql:///storekit?host=/run/postgresql),
        as this host (HostName=, AccountFrom=), creating or upgrading the schema first. All of it
        is copied in one PostgreSQL transaction and verified there (counts, SHA-256 of the rows)
        before it commits; a conflict or a mismatch leaves nothing. Running it again copies only
        what is new. The SQLite file is not changed and the daemon keeps serving from it: set
        Database= to CONNINFO and restart storekitd to move over (docs/fleet.md).

        With - in place of CONNINFO, the connection string is read from the first line of standard
        input: a password in it then never shows in the process list (ps) as an argument would.
        """
    let conninfo: String
    init(_ arguments: inout ArgumentList) throws(UsageError) {
        let given = try arguments.positional("CONNINFO")
        guard given == "-" else {
            conninfo = given
            return
        }
        guard let line = readLine(strippingNewline: true), !line.isEmpty else {
            throw UsageError("migrate -: no connection string on standard input")
        }
        conninfo = line
    }
    var request: (command: String, arguments: [String]) { ("migrate", ["conninfo=\(conninfo)"]) }

    func renderTable(_ json: Any) -> String {
        guard let report = json as? [String: Any] else { return "\(json)\n" }
        var text = Table(columns: [("table", "table"), ("rows", "rows"), ("copied", "copied"), ("present", "present"),
                                   ("checksum", "checksum")]).render(report["tables"] ?? [])
        text += "\n" + renderKeyValues(report.filter { ["database", "host", "schema", "checksum"].contains($0.key) })
        if let kept = report["settingsKept"] as? [String], !kept.isEmpty {
            text += "settings kept as the database had them: " + kept.joined(separator: ", ") + "\n"
        }
        if let message = report["message"] as? String { text += message + "\n" }
        return text
    }
}
