import StoreKitWire

/// A purchase request of Apple's Advanced Commerce API, as an app passes it to
/// `AdvancedCommerceProduct.purchase(compactJWS:)`: the developer's server signs it (the JWS's
/// `request` claim holds it, base64 of its JSON), and the App Store sells the items it names
/// under the product the app buys, a "generic SKU" of the catalogue. The two requests an app
/// makes to buy something new are read: `CREATE_ONE_TIME_CHARGE` (one item, with `item`) and
/// `CREATE_SUBSCRIPTION` (`items`, `descriptors` and `period`). Prices are in milliunits of
/// `currency`, as Apple's are.
public struct AdvancedCommerceRequest: Sendable, Equatable {
    /// The request's `operation`.
    public enum Operation: String, Sendable {
        case oneTimeCharge = "CREATE_ONE_TIME_CHARGE"
        case subscription = "CREATE_SUBSCRIPTION"
    }

    /// An item's introductory price (`offer`), for a subscription's first periods.
    public struct Offer: Sendable, Equatable {
        /// `P3D`, `P1W`, …, `P1Y`.
        public var period: String
        /// How many periods it lasts, 1 to 12.
        public var periodCount: Int
        public var priceMillis: Int64
        /// `ACQUISITION`, `WIN_BACK` or `RETENTION`.
        public var reason: String
    }

    /// One thing bought: the developer's own product (`SKU`).
    public struct Item: Sendable, Equatable {
        public var sku: String
        public var displayName: String
        public var description: String
        public var priceMillis: Int64
        public var offer: Offer?
    }

    public var operation: Operation
    /// `requestInfo.requestReferenceId`: the server's UUID of the request.
    public var requestReferenceID: String
    /// `requestInfo.appAccountToken`, when the server names the buyer's account.
    public var appAccountToken: String?
    public var currency: String
    public var taxCode: String
    /// The storefront the server priced for (an ISO 3166-1 alpha-3 code), when it names one.
    public var storefront: String?
    public var items: [Item]
    /// A subscription's `descriptors`.
    public var displayName: String?
    public var description: String?
    /// A subscription's `period`.
    public var period: SubscriptionPeriod?

    /// Apple's limits (the App Store Server Library checks the same).
    public static let skuLength = 128
    public static let displayNameLength = 30
    public static let descriptionLength = 45
    /// The most items a subscription request may list (Apple documents none; this bounds what the
    /// ledger keeps of a request, with the texts' bytes).
    public static let itemLimit = 100
    /// The most UTF-8 bytes per character a text may take: a character is counted as Apple counts
    /// it, but one of many combining marks would be kilobytes.
    public static let bytesPerCharacter = 4
    /// A subscription's periods, and an offer's.
    public static let periods: Set<String> = ["P1W", "P1M", "P2M", "P3M", "P6M", "P1Y"]
    public static let offerPeriods: Set<String> = ["P3D", "P1W", "P2W", "P1M", "P2M", "P3M", "P6M", "P9M", "P1Y"]
    public static let offerReasons: Set<String> = ["ACQUISITION", "WIN_BACK", "RETENTION"]
    /// The audience (`aud`) of the JWS that carries a request.
    public static let audience = "advanced-commerce-api"

    /// Why a request cannot be read.
    public struct Invalid: Error, Sendable, Equatable {
        public var message: String
        init(_ message: String) { self.message = message }
    }

    /// Reads a request's JSON; the error says the first thing wrong.
    public static func parse(_ bytes: [UInt8]) -> Result<AdvancedCommerceRequest, Invalid> {
        do throws(Invalid) {
            return .success(try AdvancedCommerceRequest(json: bytes))
        } catch {
            return .failure(error)
        }
    }

    init(json bytes: [UInt8]) throws(Invalid) {
        guard let json = try? JSONValue.parse(bytes), case .object = json else { throw Invalid("the request is not a JSON object") }
        guard let name = json["operation"]?.string, let operation = Operation(rawValue: name) else {
            throw Invalid("operation \(json["operation"]?.kindDescription ?? "(none)") is not CREATE_ONE_TIME_CHARGE or CREATE_SUBSCRIPTION"
                          + " (the requests an app makes to buy)")
        }
        guard json["version"]?.string == "1" else { throw Invalid("version \(json["version"]?.kindDescription ?? "(none)") is not \"1\"") }
        self.operation = operation
        guard let info = json["requestInfo"], case .object = info else { throw Invalid("the request has no requestInfo") }
        requestReferenceID = try Self.uuid(info["requestReferenceId"], "requestInfo.requestReferenceId")
        appAccountToken = try info["appAccountToken"].flatMap { value throws(Invalid) in
            value.isNull ? nil : try Self.uuid(value, "requestInfo.appAccountToken")
        }
        currency = try Self.text(json["currency"], "currency", limit: 3)
        guard currency.utf8.count == 3, currency.utf8.allSatisfy({ (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }) else {
            throw Invalid("currency \(currency) is not an ISO 4217 code")
        }
        taxCode = try Self.text(json["taxCode"], "taxCode", limit: 64)
        storefront = try json["storefront"].flatMap { value throws(Invalid) in
            value.isNull ? nil : try Self.text(value, "storefront", limit: 3)
        }
        switch operation {
        case .oneTimeCharge:
            guard let item = json["item"] else { throw Invalid("a one-time charge has no item") }
            items = [try Self.item(item, "item", offerAllowed: false)]
        case .subscription:
            guard case .array(let list)? = json["items"], !list.isEmpty else { throw Invalid("a subscription has no items") }
            guard list.count <= Self.itemLimit else { throw Invalid("a subscription lists \(list.count) items, more than \(Self.itemLimit)") }
            var items: [Item] = []
            for (index, value) in list.enumerated() { items.append(try Self.item(value, "items[\(index)]", offerAllowed: true)) }
            guard Set(items.map(\.sku)).count == items.count else { throw Invalid("two items have the same SKU") }
            self.items = items
            guard let descriptors = json["descriptors"], case .object = descriptors else { throw Invalid("a subscription has no descriptors") }
            displayName = try Self.text(descriptors["displayName"], "descriptors.displayName", limit: Self.displayNameLength)
            description = try Self.text(descriptors["description"], "descriptors.description", limit: Self.descriptionLength)
            guard let text = json["period"]?.string, Self.periods.contains(text), let period = SubscriptionPeriod(iso8601: text) else {
                throw Invalid("period \(json["period"]?.kindDescription ?? "(none)") is not one of \(Self.periods.sorted().joined(separator: ", "))")
            }
            self.period = period
        }
    }

    private static func text(_ value: JSONValue?, _ name: String, limit: Int) throws(Invalid) -> String {
        guard let text = value?.string, !text.isEmpty else { throw Invalid("\(name) is \(value?.kindDescription ?? "missing"), not a string") }
        guard text.count <= limit else { throw Invalid("\(name) is longer than \(limit) characters") }
        guard text.utf8.count <= limit * bytesPerCharacter else {
            throw Invalid("\(name) is longer than \(limit * bytesPerCharacter) bytes of UTF-8 (\(limit) characters of at most \(bytesPerCharacter))")
        }
        return text
    }

    private static func uuid(_ value: JSONValue?, _ name: String) throws(Invalid) -> String {
        let text = try text(value, name, limit: 36)
        guard PaymentQueueEngine.appAccountToken(text) != nil else { throw Invalid("\(name) \(text) is not a UUID") }
        return text.lowercased()
    }

    /// Milliunits: a whole number from 0 to a billion units.
    private static func millis(_ value: JSONValue?, _ name: String) throws(Invalid) -> Int64 {
        let number: Int64? = switch value {
        case .int(let number)?: number
        case .number(let text)?: Int64(text)
        default: nil
        }
        guard let number, (0...1_000_000_000_000).contains(number) else {
            throw Invalid("\(name) is \(value?.kindDescription ?? "missing"), not a price in milliunits (a whole number, 0 or more)")
        }
        return number
    }

    private static func item(_ value: JSONValue, _ name: String, offerAllowed: Bool) throws(Invalid) -> Item {
        guard case .object = value else { throw Invalid("\(name) is not an object") }
        var item = Item(sku: try text(value["SKU"], "\(name).SKU", limit: skuLength),
                        displayName: try text(value["displayName"], "\(name).displayName", limit: displayNameLength),
                        description: try text(value["description"], "\(name).description", limit: descriptionLength),
                        priceMillis: try millis(value["price"], "\(name).price"))
        if let offer = value["offer"], !offer.isNull {
            guard offerAllowed, case .object = offer else { throw Invalid("\(name).offer is not an offer of a subscription item") }
            guard let period = offer["period"]?.string, offerPeriods.contains(period) else {
                throw Invalid("\(name).offer.period is not one of \(offerPeriods.sorted().joined(separator: ", "))")
            }
            let count: Int? = switch offer["periodCount"] {
            case .int(let number)?: Int(exactly: number)
            case .number(let text)?: Int(text)
            default: nil
            }
            guard let count, (1...12).contains(count) else { throw Invalid("\(name).offer.periodCount is not from 1 to 12") }
            guard let reason = offer["reason"]?.string, offerReasons.contains(reason) else {
                throw Invalid("\(name).offer.reason is not one of \(offerReasons.sorted().joined(separator: ", "))")
            }
            let price = try millis(offer["price"], "\(name).offer.price")
            guard price <= item.priceMillis else { throw Invalid("\(name).offer.price is more than the item's price") }
            item.offer = Offer(period: period, periodCount: count, priceMillis: price, reason: reason)
        }
        return item
    }

    /// The request as JSON, in Apple's names: what the ledger keeps (and `parse` reads back).
    public var json: JSONValue {
        var info: [(String, JSONValue)] = [("requestReferenceId", .string(requestReferenceID))]
        if let appAccountToken { info.append(("appAccountToken", .string(appAccountToken))) }
        var members: [(String, JSONValue)] = [
            ("operation", .string(operation.rawValue)), ("version", .string("1")), ("requestInfo", .object(info)),
            ("currency", .string(currency)), ("taxCode", .string(taxCode)),
        ]
        if let storefront { members.append(("storefront", .string(storefront))) }
        switch operation {
        case .oneTimeCharge:
            members.append(("item", Self.itemJSON(items[0], priceMillis: items[0].priceMillis, offer: items[0].offer)))
        case .subscription:
            members.append(("items", .array(items.map { Self.itemJSON($0, priceMillis: $0.priceMillis, offer: $0.offer) })))
            members.append(("descriptors", descriptorsJSON))
            members.append(("period", .string(period?.description ?? "P1M")))
        }
        return .object(members)
    }

    /// An item in Apple's names, at `priceMillis`, with `offer` when one is told.
    private static func itemJSON(_ item: Item, priceMillis: Int64, offer: Offer?) -> JSONValue {
        var members: [(String, JSONValue)] = [("SKU", .string(item.sku)), ("displayName", .string(item.displayName)),
                                              ("description", .string(item.description)), ("price", .int(priceMillis))]
        if let offer {
            members.append(("offer", .object([("period", .string(offer.period)), ("periodCount", .int(Int64(offer.periodCount))),
                                              ("price", .int(offer.priceMillis)), ("reason", .string(offer.reason))])))
        }
        return .object(members)
    }

    private var descriptorsJSON: JSONValue {
        .object([("displayName", .string(displayName ?? "")), ("description", .string(description ?? ""))])
    }

    /// The items as the `period`th period prices them: an offer is told while it lasts.
    private func itemsJSON(period index: Int, revocationDate: Int64? = nil) -> JSONValue {
        .array(items.map { item in
            guard case .object(var fields) = Self.itemJSON(item, priceMillis: priceMillis(of: item, period: index),
                                                          offer: item.offer.flatMap { index < $0.periodCount ? $0 : nil }) else {
                preconditionFailure("an item is an object")
            }
            if let revocationDate { fields.append(("revocationDate", .int(revocationDate))) }
            return .object(fields)
        })
    }

    /// What an item costs in the `period`th period of a subscription (0 the first; a one-time
    /// charge has only that): its offer's price while the offer lasts, else its price.
    func priceMillis(of item: Item, period: Int) -> Int64 {
        if let offer = item.offer, period < offer.periodCount { return offer.priceMillis }
        return item.priceMillis
    }

    /// What the transaction of the `period`th period costs before tax.
    public func taxExclusivePriceMillis(period: Int) -> Int64 {
        items.reduce(0) { $0 + priceMillis(of: $1, period: period) }
    }

    /// Apple's `advancedCommerceTransactionInfo` object (the signed transaction's
    /// `advancedCommerceInfo`) for the transaction of the `period`th period.
    /// The simulated store levies no tax: `taxRate` "0" and `estimatedTax` 0 (the price the
    /// transaction says is the tax-exclusive one). A transaction revoked (refunded) revokes each
    /// item with it (`revocationDate`).
    public func transactionInfo(period index: Int, revocationDate: Int64? = nil) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("requestReferenceId", .string(requestReferenceID)), ("taxCode", .string(taxCode)),
            ("taxExclusivePrice", .int(taxExclusivePriceMillis(period: index))), ("taxRate", .string("0")),
            ("estimatedTax", .int(0)),
        ]
        if operation == .subscription {
            members.append(("descriptors", descriptorsJSON))
            if let period { members.append(("period", .string(period.description))) }
        }
        members.append(("items", itemsJSON(period: index, revocationDate: revocationDate)))
        return .object(members)
    }

    /// Apple's `advancedCommerceRenewalInfo` object (a subscription's renewal info's
    /// `advancedCommerceInfo`): what the renewal into the `period`th period will sell, at its
    /// prices. No `consistencyToken`: this store takes no modify requests that would need one.
    public func renewalInfo(period index: Int) -> JSONValue {
        // The consistency token names the subscription's state the next renewal is of (Apple's
        // modify requests quote it); the request and the period are that state here.
        var members: [(String, JSONValue)] = [("requestReferenceId", .string(requestReferenceID)), ("taxCode", .string(taxCode)),
                                              ("consistencyToken", .string("\(requestReferenceID).\(index)")),
                                              ("descriptors", descriptorsJSON)]
        if let period { members.append(("period", .string(period.description))) }
        members.append(("items", itemsJSON(period: index)))
        return .object(members)
    }
}
