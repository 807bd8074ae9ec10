/// One buyer's auto-renewable subscription in one subscription group.
///
/// `originalID` is the original transaction of the chain: every purchase, renewal, upgrade and
/// resubscription in the group links to it. `due` is when the next scheduled event (renewal or
/// expiry, end of grace period, end of billing retry) fires on the store clock; nil: none.
public struct Subscription: Sendable, Equatable {
    public enum Status: Int, Sendable, CaseIterable {
        /// Renews (or expires, with auto-renew off) at `expiresDate`.
        case active = 0
        /// Ended: auto-renew was off, billing retry gave up, or it was expired on demand.
        case expired = 1
        /// A renewal failed; still retried until `billingRetryEnd`, no access meanwhile.
        case billingRetry = 2
        /// A renewal failed; access continues until `gracePeriodEnd`, then billing retry.
        case gracePeriod = 3
        /// Refunded or revoked: never renews again.
        case revoked = 4

        /// StoreKit 2's `Product.SubscriptionInfo.RenewalState` names.
        public var name: String {
            switch self {
            case .active: "subscribed"
            case .expired: "expired"
            case .billingRetry: "inBillingRetryPeriod"
            case .gracePeriod: "inGracePeriod"
            case .revoked: "revoked"
            }
        }

        /// Whether the buyer is entitled to the subscription's content in this state.
        public var isEntitled: Bool { self == .active || self == .gracePeriod }

        /// Whether the subscription is still alive (can renew or recover).
        public var isLive: Bool { self == .active || self == .gracePeriod || self == .billingRetry }
    }

    public var originalID: UInt64
    public var uid: UInt32
    public var app: String
    public var groupID: String
    public var productID: String
    public var quantity: Int32
    public var applicationUsername: String?
    public var status: Status
    public var periodStart: Int64
    public var expiresDate: Int64
    public var autoRenew: Bool
    /// A downgrade or crossgrade that takes effect at the next renewal.
    public var nextProductID: String?
    /// Pay-as-you-go introductory periods still to come after the current one.
    public var offerPeriodsLeft: Int
    public var gracePeriodEnd: Int64?
    public var billingRetryEnd: Int64?
    public var due: Int64?
    public var lastTransactionID: UInt64
    public var renewals: Int

    public init(
        originalID: UInt64, uid: UInt32, app: String, groupID: String, productID: String, quantity: Int32,
        applicationUsername: String? = nil, status: Status = .active, periodStart: Int64, expiresDate: Int64,
        autoRenew: Bool = true, nextProductID: String? = nil, offerPeriodsLeft: Int = 0,
        gracePeriodEnd: Int64? = nil, billingRetryEnd: Int64? = nil, due: Int64?, lastTransactionID: UInt64,
        renewals: Int = 0
    ) {
        self.originalID = originalID
        self.uid = uid
        self.app = app
        self.groupID = groupID
        self.productID = productID
        self.quantity = quantity
        self.applicationUsername = applicationUsername
        self.status = status
        self.periodStart = periodStart
        self.expiresDate = expiresDate
        self.autoRenew = autoRenew
        self.nextProductID = nextProductID
        self.offerPeriodsLeft = offerPeriodsLeft
        self.gracePeriodEnd = gracePeriodEnd
        self.billingRetryEnd = billingRetryEnd
        self.due = due
        self.lastTransactionID = lastTransactionID
        self.renewals = renewals
    }
}
