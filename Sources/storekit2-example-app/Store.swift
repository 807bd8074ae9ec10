import Foundation
import OpenStoreKit // On Apple platforms: import StoreKit

// The store of the game, written the way Apple's StoreKit 2 sample code writes one: a listener
// task started at launch and kept for the life of the app, a verification check before anything
// is granted, products requested once, and what the customer owns recomputed from
// `Transaction.currentEntitlements` after every change. With `import StoreKit` (and `StoreKit.` for
// the module-qualified names below) this file compiles against Apple's StoreKit unchanged.

typealias Transaction = OpenStoreKit.Transaction
typealias RenewalInfo = OpenStoreKit.Product.SubscriptionInfo.RenewalInfo
typealias RenewalState = OpenStoreKit.Product.SubscriptionInfo.RenewalState

/// Why the store refused to use a transaction.
public enum LedgerError: Error {
    case failedVerification
}

@MainActor
final class Store {
    private(set) var coinPacks: [Product] = []
    private(set) var levelPacks: [Product] = []
    private(set) var subscriptions: [Product] = []
    private(set) var seasonPasses: [Product] = []

    private(set) var purchasedLevelPacks: [Product] = []
    private(set) var purchasedSeasonPasses: [Product] = []
    private(set) var purchasedSubscriptions: [Product] = []
    private(set) var subscriptionGroupStatus: RenewalState?
    /// Why the last product request failed (the store unreachable, the app not registered); nil
    /// after one that succeeded. Not in Apple's sample: there the UI shows no products instead.
    private(set) var productRequestFailure: (any Error)?

    /// Told of every update the listener receives, verified or not (the command line prints them).
    var transactionUpdateHandler: ((VerificationResult<Transaction>) -> Void)?
    /// Told after what the customer owns was recomputed.
    var customerStatusHandler: (() -> Void)?
    /// Told how each purchase ended (the command line prints it).
    var purchaseResultHandler: ((Product.PurchaseResult) -> Void)?

    var updateListenerTask: Task<Void, Error>?

    private let productIDs: [String]

    init(productIDs: [String]) {
        self.productIDs = productIDs
        // Start a transaction listener as close to app launch as possible so you don't miss any transactions.
        updateListenerTask = listenForTransactions()
    }

    /// Requests the products and works out what the customer owns; call once after launch.
    func start() async {
        await requestProducts()
        await updateCustomerProductStatus()
    }

    deinit {
        updateListenerTask?.cancel()
    }

    nonisolated func listenForTransactions() -> Task<Void, Error> {
        Task.detached {
            // Iterate through any transactions that don't come from a direct call to `purchase()`.
            for await result in Transaction.updates {
                await self.report(result)
                do {
                    let transaction = try self.checkVerified(result)
                    // Deliver products to the user.
                    await self.updateCustomerProductStatus()
                    // Always finish a transaction.
                    await transaction.finish()
                } catch {
                    // StoreKit has a transaction that fails verification. Don't deliver content to the user.
                    print("Transaction failed verification")
                }
            }
        }
    }

    private func report(_ result: VerificationResult<Transaction>) {
        transactionUpdateHandler?(result)
    }

    func requestProducts() async {
        do {
            // Request products from the App Store using the identifiers the app knows.
            let storeProducts = try await Product.products(for: productIDs)

            var newCoinPacks: [Product] = []
            var newLevelPacks: [Product] = []
            var newSubscriptions: [Product] = []
            var newSeasonPasses: [Product] = []

            // Filter the products into categories based on their type.
            for product in storeProducts {
                switch product.type {
                case .consumable:
                    newCoinPacks.append(product)
                case .nonConsumable:
                    newLevelPacks.append(product)
                case .autoRenewable:
                    newSubscriptions.append(product)
                case .nonRenewable:
                    newSeasonPasses.append(product)
                default:
                    // Ignore this product.
                    print("Unknown product: \(product.id)")
                }
            }

            // Sort each product category by price, lowest to highest, to update the store.
            coinPacks = sortByPrice(newCoinPacks)
            levelPacks = sortByPrice(newLevelPacks)
            subscriptions = sortByPrice(newSubscriptions)
            seasonPasses = sortByPrice(newSeasonPasses)
            productRequestFailure = nil
        } catch {
            productRequestFailure = error
            print("Failed product request from the App Store server. \(error)")
        }
    }

    func purchase(_ product: Product, options: Set<Product.PurchaseOption> = []) async throws -> Transaction? {
        // Begin purchasing the `Product` the user selects.
        let result = try await product.purchase(options: options)
        purchaseResultHandler?(result)

        switch result {
        case .success(let verification):
            // Check whether the transaction is verified. If it isn't, this function rethrows the verification error.
            let transaction = try checkVerified(verification)

            // The transaction is verified. Deliver content to the user.
            await updateCustomerProductStatus()

            // Always finish a transaction.
            await transaction.finish()

            return transaction
        case .userCancelled, .pending:
            return nil
        @unknown default:
            return nil
        }
    }

    nonisolated func checkVerified<T>(_ result: VerificationResult<T>) throws -> T {
        // Check whether the JWS passes StoreKit verification.
        switch result {
        case .unverified:
            // StoreKit parses the JWS, but it fails verification.
            throw LedgerError.failedVerification
        case .verified(let safe):
            // The result is verified. Return the unwrapped value.
            return safe
        }
    }

    func updateCustomerProductStatus() async {
        var purchasedLevelPacks: [Product] = []
        var purchasedSubscriptions: [Product] = []
        var purchasedSeasonPasses: [Product] = []

        // Iterate through all of the user's purchased products.
        for await result in Transaction.currentEntitlements {
            do {
                // Check whether the transaction is verified. If it isn't, catch `failedVerification` error.
                let transaction = try checkVerified(result)

                // Check the `productType` of the transaction and get the corresponding product from the store.
                switch transaction.productType {
                case .nonConsumable:
                    if let levelPack = levelPacks.first(where: { $0.id == transaction.productID }) {
                        purchasedLevelPacks.append(levelPack)
                    }
                case .nonRenewable:
                    if let seasonPass = seasonPasses.first(where: { $0.id == transaction.productID }) {
                        // A season pass lasts 90 days from its purchase date.
                        let currentDate = Date()
                        let expirationDate = Calendar(identifier: .gregorian).date(
                            byAdding: DateComponents(day: 90), to: transaction.purchaseDate)!
                        if currentDate < expirationDate {
                            purchasedSeasonPasses.append(seasonPass)
                        }
                    }
                case .autoRenewable:
                    if let subscription = subscriptions.first(where: { $0.id == transaction.productID }) {
                        purchasedSubscriptions.append(subscription)
                    }
                default:
                    break
                }
            } catch {
                print("Transaction failed verification")
            }
        }

        // Update the store information with the purchased products.
        self.purchasedLevelPacks = purchasedLevelPacks
        self.purchasedSeasonPasses = purchasedSeasonPasses
        self.purchasedSubscriptions = purchasedSubscriptions

        // Check the `subscriptionGroupStatus` to learn the auto-renewable subscription state to determine whether the customer
        // is new (never subscribed), active, or inactive (expired subscription). This app has only one subscription
        // group, so products in the subscriptions array all belong to the same group. The statuses that
        // `product.subscription.status` returns apply to the entire subscription group.
        subscriptionGroupStatus = try? await subscriptions.first?.subscription?.status.max { lhs, rhs in
            // There may be multiple statuses for different family members, because this app supports Family Sharing.
            // The subscriber is entitled to service for the status with the highest level of service.
            let lhsEntitled = lhs.state == .subscribed || lhs.state == .inGracePeriod
            let rhsEntitled = rhs.state == .subscribed || rhs.state == .inGracePeriod
            return !lhsEntitled && rhsEntitled
        }?.state

        customerStatusHandler?()
    }

    func isPurchased(_ product: Product) async throws -> Bool {
        // Determine whether the user purchases a given product.
        switch product.type {
        case .nonRenewable:
            return purchasedSeasonPasses.contains(product)
        case .nonConsumable:
            return purchasedLevelPacks.contains(product)
        case .autoRenewable:
            return purchasedSubscriptions.contains(product)
        default:
            return false
        }
    }

    func sortByPrice(_ products: [Product]) -> [Product] {
        products.sorted(by: { $0.price < $1.price })
    }
}
