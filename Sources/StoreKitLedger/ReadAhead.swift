/// What a unit of work's requests will ask of the ledger, known before they run: the payments
/// (their queues and payment keys) and the finishes (their queues and transaction ids). A ledger
/// whose reads are round trips to a server (`Ledger.readsAhead`) reads what these need in one
/// (the transactions the keys name, the queues' unfinished counts and sequence numbers, the
/// transactions to finish) and answers the requests from it; what it read of the rows the unit
/// writes stays locked until the unit ends, so the answers stay true.
public struct ReadAhead: Sendable, Equatable {
    public struct Payment: Sendable, Equatable {
        public var queue: QueueKey
        /// The payment key; nil when the payment has none.
        public var key: String?

        public init(queue: QueueKey, key: String?) {
            self.queue = queue
            self.key = key
        }
    }

    public struct Finish: Sendable, Equatable {
        public var queue: QueueKey
        public var transactionID: UInt64

        public init(queue: QueueKey, transactionID: UInt64) {
            self.queue = queue
            self.transactionID = transactionID
        }
    }

    public var payments: [Payment] = []
    public var finishes: [Finish] = []

    public init(payments: [Payment] = [], finishes: [Finish] = []) {
        self.payments = payments
        self.finishes = finishes
    }

    public var isEmpty: Bool { payments.isEmpty && finishes.isEmpty }
}
