import Foundation
import StoreKitWire

extension Product {
    /// What is specific to an auto-renewable subscription: its group, period, offers and status.
    public struct SubscriptionInfo: Hashable, Sendable {
        /// The offer for buyers who never subscribed in the group, if any.
        public let introductoryOffer: SubscriptionOffer?
        /// The offers the app may apply to current or past subscribers.
        public let promotionalOffers: [SubscriptionOffer]
        /// The offers for subscribers whose subscription lapsed (`PurchaseOption.winBackOffer(_:)`;
        /// `RenewalInfo.eligibleWinBackOfferIDs` says which the user may have).
        public let winBackOffers: [SubscriptionOffer]
        /// The subscription group's identifier.
        public let subscriptionGroupID: String
        /// How long one period lasts before the subscription renews.
        public let subscriptionPeriod: SubscriptionPeriod
        /// The level in the group: a lower level is a higher level of service (`groupNumber`).
        public let groupLevel: Int
        /// The group's name for the user (the catalogue's group localization in the storefront's
        /// locale, else the group's reference name; empty from a daemon older than protocol 4).
        public let groupDisplayName: String
        /// The ways to pay for the subscription: up front, and monthly with a commitment to the
        /// subscription's period where the catalogue offers it (`billingPlans`). Buy one with
        /// `PurchaseOption.billingPlanType(_:)`.
        public let pricingTerms: [PricingTerms]

        /// The subscription terms of a catalogue record; nil unless it is an auto-renewable subscription.
        init?(record: ProductRecord) {
            guard record.kind == .autoRenewable, let groupID = record.subscriptionGroupID,
                  let period = record.subscriptionPeriod.flatMap(SubscriptionPeriod.init(iso8601:))
            else { return nil }
            subscriptionGroupID = groupID
            subscriptionPeriod = period
            groupLevel = Int(record.subscriptionGroupLevel ?? 0)
            groupDisplayName = record.subscriptionGroupDisplayName ?? ""
            introductoryOffer = record.introductoryOffer.map {
                SubscriptionOffer(record: $0, type: .introductory, currency: record.currencyCode, locale: record.locale, fallbackPeriod: period)
            }
            promotionalOffers = record.promotionalOffers.map {
                SubscriptionOffer(record: $0, type: .promotional, currency: record.currencyCode, locale: record.locale, fallbackPeriod: period)
            }
            winBackOffers = record.winBackOffers.map {
                SubscriptionOffer(record: $0, type: .winBack, currency: record.currencyCode, locale: record.locale, fallbackPeriod: period)
            }
            pricingTerms = PricingTerms.terms(
                of: record, period: period, offers: (introductoryOffer.map { [$0] } ?? []) + promotionalOffers + winBackOffers)
        }

        /// Whether the user may get the introductory offer of this subscription's group.
        public var isEligibleForIntroOffer: Bool {
            get async { await Self.isEligibleForIntroOffer(for: subscriptionGroupID) }
        }

        /// Whether the user may get an introductory offer in the group: only a user who never
        /// subscribed in it, as the store decides. False when the store cannot be reached.
        public static func isEligibleForIntroOffer(for groupID: String) async -> Bool {
            guard let history = try? await StoreConnection.shared.allTransactions({ .history(requestID: $0, afterID: $1) }) else { return false }
            let bought = history.filter { $0.state == .purchased || $0.state == .restored }
            let products = await ProductCache.shared.records(for: Set(bought.map(\.productID)))
            return !bought.contains { products[$0.productID]?.subscriptionGroupID == groupID }
        }

        /// The status of the user's subscriptions in this subscription's group.
        public var status: [Status] {
            get async throws { try await Self.status(for: subscriptionGroupID) }
        }

        /// The status of the user's subscriptions in a group: empty when the user never subscribed.
        public static func status(for groupID: String) async throws -> [Status] {
            try SimulatedFailures.throwIfSet(.subscriptionStatus)
            let reply: ServerMessage
            do {
                reply = try await StoreConnection.shared.reply { .subscriptionStatus(requestID: $0, groupID: groupID) }
            } catch {
                throw StoreKitError(error)
            }
            guard case .subscriptionStatus(_, let records) = reply else { throw StoreKitError.unknown }
            var statuses: [Status] = []
            for record in records { statuses.append(await Status(record: record)) }
            return statuses
        }
    }
}
