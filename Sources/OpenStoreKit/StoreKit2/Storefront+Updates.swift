import Synchronization

extension Storefront {
    /// The storefronts the user's App Store changes to (`storekitctl storefront set`), each as it
    /// happens; also the daemon's storefront after a reconnect when it differs from the last one.
    public typealias Storefronts = PushSequence<Storefront>

    /// Emits the new storefront whenever it changes, from the moment iteration starts.
    public static var updates: Storefronts { Storefronts(listen: { StorefrontFeed.shared.listen() }) }
}

/// The `Storefront.updates` listeners of the process.
enum StorefrontFeed {
    static let shared: PushFeed<Storefront> = {
        let last = Mutex<String?>(StoreConnection.shared.storefront?.identifier)
        return PushFeed(connection: .shared, key: .storefrontFeed) { yield in
            let changed: @Sendable (String, String) -> Void = { country, identifier in
                let isNew = last.withLock { known in
                    defer { known = identifier }
                    return known != identifier
                }
                if isNew { yield { [Storefront(countryCode: country, id: identifier)] } }
            }
            var handlers = StoreConnection.Handlers()
            handlers.storefrontChanged = changed
            // A welcome of a reconnection may name another storefront (changed while disconnected).
            handlers.connected = { country, identifier in
                if last.withLock({ $0 }) != nil { changed(country, identifier) } else { last.withLock { $0 = identifier } }
            }
            return handlers
        }
    }()
}
