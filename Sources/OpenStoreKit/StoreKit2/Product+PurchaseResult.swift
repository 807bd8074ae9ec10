extension Product {
    /// How a purchase ended.
    public enum PurchaseResult: Sendable {
        /// The store completed the purchase: deliver the content, then finish the transaction.
        case success(VerificationResult<Transaction>)
        /// The user cancelled (or declined the payment).
        case userCancelled
        /// The purchase waits for approval (Ask to Buy) or for an action of the user; its outcome
        /// arrives through `Transaction.updates`.
        case pending
    }
}
