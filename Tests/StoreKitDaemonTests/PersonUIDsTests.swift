import Foundation
import StoreKitDaemon
import StoreKitTestSupport
import Testing

@Suite("Observer units only for people")
struct PersonUIDsTests {
    @Test("login.defs gives the range; missing keys or file fall back to 1000-60000; UIDs= is checked")
    func personUIDs() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let defs = directory.file("login.defs")
        try "# comment\nUID_MIN\t\t\t 500\nUID_MAX  29999\nSYS_UID_MIN 100\n".write(toFile: defs, atomically: true, encoding: .utf8)
        #expect(PersonUIDs.fromLoginDefinitions(path: defs).range == 500...29999)
        #expect(PersonUIDs.fromLoginDefinitions(path: directory.file("none")).range == 1000...60000)
        try "UID_MIN 0\n".write(toFile: defs, atomically: true, encoding: .utf8)
        let zero = PersonUIDs.fromLoginDefinitions(path: defs)
        #expect(!zero.contains(0), "uid 0 is never a person's, whatever login.defs says")
        #expect(PersonUIDs.parse("1000-60000") == 1000...60000)
        for bad in ["0-100", "100-50", "1000", "-5", "a-b", "1000-", "1000-60000-1"] { #expect(PersonUIDs.parse(bad) == nil, "\(bad)") }
    }

}
