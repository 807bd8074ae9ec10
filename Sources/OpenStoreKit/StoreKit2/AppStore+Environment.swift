extension AppStore {
    /// The server environment that signed a transaction (`environment` in its payload).
    public struct Environment: RawRepresentable, Hashable, Sendable {
        /// The payload's spelling: `Production`, `Sandbox` or `Xcode`.
        public let rawValue: String

        /// Creates an environment from the payload's spelling.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The production App Store.
        public static let production = Environment(rawValue: "Production")
        /// The sandbox environment (`Environment=Sandbox` in the app's registration).
        public static let sandbox = Environment(rawValue: "Sandbox")
        /// Local testing: storekitd's default, as StoreKit Testing in Xcode.
        public static let xcode = Environment(rawValue: "Xcode")
    }
}
