import Foundation
import StoreKitTestSupport
import Testing

/// A usage error names what is wrong and shows the usage of the command given, not the whole
/// program's (as git and systemctl do); no daemon is needed to say so.
@Suite("storekitctl usage errors")
struct CtlUsageTests {
    @Test("a command missing its argument prints that command's usage and exits 64",
          arguments: [("approve", "Usage: storekitctl approve TRANSACTION"), ("products", "Usage: storekitctl products APP"),
                      ("refund", "Usage: storekitctl refund")])
    func commandUsage(command: String, usage: String) throws {
        let result = try ProcessRunner.run(Paths.binary("storekitctl"), [command],
                                           environment: ["STOREKITD_CONTROL_SOCKET": "/nonexistent/control.sock"])
        #expect(result.status == 64)
        #expect(result.stderr.contains(usage), "\(result.stderr)")
        #expect(!result.stderr.contains("Usage: storekitctl [--socket PATH]"), "the whole program's usage: \(result.stderr)")
    }

    @Test("no command or an unknown one prints the program's usage")
    func programUsage() throws {
        for arguments in [[], ["frobnicate"]] {
            let result = try ProcessRunner.run(Paths.binary("storekitctl"), arguments)
            #expect(result.status == 64)
            #expect(result.stderr.contains("Usage: storekitctl [--socket PATH]"), "\(result.stderr)")
        }
    }
}
