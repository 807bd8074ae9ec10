extension Transaction {
    /// An asynchronous sequence of transactions: `updates` (live, until the iterating task is
    /// cancelled), or `all`, `unfinished`, `currentEntitlements` (what the store holds now).
    public struct Transactions: AsyncSequence, Sendable {
        /// Each transaction, with the result of checking its signature.
        public typealias Element = VerificationResult<Transaction>
        /// Iterating never fails: a store that cannot be reached gives an empty sequence.
        public typealias Failure = Never

        enum Source: Sendable {
            /// New and changed transactions, from the moment iteration starts.
            case updates
            /// A list read from the store when iteration starts.
            case snapshot(@Sendable () async -> [Element])
        }

        let source: Source

        /// Starts iterating: for `updates`, registers a listener that receives every update from now on.
        public func makeAsyncIterator() -> AsyncIterator {
            switch source {
            case .updates: AsyncIterator(stream: TransactionFeed.shared.listen().makeAsyncIterator())
            case .snapshot(let read): AsyncIterator(read: read)
            }
        }

        /// Iterates over the transactions.
        public struct AsyncIterator: AsyncIteratorProtocol {
            /// Iterating never fails.
            public typealias Failure = Never

            private var stream: AsyncStream<Element>.Iterator?
            private var read: (@Sendable () async -> [Element])?
            private var pending: [Element] = []

            init(stream: AsyncStream<Element>.Iterator) {
                self.stream = stream
            }

            init(read: @escaping @Sendable () async -> [Element]) {
                self.read = read
            }

            /// The next transaction; nil at the end (for `updates`, when the task is cancelled).
            public mutating func next() async -> Element? {
                await next(isolation: nil)
            }

            /// The next transaction, awaited in the caller's isolation.
            public mutating func next(isolation actor: isolated (any Actor)?) async -> Element? {
                if stream != nil { return await stream?.next(isolation: actor) }
                if let read {
                    self.read = nil
                    pending = await read().reversed()
                }
                return pending.popLast()
            }
        }
    }
}
