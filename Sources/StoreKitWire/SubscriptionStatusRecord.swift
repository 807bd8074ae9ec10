/// One auto-renewable subscription of a buyer in a group, as StoreKit 2's
/// `Product.SubscriptionInfo.Status` sees it: its state, its latest transaction, its renewal info.
public struct SubscriptionStatusRecord: Sendable, Equatable {
    /// `Product.SubscriptionInfo.RenewalState`'s raw values.
    public enum State: UInt8, Sendable, CaseIterable {
        case subscribed = 1
        case expired = 2
        case inBillingRetryPeriod = 3
        case inGracePeriod = 4
        case revoked = 5
    }

    public var groupID: String
    public var state: State
    /// The subscription's latest transaction, with its JWS.
    public var transaction: TransactionRecord
    /// The compact JWS of Apple's `JWSRenewalInfo` for this subscription.
    public var signedRenewalInfo: String

    public init(groupID: String, state: State, transaction: TransactionRecord, signedRenewalInfo: String) {
        self.groupID = groupID
        self.state = state
        self.transaction = transaction
        self.signedRenewalInfo = signedRenewalInfo
    }

    static let minimumEncodedSize = 4 + 1 + TransactionRecord.minimumEncodedSize + 4

    public func encode(into writer: inout WireWriter) {
        writer.string(groupID)
        writer.u8(state.rawValue)
        transaction.encode(into: &writer)
        writer.string(signedRenewalInfo)
    }

    public static func decode(from reader: inout WireReader) throws(WireError) -> SubscriptionStatusRecord {
        let groupID = try reader.string()
        let rawState = try reader.u8()
        guard let state = State(rawValue: rawState) else {
            throw WireError(.invalidValue("subscription state \(rawState)"))
        }
        return SubscriptionStatusRecord(
            groupID: groupID, state: state, transaction: try TransactionRecord.decode(from: &reader),
            signedRenewalInfo: try reader.string())
    }
}
