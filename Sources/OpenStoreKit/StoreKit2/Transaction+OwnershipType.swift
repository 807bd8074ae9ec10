extension Transaction {
    /// Whether the user bought the product or has it through Family Sharing.
    public struct OwnershipType: RawRepresentable, Hashable, Sendable {
        /// The payload's spelling (`inAppOwnershipType`).
        public let rawValue: String

        /// Creates an ownership type from the payload's spelling.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The user bought it.
        public static let purchased = OwnershipType(rawValue: "PURCHASED")
        /// A family member bought it and shares it.
        public static let familyShared = OwnershipType(rawValue: "FAMILY_SHARED")
    }
}
