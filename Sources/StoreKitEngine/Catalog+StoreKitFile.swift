import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import StoreKitWire

// Reading Xcode's `.storekit` format (JSON, format versions 1.x–5.x).
//
// The file is parsed by StoreKitWire's JSON parser (`JSONValue.parse`): syntax errors by line and
// column, numbers kept as written (prices stay exact decimals, booleans never pass for numbers),
// duplicate keys rejected. The decoder then walks the
// tree keeping a JSON path (`subscriptionGroups[0].subscriptions[1].recurringSubscriptionPeriod`)
// so that every complaint names the offending value. Unknown keys are ignored, as Xcode does.
//
// What the files hold (see the real ones in shared/fixtures/storekit):
//   products[]                      Consumable / NonConsumable (older files: also NonRenewingSubscription)
//   subscriptionGroups[]            id, name, localizations, subscriptions[] (RecurringSubscription with
//                                   groupNumber, recurringSubscriptionPeriod, introductoryOffer(s), adHocOffers,
//                                   winbackOffers, billingPlans; offers name their plan in billingPlanType)
//   nonRenewingSubscriptions[]      NonRenewingSubscription
//   settings {}                     `_askToBuyEnabled`, `_storefront`, `_timeRate`, …; format 1.x files
//                                   may have an empty object or put such keys at the top level.

extension Catalog {
    /// Parses the contents of a `.storekit` file; `path` is only used in errors and kept in `path`.
    public init(json: Data, path: String) throws(CatalogError) {
        let bytes = [UInt8](json)
        let root: JSONValue
        do {
            root = try JSONValue.parse(bytes)
        } catch {
            let (line, column) = error.lineAndColumn(in: bytes)
            throw CatalogError(path: path, location: "line \(line) column \(column)", reason: error.reason)
        }
        self = try StoreKitFileDecoder(path: path).catalog(from: root)
    }
}

// MARK: - Decoding the tree

/// Turns a parsed `.storekit` tree into a `Catalog`, naming the JSON path of anything it rejects.
private struct StoreKitFileDecoder {
    let path: String

    func catalog(from root: JSONValue) throws(CatalogError) -> Catalog {
        let top = try object(root, at: "")
        var products: [CatalogProduct] = []
        var firstSeen: [String: String] = [:]   // product id → location of its productID

        func add(_ product: CatalogProduct, at location: String) throws(CatalogError) {
            let idLocation = join(location, "productID")
            if let first = firstSeen[product.id] {
                throw fail(idLocation, "duplicate product id \"\(product.id)\" (first defined at \(first))")
            }
            firstSeen[product.id] = idLocation
            products.append(product)
        }

        for (position, element) in try array(top, "products", at: "").enumerated() {
            let location = "products[\(position)]"
            try add(try product(element, at: location, allowed: [.consumable, .nonConsumable, .nonRenewing]), at: location)
        }

        var groups: [SubscriptionGroup] = []
        var groupLocations: [String: String] = [:]
        for (groupPosition, element) in try array(top, "subscriptionGroups", at: "").enumerated() {
            let groupLocation = "subscriptionGroups[\(groupPosition)]"
            let group = try object(element, at: groupLocation)
            let id = try requiredString(group, "id", at: groupLocation)
            if let first = groupLocations[id] {
                throw fail(join(groupLocation, "id"), "duplicate subscription group id \"\(id)\" (first defined at \(first))")
            }
            groupLocations[id] = join(groupLocation, "id")
            var members: [(level: Int, id: String)] = []
            let groupName = try optionalString(group, "name", at: groupLocation) ?? id
            let groupLocalizations = try localizations(group, at: groupLocation)
            let subscriptions = try array(group, "subscriptions", at: groupLocation)
            for (position, element) in subscriptions.enumerated() {
                let location = "\(join(groupLocation, "subscriptions"))[\(position)]"
                var subscription = try product(element, at: location, allowed: [.autoRenewable], defaultLevel: position + 1)
                // The group the subscription sits in is authoritative; `subscriptionGroupID` repeats it.
                subscription.subscriptionGroupID = id
                subscription.groupName = groupName
                subscription.groupLocalizations = groupLocalizations
                try add(subscription, at: location)
                members.append((subscription.groupLevel ?? position + 1, subscription.id))
            }
            // Stable: equal levels keep file order.
            let ordered = members.enumerated()
                .sorted { ($0.element.level, $0.offset) < ($1.element.level, $1.offset) }
                .map(\.element.id)
            groups.append(SubscriptionGroup(id: id, name: groupName, productIDs: ordered, localizations: groupLocalizations))
        }

        for (position, element) in try array(top, "nonRenewingSubscriptions", at: "").enumerated() {
            let location = "nonRenewingSubscriptions[\(position)]"
            try add(try product(element, at: location, allowed: [.nonRenewing]), at: location)
        }

        let settings = try settings(top, knownProducts: firstSeen)
        return Catalog(products: products, subscriptionGroups: groups, settings: settings, path: path)
    }

    // MARK: Products

    private static let typeNames: [String: ProductRecord.Kind] = [
        "Consumable": .consumable,
        "NonConsumable": .nonConsumable,
        "RecurringSubscription": .autoRenewable,
        "NonRenewingSubscription": .nonRenewing,
    ]

    private static func typeName(_ kind: ProductRecord.Kind) -> String {
        switch kind {
        case .consumable: "Consumable"
        case .nonConsumable: "NonConsumable"
        case .autoRenewable: "RecurringSubscription"
        case .nonRenewing: "NonRenewingSubscription"
        }
    }

    private func product(
        _ value: JSONValue, at location: String, allowed: [ProductRecord.Kind], defaultLevel: Int? = nil
    ) throws(CatalogError) -> CatalogProduct {
        let fields = try object(value, at: location)
        let id = try requiredString(fields, "productID", at: location)
        if id.isEmpty { throw fail(join(location, "productID"), "product id is empty") }

        let typeText = try requiredString(fields, "type", at: location)
        guard let kind = Self.typeNames[typeText] else {
            let valid = Self.typeNames.keys.sorted().joined(separator: ", ")
            throw fail(join(location, "type"), "unknown product type \"\(typeText)\" (expected one of \(valid))")
        }
        guard allowed.contains(kind) else {
            let expected = allowed.map(Self.typeName).joined(separator: " or ")
            let hint = kind == .autoRenewable ? "; auto-renewable subscriptions belong in subscriptionGroups[].subscriptions" : ""
            throw fail(join(location, "type"), "a \(typeText) product cannot appear here (expected \(expected))\(hint)")
        }

        let (price, priceCents, displayPrice) = try self.price(fields, at: location)
        var product = CatalogProduct(
            id: id, kind: kind, referenceName: try optionalString(fields, "referenceName", at: location) ?? id,
            price: price, priceCents: priceCents, displayPrice: displayPrice,
            familyShareable: try optionalBool(fields, "familyShareable", at: location) ?? false,
            localizations: try localizations(fields, at: location))

        if kind == .autoRenewable {
            product.subscriptionGroupID = try optionalString(fields, "subscriptionGroupID", at: location)
            let level = try optionalInt(fields, "groupNumber", at: location)
            if let level, level < 1 { throw fail(join(location, "groupNumber"), "level must be 1 or more, found \(level)") }
            product.groupLevel = level ?? defaultLevel
            product.subscriptionPeriod = try period(fields, "recurringSubscriptionPeriod", at: location, required: true)
            // Each offer is for a billing plan (`billingPlanType`, up front when absent).
            let introductory = try introductoryOffers(fields, at: location)
            let promotional = try array(fields, "adHocOffers", at: location).enumerated().map {
                (position, element) throws(CatalogError) in
                let here = "\(join(location, "adHocOffers"))[\(position)]"
                return (try planType(element, at: here), try offer(element, at: here))
            }
            let winBack = try array(fields, "winbackOffers", at: location).enumerated().map {
                (position, element) throws(CatalogError) in
                let here = "\(join(location, "winbackOffers"))[\(position)]"
                return (try planType(element, at: here), try winBackOffer(element, at: here))
            }
            product.introductoryOffer = introductory.first { $0.0 == .upFront }?.1
            product.promotionalOffers = promotional.filter { $0.0 == .upFront }.map(\.1)
            product.winBackOffers = winBack.filter { $0.0 == .upFront }.map(\.1)
            product.billingPlans = try billingPlans(fields, of: product, at: location) { plan in
                plan.introductoryOffer = introductory.first { $0.0 == .monthly }?.1
                plan.promotionalOffers = promotional.filter { $0.0 == .monthly }.map(\.1)
                plan.winBackOffers = winBack.filter { $0.0 == .monthly }.map(\.1)
            }
        }
        return product
    }

    // MARK: Billing plans

    /// An offer's or a plan's `billingPlanType`: `BILLED_UPFRONT` (also when absent) or `MONTHLY`;
    /// nil for a type this store does not know (a later format's): the plan, or the offer of that
    /// plan, is read past, as unknown keys are.
    private func planType(_ value: JSONValue, at location: String) throws(CatalogError) -> BillingPlan.Kind? {
        let fields = try object(value, at: location)
        guard let text = try optionalString(fields, "billingPlanType", at: location) else { return .upFront }
        return BillingPlan.Kind(name: text)
    }

    /// The enabled plans of `billingPlans`, the up-front one first (always there when any is);
    /// none without the key (the product is billed up front: `CatalogProduct.billingPlan(_:)`).
    /// The up-front plan bills the product's price each period (its prices in the file repeat
    /// it); a monthly plan bills its `displayPrice` each month and commits to the product's
    /// period (`commitmentDisplayPrice`, else the monthly price times its months), with the offers
    /// `monthlyOffers` gives it.
    private func billingPlans(
        _ fields: [String: JSONValue], of product: CatalogProduct, at location: String, monthlyOffers: (inout BillingPlan) -> Void
    ) throws(CatalogError) -> [BillingPlan] {
        let period = product.subscriptionPeriod ?? PaymentQueueEngine.defaultPeriod
        let upFront = product.upFrontPlan
        var plans: [BillingPlan] = []
        for (position, element) in try array(fields, "billingPlans", at: location).enumerated() {
            let here = "\(join(location, "billingPlans"))[\(position)]"
            let entry = try object(element, at: here)
            // A disabled plan is read past whatever else it says.
            guard try optionalBool(entry, "isEnabled", at: here) ?? true else { continue }
            guard try optionalString(entry, "billingPlanType", at: here) != nil else {
                throw fail(join(here, "billingPlanType"), "missing required key \"billingPlanType\"")
            }
            guard let kind = try planType(element, at: here) else { continue }
            guard !plans.contains(where: { $0.kind == kind }) else {
                throw fail(join(here, "billingPlanType"), "a second enabled \(kind.name) billing plan")
            }
            guard kind == .monthly else {
                plans.append(upFront)
                continue
            }
            guard let months = BillingPlan.months(in: period), months >= 2 else {
                throw fail(here, "a MONTHLY billing plan commits to the subscription's period in months, and \(period) is not 2 months or more")
            }
            let (price, cents, display) = try self.price(entry, "displayPrice", at: here)
            // Months × the price, no more than a price may be (12 digits before the point).
            let (total, overflow) = cents.multipliedReportingOverflow(by: Int64(months))
            guard !overflow, total < Self.priceCentsLimit else {
                throw fail(join(here, "displayPrice"), "\(months) months at \(display) cost more than a price may be (12 digits before the point)")
            }
            var commitment = (price * Decimal(months), total, "")
            if isPresent(entry, "commitmentDisplayPrice") {
                commitment = try self.price(entry, "commitmentDisplayPrice", at: here)
            } else {
                commitment.2 = "\(commitment.0)"
            }
            var plan = BillingPlan(
                kind: .monthly, price: price, priceCents: cents, displayPrice: display,
                billingPeriod: SubscriptionPeriod(value: 1, unit: .month), billingPeriodCount: months,
                commitmentPrice: commitment.0, commitmentPriceCents: commitment.1, commitmentDisplayPrice: commitment.2)
            monthlyOffers(&plan)
            plans.append(plan)
        }
        // The product's own price is always a way to pay: a purchase without a plan (StoreKit 1,
        // a client before protocol version 5) buys it, so the up-front plan is listed and may be
        // asked for even when the file lists only a monthly one, or disables BILLED_UPFRONT.
        if !plans.isEmpty, !plans.contains(where: { $0.kind == .upFront }) { plans.append(upFront) }
        return plans.sorted { $0.kind.rawValue < $1.kind.rawValue }
    }

    /// Cents of the smallest price too large to be one: 12 digits before the point.
    static let priceCentsLimit: Int64 = 100_000_000_000_000

    /// `displayPrice` (a string in every known format; a number is accepted too), else `price`.
    private func price(_ fields: [String: JSONValue], at location: String) throws(CatalogError) -> (Decimal, Int64, String) {
        try price(fields, !isPresent(fields, "displayPrice") && isPresent(fields, "price") ? "price" : "displayPrice", at: location)
    }

    /// The price under `key`.
    private func price(_ fields: [String: JSONValue], _ key: String, at location: String) throws(CatalogError) -> (Decimal, Int64, String) {
        let priceLocation = join(location, key)
        let text: String
        switch fields[key] {
        case .string(let string)?: text = string.trimmingWhitespace()
        case .number(let number)?: text = number
        case nil, .null?: throw fail(priceLocation, "missing required key \"\(key)\"")
        case let other?: throw fail(priceLocation, "expected a price like \"0.99\", found \(other.kindDescription)")
        }
        guard let parsed = PriceText.parse(text) else {
            throw fail(priceLocation, "expected a price like \"0.99\", found \"\(text)\"")
        }
        return (parsed.decimal, parsed.cents, text)
    }

    private func localizations(_ fields: [String: JSONValue], at location: String) throws(CatalogError) -> [CatalogProduct.Localization] {
        try array(fields, "localizations", at: location).enumerated().map { (position, element) throws(CatalogError) in
            let here = "\(join(location, "localizations"))[\(position)]"
            let entry = try object(element, at: here)
            return CatalogProduct.Localization(
                locale: try optionalString(entry, "locale", at: here) ?? "",
                displayName: try optionalString(entry, "displayName", at: here) ?? "",
                description: try optionalString(entry, "description", at: here) ?? "")
        }
    }

    // MARK: Offers

    /// `introductoryOffer` (an object or null); format 5 files also list `introductoryOffers`, one
    /// a billing plan. Each with its plan (nil: one this store does not know): the first of a
    /// plan is the plan's introductory offer.
    private func introductoryOffers(_ fields: [String: JSONValue], at location: String) throws(CatalogError)
        -> [(BillingPlan.Kind?, SubscriptionOffer)]
    {
        var offers: [(BillingPlan.Kind?, SubscriptionOffer)] = []
        if let single = fields["introductoryOffer"], !single.isNull {
            let here = join(location, "introductoryOffer")
            offers.append((try planType(single, at: here), try offer(single, at: here)))
        }
        for (position, element) in try array(fields, "introductoryOffers", at: location).enumerated() {
            let here = "\(join(location, "introductoryOffers"))[\(position)]"
            offers.append((try planType(element, at: here), try offer(element, at: here)))
        }
        return offers
    }

    private func offer(_ value: JSONValue, at location: String) throws(CatalogError) -> SubscriptionOffer {
        let fields = try object(value, at: location)
        let modeText = try requiredString(fields, "paymentMode", at: location)
        let mode: String
        switch modeText {
        case "free", SubscriptionOffer.freeTrial: mode = SubscriptionOffer.freeTrial
        case SubscriptionOffer.payAsYouGo: mode = SubscriptionOffer.payAsYouGo
        case SubscriptionOffer.payUpFront: mode = SubscriptionOffer.payUpFront
        default:
            throw fail(join(location, "paymentMode"), "unknown payment mode \"\(modeText)\" (expected free, payAsYouGo or payUpFront)")
        }
        let count = try optionalInt(fields, "numberOfPeriods", at: location) ?? 1
        guard count >= 1 else { throw fail(join(location, "numberOfPeriods"), "must be 1 or more, found \(count)") }

        var displayPrice = "0.00"
        var cents: Int64 = 0
        if mode != SubscriptionOffer.freeTrial || isPresent(fields, "displayPrice") {
            (_, cents, displayPrice) = try price(fields, at: location)
        }
        return SubscriptionOffer(
            id: try optionalString(fields, "offerID", at: location), paymentMode: mode,
            period: try period(fields, "subscriptionPeriod", at: location, required: false),
            periodCount: count, displayPrice: displayPrice, priceCents: cents)
    }

    /// A win-back offer: an offer with an `offerID`, and its eligibility (each field optional: no
    /// minimum paid time, any time since lapsing, no wait).
    private func winBackOffer(_ value: JSONValue, at location: String) throws(CatalogError) -> WinBackOffer {
        let subscriptionOffer = try offer(value, at: location)
        guard let id = subscriptionOffer.id, !id.isEmpty else { throw fail(join(location, "offerID"), "a win-back offer needs an offerID") }
        let fields = try object(value, at: location)
        func months(_ key: String, in fields: [String: JSONValue], at location: String) throws(CatalogError) -> Int? {
            guard let value = try optionalInt(fields, key, at: location) else { return nil }
            guard value >= 0 else { throw fail(join(location, key), "must be 0 or more, found \(value)") }
            return value
        }
        var lapsed = 0...Int.max
        if isPresent(fields, "timeSinceLastSubscribedInMonths") {
            let here = join(location, "timeSinceLastSubscribedInMonths")
            let window = try object(fields["timeSinceLastSubscribedInMonths"]!, at: here)
            let minimum = try months("minimum", in: window, at: here) ?? 0
            let maximum = try months("maximum", in: window, at: here) ?? Int.max
            guard minimum <= maximum else { throw fail(here, "minimum \(minimum) is more than maximum \(maximum)") }
            lapsed = minimum...maximum
        }
        return WinBackOffer(offer: subscriptionOffer, paidMonths: try months("paidSubscriptionDurationInMonths", in: fields, at: location) ?? 0,
                            lapsedMonths: lapsed, waitMonths: try months("waitBetweenOffersInMonths", in: fields, at: location) ?? 0)
    }

    private func period(_ fields: [String: JSONValue], _ key: String, at location: String, required: Bool) throws(CatalogError) -> SubscriptionPeriod? {
        let text = required ? try requiredString(fields, key, at: location) : try optionalString(fields, key, at: location)
        guard let text else { return nil }
        guard let period = SubscriptionPeriod(iso8601: text) else {
            throw fail(join(location, key), "expected a period like P1W, P1M or P1Y, found \"\(text)\"")
        }
        return period
    }

    // MARK: Settings

    private static let failErrorCodeKeys = ["_failTransactionsErrorCode", "_failTransactionErrorCode", "_failTransactionsError"]
    private static let interruptedKeys = ["_interruptedPurchases", "_disabledTransactionsFor"]

    /// Settings come from the `settings` object; keys at the top level (older files) apply too,
    /// with `settings` winning when both have one.
    private func settings(_ top: [String: JSONValue], knownProducts: [String: String]) throws(CatalogError) -> CatalogSettings {
        var merged: [String: (value: JSONValue, location: String)] = [:]
        for (key, value) in top where key.hasPrefix("_") { merged[key] = (value, key) }
        if let block = top["settings"], !block.isNull {
            for (key, value) in try object(block, at: "settings") { merged[key] = (value, "settings.\(key)") }
        }

        func bool(_ key: String) throws(CatalogError) -> Bool? {
            guard let entry = merged[key], !entry.value.isNull else { return nil }
            guard case .bool(let flag) = entry.value else { throw expected("true or false", entry.value, at: entry.location) }
            return flag
        }
        func int(_ key: String) throws(CatalogError) -> (value: Int, location: String)? {
            guard let entry = merged[key], !entry.value.isNull else { return nil }
            guard case .number(let text) = entry.value, let number = Int(text) else {
                throw expected("a whole number", entry.value, at: entry.location)
            }
            return (number, entry.location)
        }
        func string(_ key: String) throws(CatalogError) -> (value: String, location: String)? {
            guard let entry = merged[key], !entry.value.isNull else { return nil }
            guard case .string(let text) = entry.value else { throw expected("a string", entry.value, at: entry.location) }
            if text.utf8.contains(0) { throw fail(entry.location, "the string holds a NUL character (\\u0000)") }
            return (text, entry.location)
        }

        var settings = CatalogSettings()
        settings.askToBuyEnabled = try bool("_askToBuyEnabled") ?? false
        settings.failTransactionsEnabled = try bool("_failTransactionsEnabled") ?? false
        settings.billingGracePeriodEnabled = try bool("_billingGracePeriodEnabled") ?? false
        settings.renewalBillingIssuesEnabled = try bool("_renewalBillingIssuesEnabled") ?? false

        for key in Self.failErrorCodeKeys {
            guard let found = try int(key) else { continue }
            guard (0 ... 20).contains(found.value) else {
                throw fail(found.location, "expected an SKError code 0…20, found \(found.value)")
            }
            settings.failErrorCode = Int32(found.value)
            break
        }
        if let found = try int("_timeRate") {
            guard found.value >= 0 else { throw fail(found.location, "time rate must be 0 or more, found \(found.value)") }
            settings.timeRate = found.value
        }
        if let found = try string("_storefront") {
            let storefront = found.value
            guard storefront.utf8.count == 3, storefront.unicodeScalars.allSatisfy({ $0.isASCII && $0.properties.isAlphabetic }) else {
                throw fail(found.location, "expected a three-letter storefront code like USA, found \"\(storefront)\"")
            }
            settings.storefront = storefront.uppercased()
        }
        if let found = try string("_locale") {
            guard !found.value.isEmpty else { throw fail(found.location, "locale is empty") }
            settings.locale = found.value
        }

        for key in Self.interruptedKeys {
            guard let entry = merged[key], !entry.value.isNull else { continue }
            guard case .array(let elements) = entry.value else { throw expected("an array of product ids", entry.value, at: entry.location) }
            for (position, element) in elements.enumerated() {
                let location = "\(entry.location)[\(position)]"
                guard case .string(let id) = element else { throw expected("a product id", element, at: location) }
                guard knownProducts[id] != nil else { throw fail(location, "unknown product id \"\(id)\"") }
                if !settings.interruptedPurchases.contains(id) { settings.interruptedPurchases.append(id) }
            }
        }
        return settings
    }

    // MARK: Typed access with locations

    private func fail(_ location: String, _ reason: String) -> CatalogError {
        CatalogError(path: path, location: location.isEmpty ? "top level" : location, reason: reason)
    }

    private func expected(_ what: String, _ found: JSONValue, at location: String) -> CatalogError {
        fail(location, "expected \(what), found \(found.kindDescription)")
    }

    private func join(_ location: String, _ key: String) -> String {
        location.isEmpty ? key : "\(location).\(key)"
    }

    /// The key is there and not null.
    private func isPresent(_ fields: [String: JSONValue], _ key: String) -> Bool {
        fields[key].map { !$0.isNull } ?? false
    }

    private func object(_ value: JSONValue, at location: String) throws(CatalogError) -> [String: JSONValue] {
        guard case .object(let members) = value else { throw expected("an object", value, at: location) }
        let fields = Dictionary(members, uniquingKeysWith: { first, _ in first })  // the parser refuses duplicates
        return fields
    }

    /// The array under `key`; absent or null is an empty array.
    private func array(_ fields: [String: JSONValue], _ key: String, at location: String) throws(CatalogError) -> [JSONValue] {
        switch fields[key] {
        case nil, .null?: return []
        case .array(let elements)?: return elements
        case let other?: throw expected("an array", other, at: join(location, key))
        }
    }

    private func requiredString(_ fields: [String: JSONValue], _ key: String, at location: String) throws(CatalogError) -> String {
        guard let text = try optionalString(fields, key, at: location) else {
            throw fail(join(location, key), "missing required key \"\(key)\"")
        }
        return text
    }

    private func optionalString(_ fields: [String: JSONValue], _ key: String, at location: String) throws(CatalogError) -> String? {
        switch fields[key] {
        case nil, .null?: return nil
        case .string(let text)? where text.utf8.contains(0):
            // Identifiers and names reach the ledger and signed data, which must hold them whole.
            throw fail(join(location, key), "the string holds a NUL character (\\u0000)")
        case .string(let text)?: return text
        case let other?: throw expected("a string", other, at: join(location, key))
        }
    }

    private func optionalBool(_ fields: [String: JSONValue], _ key: String, at location: String) throws(CatalogError) -> Bool? {
        switch fields[key] {
        case nil, .null?: return nil
        case .bool(let flag)?: return flag
        case let other?: throw expected("true or false", other, at: join(location, key))
        }
    }

    private func optionalInt(_ fields: [String: JSONValue], _ key: String, at location: String) throws(CatalogError) -> Int? {
        switch fields[key] {
        case nil, .null?: return nil
        case .number(let text)?:
            guard let number = Int(text) else { throw fail(join(location, key), "expected a whole number, found \(text)") }
            return number
        case let other?: throw expected("a whole number", other, at: join(location, key))
        }
    }
}

// MARK: - Prices

/// A price as written in a file: digits with an optional decimal point (`.` or `,`), no sign.
private enum PriceText {
    static func parse(_ text: String) -> (decimal: Decimal, cents: Int64)? {
        let bytes = Array(text.utf8)
        let separators = bytes.indices.filter { bytes[$0] == UInt8(ascii: ".") || bytes[$0] == UInt8(ascii: ",") }
        guard separators.count <= 1 else { return nil }
        let split = separators.first ?? bytes.count
        let whole = bytes[..<split]
        let fraction = split < bytes.count ? bytes[(split + 1)...] : []
        guard !whole.isEmpty, whole.count <= 12, fraction.count <= 6,
              (whole + fraction).allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              separators.isEmpty || !fraction.isEmpty
        else { return nil }

        func value<C: Collection<UInt8>>(_ digits: C) -> Int64 {
            digits.reduce(0) { $0 * 10 + Int64($1 - UInt8(ascii: "0")) }
        }
        let significand = value(whole + fraction)
        let decimal = Decimal(sign: .plus, exponent: -fraction.count, significand: Decimal(significand))

        // Cents: the first two fraction digits, rounded half up on the rest.
        let padded = Array(fraction) + [UInt8](repeating: UInt8(ascii: "0"), count: max(0, 3 - fraction.count))
        var cents = value(whole) * 100 + value(padded[0 ..< 2])
        if padded[2] >= UInt8(ascii: "5") { cents += 1 }
        return (decimal, cents)
    }
}
