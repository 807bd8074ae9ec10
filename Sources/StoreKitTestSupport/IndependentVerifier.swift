import Foundation

/// Verifiers this project did not write: scripts/verifiers/ drive openssl and PyPI/Debian Python
/// libraries (PyJWT, cryptography) over what storekitd signed.
public enum IndependentVerifier {
    /// `scripts/verifiers/verify-jws.py ROOT < jws`: status 0 and the payload JSON when trusted.
    public static func verifyJWS(_ jws: String, root: String) throws -> ProcessResult {
        let input = FileManager.default.temporaryDirectory.appendingPathComponent("jws-\(UUID().uuidString)")
        try Data(jws.utf8).write(to: input)
        defer { try? FileManager.default.removeItem(at: input) }
        return try ProcessRunner.run("/bin/sh", ["-c", "exec \"$0\" \"$1\" < \"$2\"",
                                                 Paths.repository + "/scripts/verifiers/verify-jws.py", root, input.path])
    }
}
