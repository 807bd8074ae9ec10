import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

// What the test suite may do to a daemon it started with `--enable-test-hooks`: the `debug-*`
// control commands, and the state they set, read where the daemon would otherwise fail or stall
// for real. Compiled only where `STOREKIT_TEST_HOOKS` is defined (Package.swift: debug builds,
// which the tests and sanitizers run): a release build, the packaged one, has none of this and
// refuses `--enable-test-hooks` as an unknown option.

#if STOREKIT_TEST_HOOKS
final class TestHooks {
    /// `debug-fail-signing MS`: every signature of a push fails until then (monotonic ms).
    private(set) var signingFailsUntil: Int64 = .min
    /// `debug-slow-signing MS`: each job on a signer's thread waits MS ms first (0: none).
    private(set) var signingDelay: UInt32 = 0

    /// `debug-serve-up-to N`: hellos asking for a version above N are refused, as a daemon of
    /// version N refuses them (nil: every version served).
    private(set) var servedUpTo: UInt16?

    static let commands: Set<String> = ["debug-stall", "debug-fail-saves", "debug-fail-signing", "debug-slow-signing", "debug-serve-up-to"]

    /// Whether a job made now fails its signatures on purpose.
    var signingFails: Bool { Monotonic.milliseconds() < signingFailsUntil }

    /// Runs one of `commands`:
    /// - `debug-stall [MS]` blocks the serving loop (default 1000 ms), to prove the watchdog stops it;
    /// - `debug-fail-saves MS`: saves to the database fail for MS ms, to prove what depends on them;
    /// - `debug-fail-signing MS`: the signatures of pushes fail for MS ms;
    /// - `debug-slow-signing MS`: each signer's job waits MS ms (at most 60000) before it signs;
    /// - `debug-serve-up-to N`: the daemon serves versions up to N only, as an older one does.
    func execute(_ command: String, _ arguments: [String], ledger: LedgerDriver) -> (code: ResultCode, message: String) {
        switch command {
        case "debug-stall":
            usleep((arguments.first.flatMap { UInt32($0) } ?? 1000) * 1000)
        case "debug-fail-saves":
            guard arguments.count == 1, let milliseconds = Int64(arguments[0]), milliseconds >= 0 else {
                return (.invalidArgument, "usage: debug-fail-saves MILLISECONDS")
            }
            ledger.savesFailUntil = Monotonic.milliseconds() + milliseconds
        case "debug-fail-signing":
            guard arguments.count == 1, let milliseconds = Int64(arguments[0]), milliseconds >= 0 else {
                return (.invalidArgument, "usage: debug-fail-signing MILLISECONDS")
            }
            signingFailsUntil = Monotonic.milliseconds() + milliseconds
        case "debug-slow-signing":
            guard arguments.count == 1, let milliseconds = UInt32(arguments[0]), milliseconds <= 60_000 else {
                return (.invalidArgument, "usage: debug-slow-signing MILLISECONDS (at most 60000)")
            }
            signingDelay = milliseconds
        case "debug-serve-up-to":
            guard arguments.count == 1, let version = UInt16(arguments[0]), ProtocolVersion.served.contains(version) else {
                return (.invalidArgument, "usage: debug-serve-up-to VERSION (one of those served)")
            }
            servedUpTo = version
        default:
            preconditionFailure("not a test hook: \(command)")
        }
        return (.ok, "")
    }
}
#endif
