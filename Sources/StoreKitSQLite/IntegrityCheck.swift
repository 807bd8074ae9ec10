import StoreKitLedger
/// The full `PRAGMA integrity_check`, run on its own read-only connection so that it can run on a
/// background thread while the serving loop keeps writing (WAL lets both proceed).
public enum IntegrityCheck {
    /// Returns nil when the database is intact, else SQLite's first complaints.
    public static func run(path: String) throws(LedgerError) -> String? {
        let database = try SQLiteDatabase(path: path, readOnly: true)
        let result = try database.scalarText("PRAGMA integrity_check(20)") ?? "no answer"
        return result == "ok" ? nil : result
    }
}
