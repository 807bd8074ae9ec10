import Foundation
import StoreKitWire

extension Product {
    /// Buys the product and returns how the purchase ended.
    ///
    /// The transaction of a successful purchase comes back here and not through
    /// `Transaction.updates`; a pending one (Ask to Buy) arrives through `updates` once approved.
    /// A purchase the store refuses throws `Product.PurchaseError` (or `StoreKitError`, e.g.
    /// `.networkError` when the store cannot be reached).
    public func purchase(options: Set<PurchaseOption> = []) async throws -> PurchaseResult {
        try await purchase(options: options, advancedCommerceJWS: nil)
    }

    /// The purchase, with the developer's signed Advanced Commerce request when
    /// `AdvancedCommerceProduct` makes it: a request the store refuses (its signature, or what it
    /// asks) throws `StoreKitError.systemError` with the store's reason.
    func purchase(options: Set<PurchaseOption>, advancedCommerceJWS: String?) async throws -> PurchaseResult {
        try SimulatedFailures.throwIfSet(.purchase)
        var quantity = 1
        var token: UUID?
        var askToBuy = false
        var discount: ClientMessage.Discount?
        var offerJWS: String?
        var eligibilityJWS: String?
        var winBackOfferID: String?
        var billingPlanType: ProductRecord.BillingPlan.PlanType?
        var storefrontDecider: StorefrontDecider?
        for option in options {
            switch option.value {
            case .quantity(let value): quantity = value
            case .appAccountToken(let value): token = value
            case .simulatesAskToBuyInSandbox(let value): askToBuy = value
            case .promotionalOffer(let offerID, let keyID, let nonce, let signature, let timestamp):
                discount = ClientMessage.Discount(offerID: offerID, keyID: keyID, nonce: nonce.uuidString.lowercased(),
                                                  signature: signature.base64EncodedString(), timestamp: Int64(timestamp))
            case .promotionalOfferJWS(let offerID, let jws):
                // The offer passed must be the one the server signed.
                guard let offerID, SignedPayload(JWS.segment(1, of: jws))?.string("offerIdentifier") == offerID else {
                    throw PurchaseError.invalidOfferIdentifier
                }
                offerJWS = jws
            case .introductoryOfferEligibility(let jws): eligibilityJWS = jws
            case .winBackOffer(let offerID):
                guard let offerID else { throw PurchaseError.invalidOfferIdentifier }
                winBackOfferID = offerID
            case .billingPlanType(let type):
                // A plan this library does not know is one the store does not have.
                guard let plan = ProductRecord.BillingPlan.PlanType(name: type.rawValue) else { throw PurchaseError.productUnavailable }
                billingPlanType = plan
            case .onStorefrontChange(let decider): storefrontDecider = decider
            case .custom: break   // no effect, as Apple documents
            }
        }
        guard (1...10).contains(quantity) else { throw PurchaseError.invalidQuantity }

        let payment = ClientMessage.AddPayment(
            requestID: 0, key: SKPaymentQueue.idempotencyKey(), productID: id, quantity: Int32(quantity),
            applicationUsername: token?.uuidString, simulatesAskToBuy: askToBuy, discount: discount,
            offerJWS: offerJWS, eligibilityJWS: eligibilityJWS, winBackOfferID: winBackOfferID, billingPlanType: billingPlanType,
            advancedCommerceJWS: advancedCommerceJWS)
        let feed = TransactionFeed.shared
        feed.beginPurchase(of: id)
        let reply: ServerMessage
        do {
            reply = try await StoreConnection.shared.reply { requestID in
                var payment = payment
                payment.requestID = requestID
                return .addPayment(payment)
            }
        } catch {
            _ = await feed.endPurchase(of: id, transactionID: nil)
            throw Self.purchaseError(error, advancedCommerce: advancedCommerceJWS != nil)
        }
        guard case .result(_, _, _, let transactionID, _) = reply,
              let record = await feed.endPurchase(of: id, transactionID: transactionID)
        else { throw StoreKitError.unknown }

        switch record.state {
        case .purchased, .restored:
            // The receipt lists it before the app hears of it, as Apple's does.
            await ReceiptFile.refreshed()
            return .success(await TransactionResults.result(for: record, product: self.record))
        case .deferred, .purchasing:
            if let storefrontDecider { PendingPurchases.shared.watch(record.id, decider: storefrontDecider) }
            return .pending
        case .failed:
            // The failure is reported here, so the failed transaction is finished: StoreKit 2 has
            // no failed transactions for the app to finish.
            _ = try? await StoreConnection.shared.reply { .finish(requestID: $0, transactionID: record.id) }
            let error = SKPaymentTransaction(record: record, payment: nil).error as? SKError ?? SKError(.unknown)
            if error.code == .paymentCancelled { return .userCancelled }
            throw Self.purchaseError(error, advancedCommerce: advancedCommerceJWS != nil)
        }
    }
}

extension Product {
    /// What a refused purchase throws: `PurchaseError` as StoreKit 1's error says, except that an
    /// Advanced Commerce request refused (`paymentInvalid`, `invalidSignature`) is no offer's or
    /// quantity's fault and throws `StoreKitError.systemError` with the store's reason.
    static func purchaseError(_ error: SKError, advancedCommerce: Bool) -> any Error {
        if advancedCommerce, error.code == .paymentInvalid || error.code == .invalidSignature { return StoreKitError.systemError(error) }
        return PurchaseError.reported(for: error)
    }
}
