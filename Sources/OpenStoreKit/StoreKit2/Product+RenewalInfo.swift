import Foundation
import StoreKitWire

extension Product.SubscriptionInfo {
    /// What happens to a subscription at its next renewal (Apple's `JWSRenewalInfo` fields).
    public struct RenewalInfo: Hashable, Sendable, JWSRepresentable {
        /// The original transaction of the subscription.
        public let originalTransactionID: UInt64
        /// The product the user is subscribed to now.
        public let currentProductID: String
        /// Whether the subscription renews at the end of the period.
        public let willAutoRenew: Bool
        /// The product it renews to (differs from `currentProductID` after a downgrade).
        public let autoRenewPreference: String?
        /// Why the subscription expired, once it has.
        public let expirationReason: ExpirationReason?
        /// When the billing grace period ends, while in it.
        public let gracePeriodExpirationDate: Date?
        /// Whether the store is retrying a failed renewal.
        public let isInBillingRetry: Bool
        /// Whether a price increase waits for the subscriber's consent, or was agreed
        /// (`storekitctl price-increase`, `price-consent`).
        public let priceIncreaseStatus: PriceIncreaseStatus
        /// When the store signed the renewal info.
        public let signedDate: Date
        /// The environment that signed it.
        public let environment: AppStore.Environment
        /// When the latest continuous run of the subscription started.
        public let recentSubscriptionStartDate: Date
        /// When the next renewal happens.
        public let renewalDate: Date?
        /// The win-back offers the lapsed subscriber may have now (`eligibleWinBackOfferIds`).
        public let eligibleWinBackOfferIDs: [String]
        /// How the next billing period is billed (`renewalBillingPlanType`).
        public let renewalBillingPlanType: Product.SubscriptionInfo.BillingPlanType?
        /// What happens when the commitment of a subscription billed monthly ends; nil for one
        /// billed up front.
        public let commitmentInfo: CommitmentInfo?
        /// What an Advanced Commerce subscription's next renewal sells; nil for any other.
        public let advancedCommerceInfo: AdvancedCommerceInfo?
        /// The renewal info as JSON: its signed payload.
        public let jsonRepresentation: Data
        /// The compact JWS it came in.
        let jwsRepresentation: String

        /// Renewal info from its payload; what the payload lacks comes from the subscription's latest transaction.
        init(payload: SignedPayload?, transaction: TransactionRecord, state: RenewalState, jws: String) {
            let start = Date(milliseconds: transaction.date)
            let expires = transaction.expiresDate.map(Date.init(milliseconds:))
            originalTransactionID = payload?.uint64("originalTransactionId") ?? transaction.originalID ?? transaction.id
            currentProductID = payload?.string("productId") ?? transaction.productID
            willAutoRenew = payload?.int("autoRenewStatus").map { $0 == 1 } ?? (state == .subscribed)
            autoRenewPreference = payload?.string("autoRenewProductId") ?? transaction.productID
            expirationReason = payload?.int("expirationIntent").map(ExpirationReason.init(rawValue:))
            gracePeriodExpirationDate = payload?.date("gracePeriodExpiresDate")
            isInBillingRetry = payload?.bool("isInBillingRetryPeriod") ?? (state == .inBillingRetryPeriod)
            switch payload?.int("priceIncreaseStatus") {
            case 0: priceIncreaseStatus = .pending
            case 1: priceIncreaseStatus = .agreed
            default: priceIncreaseStatus = .noIncreasePending
            }
            signedDate = payload?.date("signedDate") ?? start
            environment = payload?.string("environment").map(AppStore.Environment.init(rawValue:)) ?? .xcode
            recentSubscriptionStartDate = payload?.date("recentSubscriptionStartDate") ?? start
            renewalDate = payload?.date("renewalDate") ?? expires
            eligibleWinBackOfferIDs = payload?.fields["eligibleWinBackOfferIds"] as? [String] ?? []
            renewalBillingPlanType = payload?.string("renewalBillingPlanType").map(Product.SubscriptionInfo.BillingPlanType.init(rawValue:))
            commitmentInfo = CommitmentInfo(payload: payload)
            advancedCommerceInfo = AdvancedCommerceInfo(payload: payload)
            jsonRepresentation = payload?.json ?? Data()
            jwsRepresentation = jws
        }
    }
}

extension Product.SubscriptionInfo.RenewalInfo {
    /// Why a subscription expired (`expirationIntent`).
    public struct ExpirationReason: RawRepresentable, Hashable, Sendable {
        /// The payload's number.
        public let rawValue: Int

        /// Creates a reason from the payload's number.
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// The user turned automatic renewal off.
        public static let autoRenewDisabled = ExpirationReason(rawValue: 1)
        /// A billing error ended it.
        public static let billingError = ExpirationReason(rawValue: 2)
        /// The user did not consent to a price increase.
        public static let didNotConsentToPriceIncrease = ExpirationReason(rawValue: 3)
        /// The product was no longer available at renewal.
        public static let productUnavailable = ExpirationReason(rawValue: 4)
        /// Another reason.
        public static let unknown = ExpirationReason(rawValue: 5)
    }

    /// Whether the user agreed to a price increase of the subscription.
    public enum PriceIncreaseStatus: Hashable, Sendable {
        /// No price increase is pending.
        case noIncreasePending
        /// The user was told of an increase and has not agreed yet.
        case pending
        /// The user agreed to the increase.
        case agreed
    }
}
