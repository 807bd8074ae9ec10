import FoundationEssentials
#if canImport(Glibc)
import Glibc
import StoreKitPosix
#endif
import StoreKitWire

/// The products an app sells and the initial test switches, loaded from an Xcode `.storekit` file.
///
/// Reading the file format is in `Catalog+StoreKitFile.swift`. A catalogue is a value: reloading
/// the config builds a new one and swaps it in.
public struct Catalog: Sendable, Equatable {
    /// Every product in file order: the `products` array (consumables, non-consumables), then each
    /// of `subscriptionGroups[].subscriptions`, then `nonRenewingSubscriptions`.
    public var products: [CatalogProduct] {
        didSet { index = Self.makeIndex(products) }
    }
    public var subscriptionGroups: [SubscriptionGroup]
    public var settings: CatalogSettings
    /// The file the catalogue came from (empty for one built in code).
    public var path: String

    /// Product id → position in `products`; the first one wins if ids repeat.
    private var index: [String: Int]

    public init(products: [CatalogProduct], subscriptionGroups: [SubscriptionGroup] = [], settings: CatalogSettings = CatalogSettings(), path: String = "") {
        self.products = products
        self.subscriptionGroups = subscriptionGroups
        self.settings = settings
        self.path = path
        self.index = Self.makeIndex(products)
    }

    /// A catalogue with no products and default settings.
    public static let empty = Catalog(products: [])

    /// Reads and parses the `.storekit` file at `path`.
    public static func load(path: String) throws(CatalogError) -> Catalog {
        let bytes: [UInt8]
        do throws(Errno) {
            bytes = try FileSystem.readContents(of: path, followingSymlinks: true)
        } catch {
            let reason = switch error.rawValue {
            case ENOENT: "no such file"
            case EISDIR: "is a directory, not a .storekit file"
            case EACCES: "permission denied"
            case EINVAL: "not a regular file"
            default: "cannot read the file: \(error)"
            }
            throw CatalogError(path: path, location: "", reason: reason)
        }
        let data = Data(bytes)
        return try Catalog(json: data, path: path)
    }

    /// The product with this id, if the catalogue has one.
    public func product(_ id: String) -> CatalogProduct? {
        index[id].map { products[$0] }
    }

    /// The subscription group with this id, if the catalogue has one.
    public func subscriptionGroup(_ id: String) -> SubscriptionGroup? {
        subscriptionGroups.first { $0.id == id }
    }

    /// The product as clients see it, in the catalogue's locale and its storefront's currency.
    public func record(_ id: String) -> ProductRecord? {
        product(id)?.record(locale: settings.locale, currencyCode: settings.currencyCode)
    }

    private static func makeIndex(_ products: [CatalogProduct]) -> [String: Int] {
        var index: [String: Int] = [:]
        index.reserveCapacity(products.count)
        for (position, product) in products.enumerated() where index[product.id] == nil {
            index[product.id] = position
        }
        return index
    }
}

/// A subscription group: auto-renewable subscriptions of which a buyer holds at most one.
public struct SubscriptionGroup: Sendable, Equatable {
    public var id: String
    /// The reference name (`name` in the file).
    public var name: String
    /// The group's subscriptions by level, highest level of service (`groupNumber` 1) first;
    /// subscriptions on the same level keep their file order.
    public var productIDs: [String]
    public var localizations: [CatalogProduct.Localization]

    public init(id: String, name: String, productIDs: [String], localizations: [CatalogProduct.Localization] = []) {
        self.id = id
        self.name = name
        self.productIDs = productIDs
        self.localizations = localizations
    }
}

/// The initial test switches of a catalogue (the `settings` object of a `.storekit` file), the same
/// ones `SKTestSession` exposes.
public struct CatalogSettings: Sendable, Equatable {
    /// `_askToBuyEnabled`: purchases become `deferred` until approved or declined.
    public var askToBuyEnabled: Bool
    /// `_failTransactionsEnabled`: purchases fail with `failErrorCode`.
    public var failTransactionsEnabled: Bool
    /// The `SKError.Code` raw value (0–20) used when failing transactions; nil means the
    /// simulator's default (`unknown`).
    public var failErrorCode: Int32?
    /// Product ids whose purchases are interrupted (`_interruptedPurchases`, `_disabledTransactionsFor`).
    public var interruptedPurchases: [String]
    /// Three-letter storefront code (`_storefront`), `USA` by default.
    public var storefront: String
    /// `_locale`, `en_US` by default.
    public var locale: String
    /// `_timeRate`, the raw value of `SKTestSession.TimeRate`: 0 is real time.
    public var timeRate: Int
    /// `_billingGracePeriodEnabled`.
    public var billingGracePeriodEnabled: Bool
    /// `_renewalBillingIssuesEnabled`: renewals fail with a billing issue.
    public var renewalBillingIssuesEnabled: Bool

    public init(
        askToBuyEnabled: Bool = false, failTransactionsEnabled: Bool = false, failErrorCode: Int32? = nil,
        interruptedPurchases: [String] = [], storefront: String = "USA", locale: String = "en_US", timeRate: Int = 0,
        billingGracePeriodEnabled: Bool = false, renewalBillingIssuesEnabled: Bool = false
    ) {
        self.askToBuyEnabled = askToBuyEnabled
        self.failTransactionsEnabled = failTransactionsEnabled
        self.failErrorCode = failErrorCode
        self.interruptedPurchases = interruptedPurchases
        self.storefront = storefront
        self.locale = locale
        self.timeRate = timeRate
        self.billingGracePeriodEnabled = billingGracePeriodEnabled
        self.renewalBillingIssuesEnabled = renewalBillingIssuesEnabled
    }

    /// The ISO 4217 currency of `storefront` (see `Storefronts`).
    public var currencyCode: String { Storefronts.currency(for: storefront) }
}
