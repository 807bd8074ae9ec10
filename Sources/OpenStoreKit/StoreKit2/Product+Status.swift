import StoreKitWire

extension Product.SubscriptionInfo {
    /// One subscription of the user in a group: its state, its latest transaction, its renewal terms.
    public struct Status: Hashable, Sendable {
        /// Where the subscription is in its life.
        public let state: RenewalState
        /// The subscription's latest transaction.
        public let transaction: VerificationResult<Transaction>
        /// What happens at the next renewal, signed by the store.
        public let renewalInfo: VerificationResult<RenewalInfo>

        /// A status from the daemon's record, its signed parts checked.
        init(record: SubscriptionStatusRecord) async {
            state = RenewalState(rawValue: Int(record.state.rawValue))
            transaction = await TransactionResults.result(for: record.transaction)
            let check = checkSignedData(record.signedRenewalInfo)
            let info = RenewalInfo(payload: SignedPayload(check.payload), transaction: record.transaction,
                                   state: state, jws: record.signedRenewalInfo)
            renewalInfo = VerificationResult(info, failure: check.failure)
        }
    }
}
