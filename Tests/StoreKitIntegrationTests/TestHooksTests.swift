import Foundation
import StoreKitTestSupport
import StoreKitWire
import Testing

/// The test hooks (TestHooks.swift) exist in debug builds only, and answer only a daemon started
/// with `--enable-test-hooks`; the packaged (release) daemon refuses the option, which
/// `make test-system` checks on the installed binary.
@Suite struct TestHooksTests {
    @Test("without --enable-test-hooks every debug command is an unknown command; with it, bad arguments are refused")
    func hooksAnswerOnlyWhenEnabled() throws {
        let plain = try DaemonProcess()
        defer { plain.remove() }
        try plain.start()
        let refused = try TestHooks(plain)
        for command in ["debug-stall", "debug-fail-saves", "debug-fail-signing", "debug-slow-signing"] {
            #expect(try refused.run(command, ["1"]) == .invalidArgument, "\(command) without the option")
        }

        let enabled = try DaemonProcess()
        defer { enabled.remove() }
        enabled.extraArguments = ["--enable-test-hooks"]
        try enabled.start()
        let hooks = try TestHooks(enabled)
        #expect(try hooks.run("debug-fail-saves", []) == .invalidArgument)
        #expect(try hooks.run("debug-fail-signing", ["-1"]) == .invalidArgument)
        #expect(try hooks.run("debug-slow-signing", ["60001"]) == .invalidArgument)
        #expect(try hooks.run("debug-slow-signing", ["0"]) == .ok)
        #expect(try hooks.run("debug-stall", ["1"]) == .ok)
    }

    @Test("the debug build's usage names the option")
    func usageNamesTheOption() throws {
        let help = try ProcessRunner.run(Paths.binary("storekitd"), ["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("--enable-test-hooks"), "\(help.stdout)")
    }
}
