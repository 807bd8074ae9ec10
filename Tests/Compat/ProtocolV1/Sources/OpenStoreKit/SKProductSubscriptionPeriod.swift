import Foundation

/// The length of a subscription period or of an offer's period, such as 1 month.
open class SKProductSubscriptionPeriod: NSObject {
    private let storedNumberOfUnits: Int
    private let storedUnit: SKProduct.PeriodUnit

    /// Creates an empty period (0 days); useful for test doubles.
    public override init() {
        storedNumberOfUnits = 0
        storedUnit = .day
        super.init()
    }

    /// Creates a period of `numberOfUnits` units.
    init(numberOfUnits: Int, unit: SKProduct.PeriodUnit) {
        storedNumberOfUnits = numberOfUnits
        storedUnit = unit
        super.init()
    }

    /// Parses a single-unit ISO 8601 duration such as `P1M`, `P1W`, `P3D` or `P1Y`; `nil` otherwise.
    convenience init?(iso8601 text: String) {
        guard text.count >= 3, text.first == "P", let designator = text.last,
              let number = Int(text.dropFirst().dropLast()), number > 0
        else { return nil }
        let unit: SKProduct.PeriodUnit
        switch designator {
        case "D": unit = .day
        case "W": unit = .week
        case "M": unit = .month
        case "Y": unit = .year
        default: return nil
        }
        self.init(numberOfUnits: number, unit: unit)
    }

    /// How many units the period lasts.
    open var numberOfUnits: Int { storedNumberOfUnits }
    /// The unit the period is measured in.
    open var unit: SKProduct.PeriodUnit { storedUnit }
}
