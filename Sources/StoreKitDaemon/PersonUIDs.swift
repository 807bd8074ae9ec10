import StoreKitPosix

/// The uids that belong to people, for whom observer units may be started: `UID_MIN`…`UID_MAX`
/// of `/etc/login.defs` (what `useradd` gives to people; 1000…60000 when the file or a key is
/// missing), unless `[Observers] UIDs=` names a range. Uid 0 and system accounts fall below it,
/// so neither the daemon nor the polkit rule (through `--verify-observer-unit`) ever starts an
/// app's observer as root or as a system account.
public struct PersonUIDs: Sendable, Equatable, CustomStringConvertible {
    public let range: ClosedRange<UInt32>
    /// Where the range comes from, for messages.
    public let source: String

    public static let loginDefinitionsPath = "/etc/login.defs"
    static let fallback: ClosedRange<UInt32> = 1000...60000

    public init(range: ClosedRange<UInt32>, source: String) {
        self.range = range
        self.source = source
    }

    public var description: String { "\(range.lowerBound)-\(range.upperBound) (\(source))" }

    public func contains(_ uid: UInt32) -> Bool { uid != 0 && range.contains(uid) }

    /// The range of `UID_MIN` and `UID_MAX` in the login.defs file at `path`; each missing or
    /// unreadable value is its default.
    public static func fromLoginDefinitions(path: String = loginDefinitionsPath) -> PersonUIDs {
        var minimum = fallback.lowerBound
        var maximum = fallback.upperBound
        if let bytes = try? FileSystem.readContents(of: path, followingSymlinks: true) {
            for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
                let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
                guard words.count >= 2, let value = UInt32(words[1]) else { continue }
                switch words[0] {
                case "UID_MIN": minimum = value
                case "UID_MAX": maximum = value
                default: break
                }
            }
        }
        guard minimum <= maximum else { return PersonUIDs(range: fallback, source: "the default; \(path) is inconsistent") }
        return PersonUIDs(range: max(minimum, 1)...maximum, source: "UID_MIN and UID_MAX of \(path)")
    }

    /// A range written `MIN-MAX` (as in `[Observers] UIDs=`), nil when malformed.
    public static func parse(_ text: String) -> ClosedRange<UInt32>? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }),
              let low = UInt32(parts[0]), let high = UInt32(parts[1]), low >= 1, low <= high else { return nil }
        return low...high
    }
}
