/// What of a libpq connection string must never leave the daemon: its password. Every message
/// that could quote the string — libpq's own parse and connection errors included — passes
/// through `redacting` before it is logged, printed or sent to a control peer.
public enum ConnectionSecrets {
    /// What stands for a secret in messages.
    public static let mask = "********"

    /// `text` without the password `conninfo` may hold: `password=…` (quoted or not), and the
    /// `user:password@` of a URI, wherever `text` quotes them, even from a string so malformed
    /// that libpq cannot parse it (an unclosed `[` in the host, a stray quote).
    public static func redacting(_ text: String, of conninfo: String) -> String { Redactor(conninfo)(text) }

    /// What `redacting` finds in one connection string, found once: a connection keeps one and
    /// applies it to each of its errors, instead of parsing the string again for every one.
    public struct Redactor: Sendable {
        let conninfo: String
        let secrets: [Substring]
        let parses: Bool

        public init(_ conninfo: String) {
            self.conninfo = conninfo
            secrets = ConnectionSecrets.secrets(in: conninfo).filter { !$0.isEmpty }
            parses = PostgresConnection.parses(conninfo)
        }

        public func callAsFunction(_ text: String) -> String {
            var redacted = text
            for secret in secrets { redacted = redacted.replacing(secret, with: mask) }
            // A string libpq cannot parse has no password libpq could name for us, and its parse
            // errors quote the piece they stumbled on (a token, or the whole URI), which may be or
            // hold the password in a spelling no scan foresees: every such quoted piece is masked.
            return parses ? redacted : ConnectionSecrets.maskingQuoted(redacted, keeping: conninfo)
        }
    }

    /// `text` with what stands between each pair of double quotes masked, but for a key of
    /// `conninfo` (a word followed there by `=`, such as an unknown option's name: the reason
    /// the string was refused, and no secret).
    static func maskingQuoted(_ text: String, keeping conninfo: String) -> String {
        func isKey(_ piece: String) -> Bool {
            !piece.isEmpty && piece.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" }
                && (conninfo.contains(piece + "=") || conninfo.contains(piece + " ="))
                && !(conninfo.contains("=" + piece) || conninfo.contains("= " + piece) || conninfo.contains(":" + piece))
        }
        var result = ""
        var piece = ""
        var inside = false
        for character in text {
            if character == "\"" {
                if inside { result += isKey(piece) ? piece : mask }
                piece = ""
                result.append(character)
                inside.toggle()
            } else if inside {
                piece.append(character)
            } else {
                result.append(character)
            }
        }
        if inside { result += mask }
        return result
    }

    /// Whether `conninfo` holds a password (then it must stay in a file only its owner may read).
    public static func holdsPassword(_ conninfo: String) -> Bool { !secrets(in: conninfo).allSatisfy(\.isEmpty) }

    /// The password as libpq itself reads it from `conninfo` (whatever the spelling: blanks or
    /// tabs around `=`, quotes, a URI's `user:password@`, a percent-encoded query key), nil when
    /// there is none or the string does not parse.
    static func parsedPassword(_ conninfo: String) -> String? {
        PostgresConnection.options(conninfo)["password"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The passwords written in `conninfo`: the values of `password` keys (key=value form, or a
    /// URI's query `password=`), and a URI's `user:password@`. Also the same percent-decoded, as
    /// libpq may quote it either way.
    static func secrets(in conninfo: String) -> [Substring] {
        var secrets: [Substring] = parsedPassword(conninfo).map { [Substring($0)] } ?? []
        var rest = conninfo[...]
        while let found = rest.firstRange(of: "password") {
            var value = rest[found.upperBound...].drop { $0 == " " }
            guard value.first == "=" else { rest = value; continue }
            value = value.dropFirst().drop { $0 == " " }
            let quoted = value.first == "'"
            if quoted { value = value.dropFirst() }
            let end = value.firstIndex { quoted ? $0 == "'" : ($0 == " " || $0 == "&") } ?? value.endIndex
            secrets.append(value[..<end])
            rest = value[end...]
        }
        if let scheme = conninfo.firstRange(of: "://") {
            // The authority ends at the first '/', '?' or '#' after the last '@' (a password may
            // hold '/' or '?' only percent-encoded, but be generous: take up to the last '@').
            let afterScheme = conninfo[scheme.upperBound...]
            if let at = afterScheme.lastIndex(of: "@") {
                let userInfo = afterScheme[..<at]
                if let colon = userInfo.firstIndex(of: ":") {
                    secrets.append(userInfo[userInfo.index(after: colon)...])
                }
            }
        }
        let decoded = secrets.compactMap(percentDecoded).filter { decoded in !secrets.contains { $0 == decoded } }
        // Longest first, so that a password holding another never leaves a part of itself behind.
        return (secrets + decoded).sorted { $0.count > $1.count }
    }

    private static func percentDecoded(_ text: Substring) -> Substring? {
        guard text.contains("%") else { return nil }
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%"), let high = iterator.next(), let low = iterator.next(),
               let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) {
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self).map { Substring($0) }
    }
}
