@testable import StoreKitPostgres
import Testing

/// libpq is opened when PostgreSQL is first needed (LibPQ.swift), not linked: what a missing or
/// wrong library says, and that the real one works. No PostgreSQL server is needed.
@Suite struct LibPQTests {
    @Test("a library that is not there: the failure names it, what dlopen said and the package to install")
    func absentLibrary() {
        guard case .failure(let error) = LibPQ.load("libpq-absent.so.5") else {
            Issue.record("a library that does not exist was loaded")
            return
        }
        #expect(error.path == "libpq-absent.so.5")
        #expect(error.message.contains("cannot load libpq for PostgreSQL (install Debian's package libpq5)"))
        #expect(error.message.contains("libpq-absent.so.5"), "dlopen's reason: \(error.message)")
    }

    @Test("a library without libpq's functions is refused, naming the ones it lacks")
    func libraryWithoutTheFunctions() {
        guard case .failure(let error) = LibPQ.load("libc.so.6") else {
            Issue.record("libc was taken for libpq")
            return
        }
        #expect(error.message.hasPrefix("this libpq lacks PQconnectdb, PQfinish, PQstatus"))
        #expect(error.message.hasSuffix("PQconninfoParse, PQconninfoFree, PQenterPipelineMode, PQexitPipelineMode, PQpipelineSync, PQsendQueryParams, PQsendQueryPrepared, PQgetResult"))
    }

    @Test("Debian's libpq.so.5 loads, and its functions are the ones called")
    func realLibrary() throws {
        let pq = try LibPQ.load(LibPQ.soname).get()
        var message: UnsafeMutablePointer<CChar>?
        let options = try #require(pq.conninfoParse("host=/run/postgresql dbname=storekit", &message))
        var values: [String: String] = [:]
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { values[String(cString: keyword)] = String(cString: value) }
            option += 1
        }
        pq.conninfoFree(options)
        #expect(values["host"] == "/run/postgresql" && values["dbname"] == "storekit")
        #expect(pq.conninfoParse("host=/tmp nonsense=1", &message) == nil)
        let reason = message.map { String(cString: $0) } ?? ""
        if let message { pq.freemem(message) }
        #expect(reason.contains("nonsense"), "libpq's own reason: \(reason)")
    }
}
