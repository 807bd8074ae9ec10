@_spi(StoreKitTest) import OpenStoreKit

/// Apple's `SKTestFailure` (StoreKitTest): an error a test session can make a StoreKit API fail with.
public protocol SKTestFailure: Equatable, Sendable {}

/// Apple's `SKTestFailures` (StoreKitTest): the errors each failable StoreKit API can be made to
/// fail with, one enum per API (see `FailableStoreKitAPI`).
public enum SKTestFailures {
    /// The errors `AppStore.sync()` can be made to throw.
    public enum AppStoreSync: SKTestFailure {
        /// `AppStore.sync()` throws this `StoreKitError`.
        case generic(StoreKitError)
    }

    /// The errors `AppTransaction.shared` and `AppTransaction.refresh()` can be made to throw.
    public enum AppTransaction: SKTestFailure {
        /// `AppTransaction.shared` and `refresh()` throw this `StoreKitError`.
        case generic(StoreKitError)
    }

    /// The errors `Product.products(for:)` can be made to throw.
    public enum LoadProducts: SKTestFailure {
        /// `Product.products(for:)` throws this `StoreKitError`.
        case generic(StoreKitError)
    }

    /// The errors `Product.purchase(options:)` can be made to throw.
    public enum Purchase: SKTestFailure {
        /// `purchase(options:)` throws this `StoreKitError`.
        case generic(StoreKitError)
        /// `purchase(options:)` throws this `Product.PurchaseError`.
        case purchase(Product.PurchaseError)
    }

    /// The errors `Product.SubscriptionInfo.status(for:)` (and a subscription's `status`) can be
    /// made to throw.
    public enum SubscriptionStatus: SKTestFailure {
        /// `status(for:)` throws this `StoreKitError`.
        case generic(StoreKitError)
    }

    /// The verification failures signed values can be made to carry.
    public enum Verification: SKTestFailure {
        /// Transactions, renewal infos and the app transaction arrive as `.unverified(_, error)`.
        case verification(VerificationResult<Any>.VerificationError)
    }
}

// MARK: - Equality, and what each failure does in OpenStoreKit

/// A failure's effect on this process's StoreKit calls.
protocol SimulatedEffect {
    var effect: SimulatedFailures.Effect { get }
}

/// A failure whose only case is `.generic(StoreKitError)`: the API throws that error.
protocol GenericFailure: SimulatedEffect {
    var error: StoreKitError { get }
}

extension GenericFailure {
    var effect: SimulatedFailures.Effect { .thrown(error) }
}

// `StoreKitError` is not Equatable (`.systemError` holds any error), so the failures that carry
// one compare its cases, the URL error's code, and a system error's description (`isSame(as:)`).
extension SKTestFailures.AppStoreSync: GenericFailure {
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.error.isSame(as: rhs.error) }
    var error: StoreKitError { switch self { case .generic(let error): error } }
}

extension SKTestFailures.AppTransaction: GenericFailure {
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.error.isSame(as: rhs.error) }
    var error: StoreKitError { switch self { case .generic(let error): error } }
}

extension SKTestFailures.LoadProducts: GenericFailure {
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.error.isSame(as: rhs.error) }
    var error: StoreKitError { switch self { case .generic(let error): error } }
}

extension SKTestFailures.SubscriptionStatus: GenericFailure {
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.error.isSame(as: rhs.error) }
    var error: StoreKitError { switch self { case .generic(let error): error } }
}

extension SKTestFailures.Purchase: SimulatedEffect {
    public static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.generic(let lhs), .generic(let rhs)): lhs.isSame(as: rhs)
        case (.purchase(let lhs), .purchase(let rhs)): lhs == rhs
        default: false
        }
    }

    var effect: SimulatedFailures.Effect {
        switch self {
        case .generic(let error): .thrown(error)
        case .purchase(let error): .thrown(error)
        }
    }
}

extension SKTestFailures.Verification: SimulatedEffect {
    var effect: SimulatedFailures.Effect {
        switch self { case .verification(let error): .unverified(error) }
    }
}

extension StoreKitError {
    /// The same case; for `.networkError` the same code, for `.systemError` the same description.
    func isSame(as other: StoreKitError) -> Bool {
        switch (self, other) {
        case (.unknown, .unknown), (.userCancelled, .userCancelled), (.notAvailableInStorefront, .notAvailableInStorefront),
             (.notEntitled, .notEntitled), (.unsupported, .unsupported):
            true
        case (.networkError(let lhs), .networkError(let rhs)): lhs.code == rhs.code
        case (.systemError(let lhs), .systemError(let rhs)): String(describing: lhs) == String(describing: rhs)
        default: false
        }
    }
}
