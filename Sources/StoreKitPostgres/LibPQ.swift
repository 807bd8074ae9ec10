import CPostgres
import StoreKitLedger
#if canImport(Glibc)
import Glibc
#endif

/// libpq's functions (libpq 14 or later: pipeline mode), loaded when PostgreSQL is first needed
/// rather than when storekitd starts.
///
/// Most daemons keep their ledger in SQLite. Linked, libpq would load itself and the twenty
/// libraries it needs (OpenSSL's libssl, Kerberos, LDAP, SASL, GnuTLS, …) into every one of them:
/// 3.6 MB of the idle daemon's 32.9 MB resident set, measured. As systemd does with its optional
/// libraries, storekitd opens `libpq.so.5` with `dlopen` the first time a connection string is
/// checked or a connection made: a PostgreSQL ledger, `migrate`, a fleet's listener. Without the
/// library (Debian's package libpq5), those say so; SQLite works as before.
///
/// The header (`CPostgres`) still gives the types and constants; nothing links the functions, so
/// a call that does not go through here fails to link.
struct LibPQ: @unchecked Sendable {   // immutable: C function pointers into a library never unloaded
    /// The library's name, as its package installs it.
    static let soname = "libpq.so.5"

    /// Loaded on first use, once per process; the reason when it could not be.
    static let shared: Result<LibPQ, LedgerError> = load(soname)

    /// libpq, or why it cannot be used.
    static func loaded() throws(LedgerError) -> LibPQ { try shared.get() }

    let connectdb: @convention(c) (UnsafePointer<CChar>?) -> OpaquePointer?
    let finish: @convention(c) (OpaquePointer?) -> Void
    let status: @convention(c) (OpaquePointer?) -> ConnStatusType
    let errorMessage: @convention(c) (OpaquePointer?) -> UnsafeMutablePointer<CChar>?
    let setNoticeProcessor: @convention(c) (OpaquePointer?, PQnoticeProcessor?, UnsafeMutableRawPointer?) -> PQnoticeProcessor?
    let socket: @convention(c) (OpaquePointer?) -> Int32
    let consumeInput: @convention(c) (OpaquePointer?) -> Int32
    let notifies: @convention(c) (OpaquePointer?) -> UnsafeMutablePointer<PGnotify>?
    let freemem: @convention(c) (UnsafeMutableRawPointer?) -> Void
    let execParams: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32, UnsafePointer<Oid>?,
                                    UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?, Int32) -> OpaquePointer?
    let execPrepared: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32, UnsafePointer<UnsafePointer<CChar>?>?,
                                      UnsafePointer<Int32>?, UnsafePointer<Int32>?, Int32) -> OpaquePointer?
    let prepare: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, Int32, UnsafePointer<Oid>?) -> OpaquePointer?
    let clear: @convention(c) (OpaquePointer?) -> Void
    let resultStatus: @convention(c) (OpaquePointer?) -> ExecStatusType
    let ntuples: @convention(c) (OpaquePointer?) -> Int32
    let nfields: @convention(c) (OpaquePointer?) -> Int32
    let getisnull: @convention(c) (OpaquePointer?, Int32, Int32) -> Int32
    let getvalue: @convention(c) (OpaquePointer?, Int32, Int32) -> UnsafeMutablePointer<CChar>?
    let cmdTuples: @convention(c) (OpaquePointer?) -> UnsafeMutablePointer<CChar>?
    let cmdStatus: @convention(c) (OpaquePointer?) -> UnsafeMutablePointer<CChar>?
    let resultErrorMessage: @convention(c) (OpaquePointer?) -> UnsafeMutablePointer<CChar>?
    let resultErrorField: @convention(c) (OpaquePointer?, Int32) -> UnsafeMutablePointer<CChar>?
    let conninfoParse: @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?)
        -> UnsafeMutablePointer<PQconninfoOption>?
    let conninfoFree: @convention(c) (UnsafeMutablePointer<PQconninfoOption>?) -> Void
    // Pipeline mode (libpq 14 and later): statements sent together, their results read after.
    let enterPipelineMode: @convention(c) (OpaquePointer?) -> Int32
    let exitPipelineMode: @convention(c) (OpaquePointer?) -> Int32
    let pipelineSync: @convention(c) (OpaquePointer?) -> Int32
    let sendQueryParams: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32, UnsafePointer<Oid>?,
                                         UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?, Int32) -> Int32
    let sendQueryPrepared: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32, UnsafePointer<UnsafePointer<CChar>?>?,
                                           UnsafePointer<Int32>?, UnsafePointer<Int32>?, Int32) -> Int32
    let getResult: @convention(c) (OpaquePointer?) -> OpaquePointer?

    /// Opens `library` and finds every function above in it; the failure names the library, what
    /// `dlopen` said or the functions it lacks, and the package to install.
    static func load(_ library: String) -> Result<LibPQ, LedgerError> {
        guard let handle = dlopen(library, RTLD_NOW | RTLD_LOCAL) else {
            return .failure(LedgerError(.io, path: library, message: "cannot load libpq for PostgreSQL (install Debian's package "
                                       + "libpq5): \(dlerror().map { String(cString: $0) } ?? "dlopen failed")"))
        }
        var missing: [String] = []
        func function<F>(_ name: String) -> F {
            guard let address = dlsym(handle, name) else {
                missing.append(name)
                return unsafeBitCast(UnsafeRawPointer(bitPattern: 1), to: F.self)   // never called: the load fails below
            }
            return unsafeBitCast(address, to: F.self)
        }
        let functions = LibPQ(
            connectdb: function("PQconnectdb"), finish: function("PQfinish"), status: function("PQstatus"),
            errorMessage: function("PQerrorMessage"), setNoticeProcessor: function("PQsetNoticeProcessor"),
            socket: function("PQsocket"), consumeInput: function("PQconsumeInput"), notifies: function("PQnotifies"),
            freemem: function("PQfreemem"), execParams: function("PQexecParams"), execPrepared: function("PQexecPrepared"),
            prepare: function("PQprepare"), clear: function("PQclear"), resultStatus: function("PQresultStatus"),
            ntuples: function("PQntuples"), nfields: function("PQnfields"), getisnull: function("PQgetisnull"),
            getvalue: function("PQgetvalue"), cmdTuples: function("PQcmdTuples"), cmdStatus: function("PQcmdStatus"),
            resultErrorMessage: function("PQresultErrorMessage"), resultErrorField: function("PQresultErrorField"),
            conninfoParse: function("PQconninfoParse"), conninfoFree: function("PQconninfoFree"),
            enterPipelineMode: function("PQenterPipelineMode"), exitPipelineMode: function("PQexitPipelineMode"),
            pipelineSync: function("PQpipelineSync"), sendQueryParams: function("PQsendQueryParams"),
            sendQueryPrepared: function("PQsendQueryPrepared"), getResult: function("PQgetResult"))
        guard missing.isEmpty else {
            dlclose(handle)
            return .failure(LedgerError(.io, path: library, message: "this libpq lacks \(missing.joined(separator: ", "))"))
        }
        return .success(functions)
    }
}
