extension Product {
    /// The length of a subscription period or of an offer's period, such as 1 month.
    public struct SubscriptionPeriod: Hashable, Sendable {
        /// The unit a period is measured in.
        public enum Unit: Hashable, Sendable, CaseIterable {
            /// Days.
            case day
            /// Weeks.
            case week
            /// Months.
            case month
            /// Years.
            case year
        }

        /// The unit.
        public let unit: Unit
        /// How many units the period lasts.
        public let value: Int

        /// A period of `value` units.
        init(value: Int, unit: Unit) {
            self.value = value
            self.unit = unit
        }

        /// Parses a single-unit ISO 8601 duration (`P1W`, `P1M`, `P3D`, `P1Y`); nil otherwise.
        init?(iso8601 text: String) {
            guard text.count >= 3, text.first == "P", let designator = text.last,
                  let number = Int(text.dropFirst().dropLast()), number > 0
            else { return nil }
            switch designator {
            case "D": self.init(value: number, unit: .day)
            case "W": self.init(value: number, unit: .week)
            case "M": self.init(value: number, unit: .month)
            case "Y": self.init(value: number, unit: .year)
            default: return nil
            }
        }

        /// Three days.
        public static let everyThreeDays = SubscriptionPeriod(value: 3, unit: .day)
        /// One week.
        public static let weekly = SubscriptionPeriod(value: 1, unit: .week)
        /// Two weeks.
        public static let everyTwoWeeks = SubscriptionPeriod(value: 2, unit: .week)
        /// One month.
        public static let monthly = SubscriptionPeriod(value: 1, unit: .month)
        /// Two months.
        public static let everyTwoMonths = SubscriptionPeriod(value: 2, unit: .month)
        /// Three months.
        public static let everyThreeMonths = SubscriptionPeriod(value: 3, unit: .month)
        /// Six months.
        public static let everySixMonths = SubscriptionPeriod(value: 6, unit: .month)
        /// One year.
        public static let yearly = SubscriptionPeriod(value: 1, unit: .year)
    }
}

extension Product.SubscriptionPeriod: CustomDebugStringConvertible {
    /// The period as an ISO 8601 duration, e.g. `P1M`.
    public var debugDescription: String {
        let designator = switch unit {
        case .day: "D"
        case .week: "W"
        case .month: "M"
        case .year: "Y"
        }
        return "P\(value)\(designator)"
    }
}
