import Foundation

/// Verifiers this project did not write: scripts/verifiers/ drive openssl, PyJWT and
/// python3-cryptography (Debian), and Apple's App Store Server Library (PyPI, installed into
/// `.build/verifiers` by `make test-deps`) over what storekitd signed.
public enum IndependentVerifier {
    /// `verify-jws.py ROOT.pem < jws`: status 0 and the payload JSON when trusted.
    public static func verifyJWS(_ jws: String, root: String) throws -> ProcessResult {
        try run(["/bin/sh", "-c", "exec \"$0\" \"$1\" < \"$2\"", Paths.repository + "/scripts/verifiers/verify-jws.py", root], input: jws)
    }

    /// `verify-jws.py --lines ROOT.pem`: many JWS in one run, one payload per line on success;
    /// the first refused one ends it (status 1, its line number on stderr).
    public static func verifyJWSLines(_ tokens: [String], root: String) throws -> ProcessResult {
        try run(["/bin/sh", "-c", "exec \"$0\" --lines \"$1\" < \"$2\"", Paths.repository + "/scripts/verifiers/verify-jws.py", root],
                input: tokens.joined(separator: "\n") + "\n")
    }

    /// The virtual environment holding Apple's library, when `make test-deps` could install it.
    public static var appleLibraryPython: String? {
        let python = Paths.repository + "/.build/verifiers/bin/python"
        guard FileManager.default.isExecutableFile(atPath: python) else { return nil }
        let check = try? ProcessRunner.run(python, ["-c", "import appstoreserverlibrary"])
        return check?.status == 0 ? python : nil
    }

    /// `verify-apple-library.py ROOT.der BUNDLE KIND < jws` (KIND: transaction, renewal, app-transaction).
    public static func verifyWithAppleLibrary(_ jws: String, rootDER: String, bundleID: String, kind: String) throws -> ProcessResult {
        guard let python = appleLibraryPython else { throw VerifierMissing() }
        return try run(["/bin/sh", "-c", "exec \"$0\" \"$1\" \"$2\" \"$3\" \"$4\" < \"$5\"", python,
                        Paths.repository + "/scripts/verifiers/verify-apple-library.py", rootDER, bundleID, kind], input: jws)
    }

    public struct VerifierMissing: Error, CustomStringConvertible {
        public var description: String { "Apple's app-store-server-library is not installed in .build/verifiers (make test-deps)" }
    }

    /// Runs `command` (whose last argument receives the input file's path).
    static func run(_ command: [String], input: String) throws -> ProcessResult {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("signed-\(UUID().uuidString)")
        try Data(input.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        return try ProcessRunner.run(command[0], Array(command.dropFirst()) + [file.path])
    }
}
