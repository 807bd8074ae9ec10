import OpenStoreKit

/// The command-line front of the StoreKit 2 sample: what a UI would do with the `Store`.
@MainActor
enum ExampleApp {
    static let usage = """
        Usage: storekit2-example-app [--app ID] COMMAND

        A sample app using OpenStoreKit's StoreKit 2 API (acts as com.example.game unless --app).

        Commands:
          listen [--listeners N]  run the store's Transaction.updates listener until stopped, with N
                                  more listeners; each update is printed once per listener. Reads
                                  commands (buy, list, finish, status) from stdin, one per line.
          buy PRODUCT [--quantity N] [--account-token UUID] [--ask-to-buy] [--billing-plan monthly|upFront]
                                  buy with Product.purchase(), print how it ended
          list [entitlements|unfinished|all|products]
                                  print the customer's current entitlements (default) or the
                                  unfinished transactions, every transaction, the products
          finish ID               finish an unfinished transaction
          status                  print the subscription group's status and renewal info

        Output is one JSON object per line (events: listening, update, customerStatus, purchase,
        purchaseFailed, transaction, product, status, finished, done). The store grants a
        transaction only if its signature verifies, as Apple's sample does.

        """

    /// The products of the sample catalogue (config/catalog/example.storekit).
    static let productIDs = [
        "com.example.game.coins100", "com.example.game.level_pack", "com.example.game.season_pass",
        "com.example.game.premium.monthly", "com.example.game.premium.yearly",
    ]

    /// Runs one command line; the exit status.
    static func run(_ raw: [String]) async -> Int32 {
        var arguments = raw
        if arguments.contains("-h") || arguments.contains("--help") {
            print(usage, terminator: "")
            return 0
        }
        if let index = arguments.firstIndex(of: "--app") {
            guard index + 1 < arguments.count else { return usageError("--app needs an ID") }
            // The Linux configuration point: Apple platforms use the bundle identifier.
            SKPaymentQueue.applicationIdentifier = arguments[index + 1]
            arguments.removeSubrange(index...(index + 1))
        } else {
            SKPaymentQueue.applicationIdentifier = "com.example.game"
        }
        guard let command = arguments.first else { return usageError("a COMMAND is required") }
        guard command == "listen" || command == "buy" else {
            // Reading and finishing need no store: the app's listener runs only where the app does.
            return await perform(arguments, store: nil)
        }

        let store = Store(productIDs: productIDs)
        store.transactionUpdateHandler = { result in
            var object = Output.transaction(result)
            object["event"] = "update"
            object["listener"] = 0
            Output.event(object)
        }
        store.customerStatusHandler = { [unowned store] in
            var object: [String: Any] = [
                "event": "customerStatus",
                "levelPacks": store.purchasedLevelPacks.map(\.id),
                "seasonPasses": store.purchasedSeasonPasses.map(\.id),
                "subscriptions": store.purchasedSubscriptions.map(\.id),
            ]
            if let state = store.subscriptionGroupStatus { object["subscriptionGroupStatus"] = state.rawValue }
            Output.event(object)
        }
        await store.start()

        switch command {
        case "listen":
            var listeners = 0
            if let index = arguments.firstIndex(of: "--listeners") {
                guard index + 1 < arguments.count, let count = Int(arguments[index + 1]), count >= 0 else {
                    return usageError("--listeners needs a number")
                }
                listeners = count
            }
            for number in 0..<listeners { startListener(number + 1) }
            Output.event(["event": "listening", "listener": 0])
            for await line in commandLines() {
                let words = line.split(separator: " ").map(String.init)
                guard !words.isEmpty else { continue }
                if words == ["quit"] { return 0 }
                _ = await perform(words, store: store)
                Output.event(["event": "done", "command": words[0]])
            }
            // Standard input ended: keep listening until stopped, as an app's listener does.
            while true { try? await Task.sleep(for: .seconds(3600)) }
        default:
            return await perform(arguments, store: store)
        }
    }

    /// Runs `buy` (with the store), `list`, `finish` or `status`; the exit status.
    static func perform(_ words: [String], store: Store?) async -> Int32 {
        var words = words
        func option(_ name: String) -> String? {
            guard let index = words.firstIndex(of: name), index + 1 < words.count else { return nil }
            defer { words.removeSubrange(index...(index + 1)) }
            return words[index + 1]
        }
        switch words[0] {
        case "buy":
            var options: Set<Product.PurchaseOption> = []
            if let quantity = option("--quantity") {
                guard let number = Int(quantity) else { return usageError("--quantity needs a number") }
                options.insert(.quantity(number))
            }
            if let token = option("--account-token") {
                guard let uuid = UUID(uuidString: token) else { return usageError("--account-token needs a UUID") }
                options.insert(.appAccountToken(uuid))
            }
            if let index = words.firstIndex(of: "--ask-to-buy") {
                words.remove(at: index)
                options.insert(.simulatesAskToBuyInSandbox(true))
            }
            if let plan = option("--billing-plan") {
                switch plan {
                case "monthly": options.insert(.billingPlanType(.monthly))
                case "upFront": options.insert(.billingPlanType(.upFront))
                default: return usageError("--billing-plan needs monthly or upFront")
                }
            }
            guard words.count == 2, let store else { return usageError("buy needs one PRODUCT") }
            return await buy(words[1], options: options, store: store)
        case "list":
            return await list(words.count > 1 ? words[1] : "entitlements")
        case "finish":
            guard words.count == 2, let id = UInt64(words[1]) else { return usageError("finish needs a transaction ID") }
            for await result in Transaction.unfinished where result.unsafePayloadValue.id == id {
                await result.unsafePayloadValue.finish()
                Output.event(["event": "finished", "transactionIdentifier": String(id)])
                return 0
            }
            Output.error("no unfinished transaction \(id)")
            return 1
        case "status":
            return await status()
        default:
            return usageError("unknown command: \(words.joined(separator: " "))")
        }
    }

    /// An error in words: StoreKit's own description where it has one.
    static func describe(_ error: any Error) -> String {
        (error as? any LocalizedError)?.errorDescription ?? "\(error)"
    }

    static func buy(_ productID: String, options: Set<Product.PurchaseOption>, store: Store) async -> Int32 {
        guard let product = store.coinPacks.first(where: { $0.id == productID }) ?? store.levelPacks.first(where: { $0.id == productID })
                ?? store.subscriptions.first(where: { $0.id == productID }) ?? store.seasonPasses.first(where: { $0.id == productID })
        else {
            // No product list at all is the store's failure, not an unknown product.
            let reason = store.productRequestFailure.map { "the store could not be asked for its products: \(describe($0))" }
                ?? "unknown product \(productID)"
            Output.event(["event": "purchaseFailed", "productIdentifier": productID, "error": reason])
            return 1
        }
        store.purchaseResultHandler = { result in
            switch result {
            case .success(let verification):
                var object = Output.transaction(verification)
                object["event"] = "purchase"
                object["result"] = "success"
                Output.event(object)
            case .pending:
                Output.event(["event": "purchase", "result": "pending", "productIdentifier": productID])
            case .userCancelled:
                Output.event(["event": "purchase", "result": "userCancelled", "productIdentifier": productID])
            @unknown default:
                Output.event(["event": "purchase", "result": "unknown", "productIdentifier": productID])
            }
        }
        do {
            // The store grants and finishes a verified transaction, as the app's purchase button would.
            _ = try await store.purchase(product, options: options)
            return 0
        } catch {
            Output.event(["event": "purchaseFailed", "productIdentifier": productID, "error": describe(error)])
            return 1
        }
    }

    static func list(_ what: String) async -> Int32 {
        let sequence: Transaction.Transactions
        switch what {
        case "entitlements": sequence = Transaction.currentEntitlements
        case "unfinished": sequence = Transaction.unfinished
        case "all": sequence = Transaction.all
        case "products":
            do {
                for product in try await Product.products(for: productIDs) {
                    var object: [String: Any] = [
                        "event": "product", "id": product.id, "type": product.type.rawValue,
                        "displayName": product.displayName, "displayPrice": product.displayPrice,
                        "price": "\(product.price)",
                    ]
                    if let subscription = product.subscription {
                        object["subscriptionGroupID"] = subscription.subscriptionGroupID
                        object["subscriptionPeriod"] = subscription.subscriptionPeriod.debugDescription
                        object["introductoryOffer"] = subscription.introductoryOffer?.paymentMode.rawValue ?? NSNull()
                        object["promotionalOffers"] = subscription.promotionalOffers.compactMap(\.id)
                        object["isEligibleForIntroOffer"] = await subscription.isEligibleForIntroOffer
                        // "MONTHLY $0.50/1 month, $6.00 for 1 year".
                        object["pricingTerms"] = subscription.pricingTerms.map { terms in
                            "\(terms.billingPlanType.rawValue) \(terms.billingDisplayPrice)/"
                                + "\(terms.billingPeriod.formatted(product.subscriptionPeriodFormatStyle)), "
                                + "\(terms.commitmentInfo.displayPrice) for \(terms.commitmentInfo.period.formatted(product.subscriptionPeriodFormatStyle))"
                        }
                    }
                    Output.event(object)
                }
                return 0
            } catch {
                Output.error("cannot list products: \(error)")
                return 1
            }
        default:
            return usageError("list takes entitlements, unfinished, all or products")
        }
        for await result in sequence {
            var object = Output.transaction(result)
            object["event"] = "transaction"
            object["list"] = what
            Output.event(object)
        }
        return 0
    }

    static func status() async -> Int32 {
        do {
            guard let subscription = try await Product.products(for: productIDs).compactMap(\.subscription).first else {
                Output.error("the catalogue has no subscription")
                return 1
            }
            for status in try await subscription.status {
                let renewal = status.renewalInfo.unsafePayloadValue
                var object = Output.transaction(status.transaction)
                object["event"] = "status"
                object["state"] = status.state.rawValue
                object["willAutoRenew"] = renewal.willAutoRenew
                object["autoRenewPreference"] = renewal.autoRenewPreference ?? NSNull()
                if case .verified = status.renewalInfo { object["renewalInfoVerified"] = true } else { object["renewalInfoVerified"] = false }
                Output.event(object)
            }
            return 0
        } catch {
            Output.error("cannot read the subscription status: \(error)")
            return 1
        }
    }

    /// Another `Transaction.updates` listener, printing what it receives under its number.
    static func startListener(_ number: Int) {
        Task.detached {
            var updates = Transaction.updates.makeAsyncIterator()
            Output.event(["event": "listening", "listener": number])
            while let result = await updates.next() {
                var object = Output.transaction(result)
                object["event"] = "update"
                object["listener"] = number
                Output.event(object)
            }
        }
    }

    /// Lines of standard input, read on a thread of their own.
    static func commandLines() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream<String>.makeStream()
        let thread = Thread {
            while let line = readLine() { continuation.yield(line) }
            continuation.finish()
        }
        thread.start()
        return stream
    }

    static func usageError(_ message: String) -> Int32 {
        FileHandle.standardError.write(Data("storekit2-example-app: \(message)\n\n\(usage)".utf8))
        return 64
    }
}
