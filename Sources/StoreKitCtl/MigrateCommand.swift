import FoundationEssentials
import StoreKitWire

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
    var request: (command: ControlCommand, arguments: [String]) { (.migrate, ["conninfo=\(conninfo)"]) }

    func renderTable(_ json: JSONValue) -> String {
        guard case .object(let report) = json else { return json.serialized() + "\n" }
        var text = Table(columns: [("table", "table"), ("rows", "rows"), ("copied", "copied"), ("present", "present"),
                                   ("checksum", "checksum")]).render(json["tables"] ?? .array([]))
        text += "\n" + renderKeyValues(.object(report.filter { ["database", "host", "schema", "checksum"].contains($0.0) }))
        if case .array(let kept)? = json["settingsKept"], !kept.isEmpty {
            text += "settings kept as the database had them: " + kept.map { $0.string ?? $0.serialized() }.joined(separator: ", ") + "\n"
        }
        if let message = json["message"]?.string { text += message + "\n" }
        return text
    }
}
