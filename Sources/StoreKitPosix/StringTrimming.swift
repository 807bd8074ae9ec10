extension StringProtocol {
    /// The text without the white space (Unicode's White_Space: blanks, tabs, line ends) at either
    /// end. Here rather than Foundation's `trimmingCharacters(in:)`: the daemon does not load
    /// Foundation, only FoundationEssentials, which lacks it.
    public func trimmingWhitespace() -> String {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace }) else {
            return ""
        }
        return String(self[first...last])
    }
}
