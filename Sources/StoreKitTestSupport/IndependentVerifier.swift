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

    /// The in-app purchases of an app receipt (DER, PKCS#7), verified by `openssl cms` against
    /// `root` (PEM) and taken apart by `openssl asn1parse`: for each, its attributes' values (DER,
    /// in upper-case hex) by type (`1713` is_trial_period, …). Throws when openssl refuses it.
    public static func receiptPurchases(_ receipt: Data, root: String) throws -> [[Int: String]] {
        let directory = TemporaryDirectory("receipt")
        defer { directory.remove() }
        let file = directory.file("receipt")
        try receipt.write(to: URL(fileURLWithPath: file))
        let verified = try ProcessRunner.run("/usr/bin/openssl", [
            "cms", "-verify", "-inform", "DER", "-in", file, "-CAfile", root, "-out", file + ".payload"])
        guard verified.status == 0 else { throw ReceiptRefused(reason: verified.stderr) }
        return try receiptAttributes(of: file + ".payload").filter { $0.type == 17 }.map { purchase in
            let inner = file + ".purchase"
            try bytes(hex: purchase.value).write(to: URL(fileURLWithPath: inner))
            return Dictionary(try receiptAttributes(of: inner).map { ($0.type, $0.value) }, uniquingKeysWith: { first, _ in first })
        }
    }

    public struct ReceiptRefused: Error, CustomStringConvertible {
        public var reason: String
        public var description: String { "openssl cms refused the receipt: \(reason)" }
    }

    /// The receipt attributes in a DER file: each SEQUENCE of type (INTEGER), version (INTEGER)
    /// and value (OCTET STRING), as openssl's asn1parse prints them.
    static func receiptAttributes(of file: String) throws -> [(type: Int, value: String)] {
        let parsed = try ProcessRunner.run("/usr/bin/openssl", ["asn1parse", "-inform", "DER", "-in", file])
        guard parsed.status == 0 else { throw ReceiptRefused(reason: "asn1parse: \(parsed.stderr)") }
        func field(_ line: String, _ kind: String) -> String? {
            guard line.contains("prim: \(kind)"), let colon = line.lastIndex(of: ":") else { return nil }
            return String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
        }
        let lines = parsed.lines
        var found: [(Int, String)] = []
        for index in lines.indices.dropLast(2) {
            guard let type = field(lines[index], "INTEGER").flatMap({ Int($0, radix: 16) }),
                  field(lines[index + 1], "INTEGER") != nil,
                  let value = field(lines[index + 2], "OCTET STRING") else { continue }
            found.append((type, value))
        }
        return found
    }

    /// Bytes from hex digits (openssl's dumps).
    static func bytes(hex: String) throws -> Data {
        var bytes: [UInt8] = []
        var digits = hex.utf8.makeIterator()
        while let high = digits.next(), let low = digits.next() {
            guard let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) else {
                throw ReceiptRefused(reason: "not hex: \(hex)")
            }
            bytes.append(value)
        }
        return Data(bytes)
    }

    /// A receipt attribute's DER INTEGER value in hex, as `receiptPurchases` gives it.
    public static func derInteger(_ flag: Bool) -> String { flag ? "020101" : "020100" }

    /// A receipt attribute's DER UTF8String value in hex (ASCII `text`).
    public static func derUTF8String(_ text: String) -> String {
        String(format: "0C%02X", text.utf8.count) + text.utf8.map { String(format: "%02X", $0) }.joined()
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
