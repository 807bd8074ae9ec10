import StoreKitWire
import Testing

@Suite("TransactionState")
struct TransactionStateTests {
    /// DESIGN.md, Transaction model: `purchasing → purchased | failed | deferred`; `deferred → purchased | failed`.
    /// (`purchased | failed | restored → finished` is the finished flag, not a state.)
    static let legal: Set<[TransactionState]> = [
        [.purchasing, .purchased], [.purchasing, .failed], [.purchasing, .deferred],
        [.deferred, .purchased], [.deferred, .failed],
    ]

    @Test("canMove(to:) is exactly the table in DESIGN.md",
          arguments: TransactionState.allCases, TransactionState.allCases)
    func transitions(from: TransactionState, to: TransactionState) {
        #expect(from.canMove(to: to) == Self.legal.contains([from, to]))
    }

    @Test("only purchased, failed and restored transactions are finishable", arguments: TransactionState.allCases)
    func finishable(state: TransactionState) {
        #expect(state.isFinishable == [.purchased, .failed, .restored].contains(state))
    }

    @Test("raw values are SKPaymentTransactionState's")
    func rawValues() {
        #expect(TransactionState.allCases.map(\.rawValue) == [0, 1, 2, 3, 4])
        #expect(TransactionState.allCases.map(\.name) == ["purchasing", "purchased", "failed", "restored", "deferred"])
        #expect(TransactionState(rawValue: 5) == nil)
    }

    @Test("names round-trip and unknown names are nil", arguments: TransactionState.allCases)
    func names(state: TransactionState) {
        #expect(TransactionState(name: state.name) == state)
        #expect(state.description == state.name)
        #expect(TransactionState(name: state.name.uppercased()) == nil)
    }

    @Test("restored is created directly and never entered or left by a transition")
    func restoredIsTerminal() {
        for state in TransactionState.allCases {
            #expect(!state.canMove(to: .restored))
            #expect(!TransactionState.restored.canMove(to: state))
            #expect(!state.canMove(to: .purchasing))
        }
    }
}
