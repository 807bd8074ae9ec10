import Foundation

// StoreKit 2's formatting of subscription periods, with Apple's names and signatures:
//
//     subscription.subscriptionPeriod.formatted(product.subscriptionPeriodFormatStyle)   // "1 month"
//     subscription.subscriptionPeriod.unit.formatted(product.subscriptionPeriodUnitFormatStyle)  // "month"
//     subscription.subscriptionPeriod.unit.localizedDescription                           // "Month"
//     offer.paymentMode.localizedDescription                                              // "Free Trial"
//
// One difference, forced by the platform: Apple's `subscriptionPeriodFormatStyle` is a
// `Date.ComponentsFormatStyle`, which Foundation on Linux declares without an initializer or a
// `format(_:)`. Ours is `Product.SubscriptionPeriod.ComponentsFormatStyle`, a `FormatStyle` over
// `Range<Date>` as Apple's is, so everything written as Apple's examples are (`formatted(_:)`,
// `formatted(_:referenceDate:)`, `.locale(_:)`) compiles and prints the same; only code that
// names the type `Date.ComponentsFormatStyle` needs changing.
//
// Output is Apple's in English. In other locales, days and weeks are Foundation's own wording
// (`Duration.UnitsFormatStyle`, from ICU's data); Foundation on Linux has no localized names for
// months and years outside a date, so those stay English there (docs/storekit2.md).

extension Product {
    /// The format style for a subscription period's length and unit ("1 week", "2 months"), in
    /// the product's storefront locale. Use it with `SubscriptionPeriod.formatted(_:referenceDate:)`.
    public var subscriptionPeriodFormatStyle: SubscriptionPeriod.ComponentsFormatStyle {
        SubscriptionPeriod.ComponentsFormatStyle(locale: priceFormatStyle.locale)
    }

    /// The format style for subscription period units ("week", "month", "year"), in the product's
    /// storefront locale.
    public var subscriptionPeriodUnitFormatStyle: SubscriptionPeriod.Unit.FormatStyle {
        SubscriptionPeriod.Unit.FormatStyle(locale: priceFormatStyle.locale)
    }
}

extension Product.SubscriptionPeriod {
    /// One period starting at `referenceDate`, by the Gregorian calendar in UTC (a month from
    /// 31 January ends on the last day of February).
    public func dateRange(referenceDate: Date = .now) -> Range<Date> {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        let component: Calendar.Component = switch unit {
        case .day: .day
        case .week: .weekOfYear
        case .month: .month
        case .year: .year
        }
        let end = calendar.date(byAdding: component, value: value, to: referenceDate) ?? referenceDate
        return referenceDate ..< max(end, referenceDate)
    }

    /// Formats the period with a style over date ranges (`Product.subscriptionPeriodFormatStyle`):
    /// the period is the range of one period starting at `referenceDate`.
    public func formatted<S: Foundation.FormatStyle>(_ format: S, referenceDate: Date = .now) -> S.FormatOutput
    where S.FormatInput == Range<Date> {
        format.format(dateRange(referenceDate: referenceDate))
    }

    /// Formats the period with a style over durations (`.units(allowed: [.days, .weeks])`): the
    /// period's length from `referenceDate`.
    public func formatted<S: Foundation.FormatStyle>(_ format: S, referenceDate: Date = .now) -> S.FormatOutput
    where S.FormatInput == Duration {
        let range = dateRange(referenceDate: referenceDate)
        let milliseconds = Int64((range.upperBound.timeIntervalSince(range.lowerBound) * 1000).rounded())
        return format.format(.milliseconds(milliseconds))
    }

    /// The format style of `Product.subscriptionPeriodFormatStyle`: a date range as the years,
    /// months, weeks and days it spans ("1 month", "2 weeks", "1 year, 2 months"), wide, in a locale.
    public struct ComponentsFormatStyle: Foundation.FormatStyle, Sendable {
        /// The locale the text is in.
        public var locale: Locale

        /// A style for `locale` (the current one by default).
        public init(locale: Locale = .autoupdatingCurrent) {
            self.locale = locale
        }

        /// "1 month" for a range of one month; the non-zero fields, largest first, joined by ", ".
        public func format(_ value: Range<Date>) -> String {
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
            let parts = calendar.dateComponents([.year, .month, .day], from: value.lowerBound, to: value.upperBound)
            let days = parts.day ?? 0
            let fields: [(Int, Unit)] = [(parts.year ?? 0, .year), (parts.month ?? 0, .month), (days / 7, .week), (days % 7, .day)]
            let shown = fields.filter { $0.0 > 0 }
            guard !shown.isEmpty else { return Self.phrase(0, .day, locale: locale) }
            return shown.map { Self.phrase($0.0, $0.1, locale: locale) }.joined(separator: ", ")
        }

        /// The same style in `locale`.
        public func locale(_ locale: Locale) -> Self {
            Self(locale: locale)
        }

        /// "3 days": Foundation's wording for days and weeks outside English, English otherwise.
        static func phrase(_ count: Int, _ unit: Unit, locale: Locale) -> String {
            if locale.language.languageCode?.identifier != "en", unit == .day || unit == .week {
                let seconds = Int64(count) * (unit == .day ? 86_400 : 604_800)
                return Duration.seconds(seconds).formatted(.units(allowed: [unit == .day ? .days : .weeks], width: .wide).locale(locale))
            }
            return "\(count) \(unit.englishName)\(count == 1 ? "" : "s")"
        }
    }
}

extension Product.SubscriptionPeriod.Unit {
    /// The unit's name for display, capitalized as a title: "Day", "Week", "Month", "Year".
    public var localizedDescription: String {
        let name = englishName
        return name.prefix(1).uppercased() + name.dropFirst()
    }

    /// Formats the unit with a style over units (`Product.subscriptionPeriodUnitFormatStyle`).
    public func formatted<S: Foundation.FormatStyle>(_ format: S) -> S.FormatOutput where S.FormatInput == Self {
        format.format(self)
    }

    /// "day", "week", "month", "year".
    var englishName: String {
        switch self {
        case .day: "day"
        case .week: "week"
        case .month: "month"
        case .year: "year"
        }
    }

    /// The format style of `Product.subscriptionPeriodUnitFormatStyle`: a unit's name, singular,
    /// as it follows a price ("$4.99/month").
    public struct FormatStyle: Foundation.FormatStyle, Sendable {
        /// The locale the text is in.
        public var locale: Locale

        /// A style for `locale` (the current one by default).
        public init(locale: Locale = .autoupdatingCurrent) {
            self.locale = locale
        }

        /// "month" for `.month`.
        public func format(_ value: Product.SubscriptionPeriod.Unit) -> String {
            value.englishName
        }

        /// The same style in `locale`.
        public func locale(_ locale: Locale) -> Self {
            Self(locale: locale)
        }
    }
}

extension Product.SubscriptionOffer.PaymentMode {
    /// The payment mode's name for display: "Free Trial", "Pay As You Go", "Pay Up Front" (a mode
    /// this library does not know: its raw value).
    public var localizedDescription: String {
        switch self {
        case .freeTrial: "Free Trial"
        case .payAsYouGo: "Pay As You Go"
        case .payUpFront: "Pay Up Front"
        default: rawValue
        }
    }
}
