/// A purchase waiting for someone other than the app: a parent (Ask to Buy) or the buyer
/// resolving an issue (interrupted purchase). Its transaction is `deferred` or `failed`.
public struct PurchaseRequest: Sendable, Equatable {
    public enum Kind: Int, Sendable {
        case askToBuy = 0
        case interrupted = 1
    }

    public var transactionID: UInt64
    public var kind: Kind
    public var uid: UInt32
    public var app: String
    public var productID: String
    public var created: Int64
    /// When an Ask to Buy request lapses (store clock); nil for interrupted purchases.
    public var expires: Int64?

    public init(transactionID: UInt64, kind: Kind, uid: UInt32, app: String, productID: String, created: Int64, expires: Int64?) {
        self.transactionID = transactionID
        self.kind = kind
        self.uid = uid
        self.app = app
        self.productID = productID
        self.created = created
        self.expires = expires
    }
}
