import Synchronization

/// The listeners of one live StoreKit 2 sequence fed by the daemon's pushes (`Storefront.updates`,
/// `Product.SubscriptionInfo.Status.updates`): the connection is subscribed for it while
/// listeners exist, and each listener gets every element yielded after it started iterating.
/// Elements are made one at a time, in push order, by one task.
final class PushFeed<Element: Sendable>: Sendable {
    /// The listeners by number, and the next number. A struct, not a tuple: `withLock` bodies on
    /// it then have the closure shape scripts/test-sanitize.sh knows as the Mutex false positive.
    private struct Listeners {
        var next: UInt64 = 1
        var all: [UInt64: AsyncStream<Element>.Continuation] = [:]
    }

    private let listeners = Mutex(Listeners())
    private let work: AsyncStream<@Sendable () async -> [Element]>.Continuation
    private let connection: StoreConnection
    private let key: StoreConnection.Listener

    /// `handlers` receives a `yield` that queues the making of elements from one push.
    init(connection: StoreConnection, key: StoreConnection.Listener,
         handlers: (_ yield: @escaping @Sendable (@escaping @Sendable () async -> [Element]) -> Void) -> StoreConnection.Handlers) {
        self.connection = connection
        self.key = key
        let (stream, work) = AsyncStream<@Sendable () async -> [Element]>.makeStream()
        self.work = work
        connection.setHandlers(handlers { make in work.yield(make) }, for: key)
        Task.detached { [self] in
            for await make in stream {
                guard self.listeners.withLock({ !$0.all.isEmpty }) else { continue }
                let elements = await make()
                for listener in self.listeners.withLock({ Array($0.all.values) }) {
                    for element in elements { listener.yield(element) }
                }
            }
        }
    }

    /// A new listener's stream; it ends when the iterating task is cancelled.
    func listen() -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream<Element>.makeStream()
        // The connection's subscription changes under the same lock as the listeners, so that a
        // listener arriving as the last one leaves is never left unsubscribed.
        let id = listeners.withLock { state -> UInt64 in
            let id = state.next
            state.next += 1
            state.all[id] = continuation
            connection.observe(true, for: key)
            return id
        }
        continuation.onTermination = { [self] _ in
            listeners.withLock { state in
                state.all[id] = nil
                if state.all.isEmpty { connection.observe(false, for: key) }
            }
        }
        return stream
    }
}

/// An `AsyncSequence` over a `PushFeed`: iterating registers a listener.
public struct PushSequence<Element: Sendable>: AsyncSequence, Sendable {
    public typealias Failure = Never
    let listen: @Sendable () -> AsyncStream<Element>

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: listen().makeAsyncIterator()) }

    /// Iterates until the task is cancelled.
    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Failure = Never
        var stream: AsyncStream<Element>.Iterator

        public mutating func next() async -> Element? { await stream.next(isolation: nil) }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> Element? {
            await stream.next(isolation: actor)
        }
    }
}
