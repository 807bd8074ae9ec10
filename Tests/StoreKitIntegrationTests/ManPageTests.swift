import Foundation
import StoreKitTestSupport
import Testing

/// Every man page renders without a warning of groff's (`-ww`, as `man --warnings` runs it) and
/// holds no control byte (a `\f` typed as a form feed renders as garbage, silently).
@Suite("man pages")
struct ManPageTests {
    static var pages: [String] {
        let directory = Paths.repository + "/man"
        return ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.range(of: #"\.[1-8]$"#, options: .regularExpression) != nil }.sorted()
            .map { directory + "/" + $0 }
    }

    @Test("there are the man pages the design names")
    func namedPagesExist() {
        let names = Set(Self.pages.map { ($0 as NSString).lastPathComponent })
        #expect(names.isSuperset(of: ["storekitd.8", "storekitctl.1", "storekitd.conf.5"]), "\(names)")
    }

    @Test("each renders with groff -ww without a warning and holds no control byte", arguments: pages)
    func rendersCleanly(page: String) throws {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: page)))
        let control = bytes.enumerated().filter { $0.element < 0x20 && $0.element != 0x0A && $0.element != 0x09 || $0.element == 0x7F }
        #expect(control.isEmpty, "\(page): control bytes at offsets \(control.prefix(5).map(\.offset))")
        let rendered = try ProcessRunner.run("/usr/bin/groff", ["-ww", "-man", "-Tutf8", "-z", page],
                                             environment: ["LC_ALL": "C.UTF-8"])
        #expect(rendered.status == 0 && rendered.stderr.isEmpty, "\(page): \(rendered.stderr)")
    }
}
