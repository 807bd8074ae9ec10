/// A transaction's state, with StoreKit's raw values (`SKPaymentTransactionState`).
///
/// Legal transitions: `purchasing → purchased | failed | deferred`, `deferred → purchased | failed`;
/// `purchased`, `failed` and `restored` end when the app finishes the transaction.
public enum TransactionState: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case purchasing = 0
    case purchased = 1
    case failed = 2
    case restored = 3
    case deferred = 4

    public var name: String {
        switch self {
        case .purchasing: "purchasing"
        case .purchased: "purchased"
        case .failed: "failed"
        case .restored: "restored"
        case .deferred: "deferred"
        }
    }

    public var description: String { name }

    public init?(name: String) {
        guard let state = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = state
    }

    /// Whether an app may finish a transaction in this state.
    public var isFinishable: Bool { self == .purchased || self == .failed || self == .restored }

    /// Whether `self → next` is a legal transition of the queue's state machine.
    public func canMove(to next: TransactionState) -> Bool {
        switch (self, next) {
        case (.purchasing, .purchased), (.purchasing, .failed), (.purchasing, .deferred),
             (.deferred, .purchased), (.deferred, .failed):
            return true
        default:
            return false
        }
    }
}
