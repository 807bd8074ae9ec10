// StoreKit 2 code written the way apps and Apple's sample code write it, against `import
// OpenStoreKit` alone (no `@testable`, no `import Foundation`): if this file compiles, such apps
// compile with `StoreKit` replaced by `OpenStoreKit`. The runtime checks exercise the value types;
// the store calls sit in functions the tests never call (they need a daemon: see
// StoreKitIntegrationTests/StoreKit2*.swift).
import OpenStoreKit
import Testing

// Module-qualified names, as apps write them to avoid SwiftUI's `Transaction`.
private typealias StoreTransaction = OpenStoreKit.Transaction
private typealias RenewalInfo = OpenStoreKit.Product.SubscriptionInfo.RenewalInfo
private typealias RenewalState = OpenStoreKit.Product.SubscriptionInfo.RenewalState

// App types whose names must not clash with the library.
private struct Payment { var amount: Decimal }
private struct Purchase { var productID: String }
private final class PaymentQueue {}

/// A store in the common shape (the sample's `Store` is the other common spelling, compiled with
/// the package): a listener task for the life of the app, a verification check, products
/// requested once, entitlements recomputed after each change.
@MainActor
private final class Store {
    private(set) var products: [Product] = []
    private(set) var purchased: Set<String> = []
    private(set) var subscriptionStatus: RenewalState?
    var updates: Task<Void, Error>?

    init() {
        updates = listenForTransactions()
    }

    /// The listener as apps also write it: matching verified transactions in the loop itself.
    nonisolated func listenForTransactions() -> Task<Void, Error> {
        Task.detached(priority: .background) {
            for await case .verified(let transaction) in StoreTransaction.updates {
                await self.updateCustomerProductStatus()
                await transaction.finish()
            }
        }
    }

    func requestProducts() async {
        products = (try? await Product.products(for: ["coins", "premium"])) ?? []
    }

    /// A purchase as apps also write it: only a verified success is granted.
    func purchase(_ product: Product, account: UUID) async throws -> StoreTransaction? {
        guard case .success(.verified(let transaction)) = try await product.purchase(options: [.appAccountToken(account), .quantity(2)]) else {
            return nil
        }
        await updateCustomerProductStatus()
        await transaction.finish()
        return transaction
    }

    func updateCustomerProductStatus() async {
        var purchased: Set<String> = []
        for await result in StoreTransaction.currentEntitlements {
            guard let transaction = try? result.payloadValue, transaction.revocationDate == nil else { continue }
            switch transaction.productType {
            case .nonConsumable, .autoRenewable, .nonRenewable:
                purchased.insert(transaction.productID)
            default:
                break
            }
        }
        self.purchased = purchased
        let statuses = try? await products.first?.subscription?.status
        subscriptionStatus = statuses?.first { $0.state == .subscribed || $0.state == .inGracePeriod }?.state
        if let renewal = try? statuses?.first?.renewalInfo.payloadValue {
            print(renewal.willAutoRenew, renewal.autoRenewPreference ?? "", renewal.expirationReason == .autoRenewDisabled)
        }
    }

    func restore() async throws {
        try await AppStore.sync()
        await updateCustomerProductStatus()
    }

    func everything() async -> [StoreTransaction] {
        var all: [StoreTransaction] = []
        for await result in StoreTransaction.all { all.append(result.unsafePayloadValue) }
        for await result in StoreTransaction.unfinished { await result.unsafePayloadValue.finish() }
        if let latest = await StoreTransaction.latest(for: "coins"), case .verified(let transaction) = latest {
            all.append(transaction)
        }
        if let entitlement = await StoreTransaction.currentEntitlement(for: "premium") {
            print(entitlement.jwsRepresentation, entitlement.signedDate)
        }
        return all
    }

    func appInfo() async throws -> String {
        let shared = try await AppTransaction.shared
        let app = try shared.payloadValue
        print(AppStore.canMakePayments, await Storefront.current?.countryCode ?? "")
        return app.originalAppVersion + app.bundleID + app.appVersion
    }

    /// The live sequences and status lookups apps use beside `Transaction.updates`.
    nonisolated func watchStorefrontAndStatuses() -> [Task<Void, Never>] {
        [
            Task { for await storefront in Storefront.updates { print(storefront.countryCode, storefront.id) } },
            Task {
                for await status in Product.SubscriptionInfo.Status.updates {
                    if case .verified(let transaction) = status.transaction, transaction.ownershipType == .familyShared {
                        print("shared by the family", status.state, await transaction.subscriptionStatus?.state as Any)
                    }
                }
            },
            Task { _ = try? await Product.SubscriptionInfo.status(transactionID: 1)?.renewalInfo },
            Task {
                guard let product = try? await Product.products(for: ["premium"]).first, let offer = product.subscription?.winBackOffers.first
                else { return }
                _ = try? await product.purchase(options: [.winBackOffer(offer), .custom(key: "campaign", value: "spring"),
                                                          .custom(key: "score", value: 1.5), .custom(key: "beta", value: true),
                                                          .onStorefrontChange { $0.countryCode == "USA" }])
                _ = try? await product.purchase(options: [.promotionalOffer(offer, compactJWS: "a.b.c"),
                                                          .introductoryOfferEligibility(compactJWS: "d.e.f")])
                print(product.subscription?.groupDisplayName ?? "", await product.latestTransaction?.unsafePayloadValue.offer?.type as Any)
            },
            Task { _ = try? await self.purchaseMonthlyWithCommitment() },
            Task {
                // The Advanced Commerce API: a generic SKU bought with the server's signed request.
                guard let generic = try? await AdvancedCommerceProduct(id: "com.example.generic") else { return }
                let options: Set<AdvancedCommerceProduct.PurchaseOption> = [.appAccountToken(UUID())]
                guard case .success(.verified(let transaction))? = try? await generic.purchase(compactJWS: "a.b.c", options: options),
                      let info: StoreTransaction.AdvancedCommerceInfo = transaction.advancedCommerceInfo else { return }
                let total: Decimal = info.taxExclusivePrice + info.estimatedTax
                for item: StoreTransaction.AdvancedCommerceInfo.Item in info.items {
                    let details = item.details
                    print(details.sku, details.displayName, details.description, details.price, details.offer?.period.unit as Any,
                          details.offer?.periodCount ?? 0, details.offer?.price ?? 0, details.offer?.reason == .winBack,
                          item.refunds?.first?.refundType == .full, item.refunds?.first?.reason == .other,
                          item.refunds?.first?.amount ?? 0, item.refunds?.first?.date as Any, item.revocationDate as Any)
                }
                let period: Product.SubscriptionPeriod? = info.period
                print(info.requestReferenceID, info.taxCode, info.taxRate, total, period?.value ?? 0, info.displayName ?? "",
                      info.description ?? "", generic.id, generic.type == .autoRenewable, await generic.latestTransaction != nil)
                for await result in generic.currentEntitlements { print(result.unsafePayloadValue.id) }
                for await result in generic.allTransactions { print(result.unsafePayloadValue.id) }
                // What the next renewal sells, from the subscription's renewal info.
                if let status = try? await Product.products(for: [generic.id]).first?.subscription?.status.first,
                   case .verified(let renewal) = status.renewalInfo,
                   let next: Product.SubscriptionInfo.RenewalInfo.AdvancedCommerceInfo = renewal.advancedCommerceInfo {
                    for item: Product.SubscriptionInfo.RenewalInfo.AdvancedCommerceInfo.Item in next.items {
                        let details: Product.SubscriptionInfo.RenewalInfo.AdvancedCommerceInfo.Item.Details = item.details
                        print(details.sku, details.price, item.priceIncreaseInfo?.price ?? 0, item.priceIncreaseInfo?.status == .scheduled,
                              item.priceIncreaseInfo?.dependentSKUs ?? [])
                    }
                    print(next.requestReferenceID, next.consistencyToken, next.taxCode, next.displayName, next.description,
                          next.period.value)
                }
            },
        ]
    }

    /// Monthly billing with a 12-month commitment, as Apple's sample code offers and buys it (iOS 26.4).
    func purchaseMonthlyWithCommitment() async throws -> String? {
        guard let product = try await Product.products(for: ["premium.yearly"]).first,
              let monthly = product.subscription?.pricingTerms.first(where: { $0.billingPlanType == .monthly }) else { return nil }
        let paywall = "\(monthly.billingDisplayPrice)/\(monthly.billingPeriod.unit.formatted(product.subscriptionPeriodUnitFormatStyle)), "
            + "\(monthly.commitmentInfo.displayPrice) over \(monthly.commitmentInfo.period.formatted(product.subscriptionPeriodFormatStyle))"
        let firstMonth: Decimal? = monthly[offers: .introductory].first?.price ?? monthly.subscriptionOffers.first?.price
        print(paywall, monthly.billingPrice, monthly.commitmentInfo.price, firstMonth as Any)
        // iOS 27.3's shape: the pricing model.
        switch monthly.pricingModel {
        case .singlePrice(let single):
            let billing: Product.SubscriptionInfo.BillingInfo = single.billingInfo
            print(billing.price, billing.displayPrice, billing.period, single.commitmentInfo.displayPrice)
        }
        guard case .success(.verified(let transaction)) = try await product.purchase(options: [.billingPlanType(.monthly)]) else { return nil }
        if transaction.billingPlanType == .monthly, let commitment = transaction.commitmentInfo {
            print("month \(commitment.billingPeriodNumber) of \(commitment.totalBillingPeriods), until \(commitment.expirationDate)",
                  commitment.price)
        }
        await transaction.finish()
        if let status = try await product.subscription?.status.first, case .verified(let renewal) = status.renewalInfo,
           let commitment = renewal.commitmentInfo {
            print(renewal.renewalBillingPlanType == .upFront, commitment.willAutoRenew, commitment.renewalDate, commitment.renewalPrice,
                  commitment.autoRenewPreference, commitment.renewalBillingPlanType.rawValue)
        }
        return transaction.productID
    }

    func explain(_ error: any Error) -> String {
        switch error {
        case Product.PurchaseError.invalidQuantity: "quantity"
        case Product.PurchaseError.productUnavailable: "unavailable"
        case StoreKitError.userCancelled: "cancelled"
        case StoreKitError.networkError(let urlError): "offline \(urlError.code)"
        case StoreKitError.notAvailableInStorefront, StoreKitError.notEntitled, StoreKitError.unsupported, StoreKitError.unknown: "store"
        case StoreKitError.systemError(let underlying): "system \(underlying)"
        case VerificationResult<StoreTransaction>.VerificationError.invalidSignature: "bad signature"
        default: "other"
        }
    }
}

/// Where the values go in apps: across tasks and actors, so they must be `Sendable`.
/// A paywall's texts as apps write them with StoreKit 2's formatting API (iOS 15–16):
/// "$4.99/month", "1 month", "1 week free", the offer's mode by name.
private func paywallTexts(_ product: Product) -> [String] {
    guard let subscription = product.subscription else { return [product.displayPrice] }
    let period = subscription.subscriptionPeriod
    var texts = [
        "\(product.displayPrice)/\(period.unit.formatted(product.subscriptionPeriodUnitFormatStyle))",
        period.formatted(product.subscriptionPeriodFormatStyle),
        period.formatted(product.subscriptionPeriodFormatStyle, referenceDate: .now),
        period.formatted(.units(allowed: [.days], width: .abbreviated)),
        "\(period.value) \(period.unit.localizedDescription)",
        period.dateRange().upperBound.formatted(date: .abbreviated, time: .omitted),
    ]
    if let offer = subscription.introductoryOffer {
        texts.append("\(offer.period.formatted(product.subscriptionPeriodFormatStyle)) \(offer.paymentMode.localizedDescription)")
        if offer.paymentMode == .freeTrial {
            texts.append("\(offer.period.value) \(offer.period.unit.formatted(product.subscriptionPeriodUnitFormatStyle.locale(.current))) free")
        }
    }
    return texts
}

private func requireSendable<T: Sendable>(_: T.Type) {}

@Suite("StoreKit 2 source compatibility")
struct StoreKit2SourceCompatibilityTests {
    @Test func theValueTypesAreSendable() {
        requireSendable(Product.self)
        requireSendable(StoreTransaction.self)
        requireSendable(VerificationResult<StoreTransaction>.self)
        requireSendable(VerificationResult<RenewalInfo>.self)
        requireSendable(VerificationResult<AppTransaction>.self)
        requireSendable(Product.SubscriptionInfo.Status.self)
        requireSendable(Product.PurchaseResult.self)
        requireSendable(Product.PurchaseOption.self)
        requireSendable(StoreTransaction.Transactions.self)
        requireSendable(Storefront.self)
        requireSendable(StoreKitError.self)
        requireSendable(Product.SubscriptionInfo.PricingTerms.self)
        requireSendable(StoreTransaction.CommitmentInfo.self)
        requireSendable(RenewalInfo.CommitmentInfo.self)
        requireSendable(AdvancedCommerceProduct.self)
        requireSendable(StoreTransaction.AdvancedCommerceInfo.self)
    }

    @Test func rawValuesAreApples() {
        #expect(Product.ProductType.consumable.rawValue == "Consumable")
        #expect(Product.ProductType.nonConsumable.rawValue == "Non-Consumable")
        #expect(Product.ProductType.autoRenewable.rawValue == "Auto-Renewable Subscription")
        #expect(Product.ProductType.nonRenewable.rawValue == "Non-Renewing Subscription")
        #expect([RenewalState.subscribed, .expired, .inBillingRetryPeriod, .inGracePeriod, .revoked].map(\.rawValue) == [1, 2, 3, 4, 5])
        #expect(AppStore.Environment.xcode.rawValue == "Xcode")
        #expect(AppStore.Environment.sandbox.rawValue == "Sandbox")
        #expect(AppStore.Environment.production.rawValue == "Production")
        #expect(StoreTransaction.Reason.renewal.rawValue == "RENEWAL")
        #expect(StoreTransaction.OwnershipType.purchased.rawValue == "PURCHASED")
        #expect(StoreTransaction.RevocationReason.developerIssue.rawValue == 1)
        #expect(StoreTransaction.OfferType.introductory.rawValue == 1)
        #expect(RenewalInfo.ExpirationReason.billingError.rawValue == 2)
        #expect(Product.SubscriptionInfo.BillingPlanType.monthly.rawValue == "MONTHLY")
        #expect(Product.SubscriptionInfo.BillingPlanType.upFront.rawValue == "BILLED_UPFRONT")
    }

    @Test func subscriptionPeriodsAndOptions() {
        #expect(Product.SubscriptionPeriod.monthly.unit == .month)
        #expect(Product.SubscriptionPeriod.monthly.value == 1)
        #expect(Product.SubscriptionPeriod.everySixMonths.value == 6)
        #expect(Product.SubscriptionPeriod.weekly != .yearly)
        let token = UUID()
        let options: Set<Product.PurchaseOption> = [.quantity(2), .appAccountToken(token), .quantity(2), .simulatesAskToBuyInSandbox(true),
                                                    .billingPlanType(.monthly), .billingPlanType(.monthly), .billingPlanType(.upFront)]
        #expect(options.count == 5)
        #expect(AppStore.canMakePayments)
    }

    @Test func verificationResultsAreReadAsAppsReadThem() throws {
        let error = VerificationResult<Int>.VerificationError.invalidSignature
        let verified = VerificationResult<Int>.verified(7)
        let unverified = VerificationResult<Int>.unverified(8, error)
        #expect(try verified.payloadValue == 7)
        #expect(unverified.unsafePayloadValue == 8)
        #expect(throws: VerificationResult<Int>.VerificationError.invalidSignature) { try unverified.payloadValue }
        #expect(verified != unverified)
        #expect(error.localizedDescription.contains("signature"))
        if case .unverified(let value, .invalidSignature) = unverified { #expect(value == 8) } else { Issue.record("no match") }
        let purchase = Purchase(productID: "coins")
        let payment = Payment(amount: 1)
        #expect(purchase.productID == "coins" && payment.amount == 1 && PaymentQueue() !== PaymentQueue())
    }
}
