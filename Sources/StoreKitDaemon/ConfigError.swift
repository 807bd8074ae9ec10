/// A configuration problem, located in the file (and line) that caused it.
///
/// `description` reads like a compiler diagnostic, `FILE:LINE: message`, so an admin can jump
/// straight to the offending line; the daemon refuses to start (or keeps its old configuration on
/// reload) when it sees one.
public struct ConfigError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The file as it was named when loading (relative paths stay relative).
    public let file: String
    /// 1-based line number, or nil when the problem concerns the whole file (e.g. it cannot be read).
    public let line: Int?
    public let message: String

    public init(file: String, line: Int?, message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    public var description: String {
        if let line { return "\(file):\(line): \(message)" }
        return "\(file): \(message)"
    }
}
