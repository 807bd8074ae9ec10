/// How fast subscriptions run in the test store: `SKTestSession.TimeRate`'s cases and raw values
/// (also what `_timeRate` in a `.storekit` file holds). Shared by the engine, which gives each its
/// lengths (StoreKitEngine/TimeRate.swift), the control plane and OpenStoreKitTest.
public enum TimeRate: Int, Sendable, CaseIterable, CustomStringConvertible {
    case realTime = 0
    case oneHourIsOneDay = 1
    case thirtyMinutesIsOneDay = 2
    case fiveMinutesIsOneDay = 3
    case oneMinuteIsOneDay = 4
    case thirtySecondsIsOneDay = 5
    case oneSecondIsOneDay = 6
    case monthlyRenewalEveryHour = 10
    case monthlyRenewalEveryThirtyMinutes = 11
    case monthlyRenewalEveryFifteenMinutes = 12
    case monthlyRenewalEveryFiveMinutes = 13
    case monthlyRenewalEveryThirtySeconds = 15
    case oneRenewalEveryFifteenMinutes = 1000
    case oneRenewalEveryFiveMinutes = 1001
    case oneRenewalEveryMinute = 1002
    case oneRenewalEveryThirtySeconds = 1003
    case oneRenewalEveryTenSeconds = 1004
    case oneRenewalEveryTwoSeconds = 1005

    /// StoreKit's case name, e.g. `monthlyRenewalEveryThirtySeconds`.
    public var name: String {
        switch self {
        case .realTime: "realTime"
        case .oneHourIsOneDay: "oneHourIsOneDay"
        case .thirtyMinutesIsOneDay: "thirtyMinutesIsOneDay"
        case .fiveMinutesIsOneDay: "fiveMinutesIsOneDay"
        case .oneMinuteIsOneDay: "oneMinuteIsOneDay"
        case .thirtySecondsIsOneDay: "thirtySecondsIsOneDay"
        case .oneSecondIsOneDay: "oneSecondIsOneDay"
        case .monthlyRenewalEveryHour: "monthlyRenewalEveryHour"
        case .monthlyRenewalEveryThirtyMinutes: "monthlyRenewalEveryThirtyMinutes"
        case .monthlyRenewalEveryFifteenMinutes: "monthlyRenewalEveryFifteenMinutes"
        case .monthlyRenewalEveryFiveMinutes: "monthlyRenewalEveryFiveMinutes"
        case .monthlyRenewalEveryThirtySeconds: "monthlyRenewalEveryThirtySeconds"
        case .oneRenewalEveryFifteenMinutes: "oneRenewalEveryFifteenMinutes"
        case .oneRenewalEveryFiveMinutes: "oneRenewalEveryFiveMinutes"
        case .oneRenewalEveryMinute: "oneRenewalEveryMinute"
        case .oneRenewalEveryThirtySeconds: "oneRenewalEveryThirtySeconds"
        case .oneRenewalEveryTenSeconds: "oneRenewalEveryTenSeconds"
        case .oneRenewalEveryTwoSeconds: "oneRenewalEveryTwoSeconds"
        }
    }

    public var description: String { name }

    /// A rate from its name (any case, `-` and `_` ignored: `monthly-renewal-every-thirty-seconds`)
    /// or its raw value.
    public init?(name text: String) {
        if let raw = Int(text) {
            guard let rate = TimeRate(rawValue: raw) else { return nil }
            self = rate
            return
        }
        let wanted = Self.normalized(text)
        guard let rate = Self.allCases.first(where: { Self.normalized($0.name) == wanted }) else { return nil }
        self = rate
    }

    private static func normalized(_ text: String) -> String {
        String(text.lowercased().filter { $0 != "-" && $0 != "_" })
    }
}
