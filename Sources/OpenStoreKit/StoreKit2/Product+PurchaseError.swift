import Foundation

extension Product {
    /// Why the store refused a purchase.
    public enum PurchaseError: Error, LocalizedError, Hashable, Sendable {
        /// The quantity is outside 1…10.
        case invalidQuantity
        /// The product is not available in the store.
        case productUnavailable
        /// The user may not make purchases.
        case purchaseNotAllowed
        /// The user is not eligible for the offer.
        case ineligibleForOffer
        /// The offer identifier is not valid.
        case invalidOfferIdentifier
        /// The offer's price is not valid.
        case invalidOfferPrice
        /// The offer's signature is not valid.
        case invalidOfferSignature
        /// The offer lacks parameters.
        case missingOfferParameters

        /// A description of the error.
        public var errorDescription: String? {
            switch self {
            case .invalidQuantity: "The quantity is not valid."
            case .productUnavailable: "The product is not available."
            case .purchaseNotAllowed: "Purchases are not allowed."
            case .ineligibleForOffer: "The offer is not available to this user."
            case .invalidOfferIdentifier: "The offer identifier is not valid."
            case .invalidOfferPrice: "The offer's price is not valid."
            case .invalidOfferSignature: "The offer's signature is not valid."
            case .missingOfferParameters: "The offer lacks parameters."
            }
        }

        /// The error StoreKit 2 reports for a purchase that StoreKit 1 reports as `error`.
        static func reported(for error: SKError) -> any Error {
            switch error.code {
            case .paymentInvalid: PurchaseError.invalidQuantity
            case .storeProductNotAvailable: PurchaseError.productUnavailable
            case .paymentNotAllowed: PurchaseError.purchaseNotAllowed
            case .ineligibleForOffer: PurchaseError.ineligibleForOffer
            case .invalidOfferIdentifier: PurchaseError.invalidOfferIdentifier
            case .invalidOfferPrice: PurchaseError.invalidOfferPrice
            case .invalidSignature: PurchaseError.invalidOfferSignature
            case .missingOfferParams: PurchaseError.missingOfferParameters
            default: StoreKitError(error)
            }
        }
    }
}
