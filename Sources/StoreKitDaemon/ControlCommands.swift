import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import StoreKitEngine
import StoreKitLedger
import StoreKitWire

/// The control plane behind `storekitctl`: each command reads or changes the store and answers
/// with a JSON document (the stable `-o json` interface). Arguments arrive as `key=value` strings.
struct ControlCommands {
    let engine: PaymentQueueEngine
    let configuration: DaemonConfiguration
    unowned let server: Server

    struct Result {
        var code: ResultCode = .ok
        var message = ""
        var json: JSONValue = .null
        var effects: [Effect] = []

        static func failure(_ code: ResultCode, _ message: String) -> Result {
            Result(code: code, message: message, json: .object([("error", .string(message))]))
        }
    }

    struct Arguments {
        var values: [String: String] = [:]

        init(_ raw: [String]) {
            for argument in raw {
                guard let equals = argument.firstIndex(of: "=") else { continue }
                values[String(argument[..<equals])] = String(argument[argument.index(after: equals)...])
            }
        }

        subscript(_ key: String) -> String? { values[key] }
    }

    static func mutates(_ command: ControlCommand, _ arguments: Arguments) -> Bool {
        switch command {
        case .clock: arguments["advance"] != nil || arguments["rate"] != nil
        case .storefront: arguments["set"] != nil
        default: !command.onlyReads
        }
    }

    func execute(command name: String, arguments raw: [String], writesStopped: String?) throws(LedgerError) -> Result {
        guard let command = ControlCommand(rawValue: name) else { return .failure(.invalidArgument, "unknown command '\(name)'") }
        let arguments = Arguments(raw)
        if let writesStopped, Self.mutates(command, arguments) { return .failure(.storageFailure, writesStopped) }
        // A command that changes the store may change receipts without moving a queue's
        // sequence number (`clear` and `reset` delete history): kept receipts are made again.
        if Self.mutates(command, arguments) { server.proof.forgetReceipts() }
        switch command {
        case .status: return status()
        case .apps: return apps()
        case .products: return products(arguments)
        case .content: return content(arguments)
        case .transactions: return try transactions(arguments)
        case .buy: return try buy(arguments)
        case .backup: return backup(arguments)
        case .migrate: return migrate(arguments)
        case .certificate: return certificate()
        case .rotateKey: return rotateKey(arguments)
        case .receipt: return try receipt(arguments)
        case .approve, .decline, .resolve, .refund, .expire, .renew, .autoRenew, .priceIncrease, .priceConsent, .billingIssue,
             .interrupted, .askToBuy,
             .failNext, .switches, .reset, .storefront, .promote, .clock, .entitlements, .history, .subscriptions, .clear:
            return try storeCommand(command, arguments)
        }
    }

    private func status() -> Result {
        let unfinished = (try? engine.store.unfinishedCount()) ?? 0
        return Result(json: .object([
            ("database", .string(engine.store.path)),
            ("connections", .int(Int64(server.connectionCount))),
            ("observers", .int(Int64(server.observerCount))),
            ("unfinishedTransactions", .int(Int64(unfinished))),
            ("apps", .int(Int64(engine.catalogs.count))),
            ("storefront", .string(engine.storefront)),
            ("clock", .string(RFC3339.string(milliseconds: engine.clock.now()))),
            ("protocolVersion", .int(Int64(ProtocolVersion.current))),
            ("protocolVersionsServed", .array(ProtocolVersion.served.map { .int(Int64($0)) })),
            ("lowDiskSpace", .optional(engine.store.lowSpaceReason)),
            // In a fleet sharing a PostgreSQL ledger: this host's name and how uids become accounts.
            ("host", .optional(engine.store.fleetIdentity?.host)),
            ("accountFrom", .optional(engine.store.fleetIdentity?.accountFrom)),
            // [Family]: each family's members by user name.
            ("families", .array(configuration.families.map { .array($0.members.map { .string($0) }) })),
        ]))
    }

    private func apps() -> Result {
        let list: [JSONValue] = configuration.apps.map { app in
            .object([
                ("app", .string(app.id)),
                ("catalog", .string(app.catalogPath)),
                ("products", .int(Int64(engine.catalogs[app.id]?.products.count ?? 0))),
                ("executable", .optional(app.executable)),
                ("observerUnit", .optional(app.observerUnit)),
            ])
        }
        return Result(json: .array(list))
    }

    private func products(_ arguments: Arguments) -> Result {
        guard let app = arguments["app"] else { return .failure(.invalidArgument, "products needs an APP") }
        guard let catalog = engine.catalogs[app] else { return .failure(.unknownApp, "app \(app) is not registered") }
        let records = catalog.products.map { $0.record(locale: engine.locale, currencyCode: engine.currencyCode) }
        let registration = configuration.app(app)
        return Result(json: .array(records.map { record in
            guard case .object(var members) = record.json else { return record.json }
            // SKProduct's names: whether it comes with hosted content, and which.
            let content = registration?.content(of: record.productID)
            members.append(("isDownloadable", .bool(content != nil)))
            if let content {
                members.append(("downloadContentVersion", .string(content.version)))
                members.append(("downloadContentLengths", .array([.int(Int64(clamping: content.manifest.length))])))
            }
            return .object(members)
        }))
    }

    /// `storekitctl content APP PRODUCT`: the hosted content of a product as the daemon listed
    /// it at its last start or reload: the folder, the version, and each file with its SHA-256.
    private func content(_ arguments: Arguments) -> Result {
        guard let app = arguments["app"], let productID = arguments["product"] else {
            return .failure(.invalidArgument, "content needs an APP and a PRODUCT")
        }
        guard let registration = configuration.app(app), let catalog = engine.catalogs[app] else {
            return .failure(.unknownApp, "app \(app) is not registered")
        }
        guard catalog.product(productID) != nil else {
            return .failure(.invalidArgument, "\(app) has no product \(productID)")
        }
        guard let content = registration.content(of: productID) else {
            return .failure(.invalidArgument, "\(productID) comes with no hosted content (no [HostedContent] in \(registration.file))")
        }
        return Result(json: .object([
            ("productIdentifier", .string(productID)),
            ("contentVersion", .string(content.version)),
            ("path", .string(content.directory)),
            ("contentLength", .int(Int64(clamping: content.manifest.length))),
            ("files", .array(content.files.map { file in
                .object([("path", .string(file.path)), ("length", .int(Int64(clamping: file.length))),
                         ("sha256", .string(file.sha256.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()))])
            })),
        ]))
    }

    private func transactions(_ arguments: Arguments) throws(LedgerError) -> Result {
        var uid: UInt32?
        if let text = arguments["uid"] {
            guard let value = UInt32(text) else { return .failure(.invalidArgument, "uid '\(text)' is not a number") }
            uid = value
        }
        if let app = arguments["app"], !engine.isRegistered(app: app) {
            return .failure(.unknownApp, "app \(app) is not registered")
        }
        let records = try engine.store.list(uid: uid, app: arguments["app"], unfinishedOnly: arguments["unfinished"] == "1")
        return Result(json: .array(try signed(records).map(\.json)))
    }

    /// `records` with their JWS (`jwsRepresentation` in `-o json`).
    func signed(_ records: [TransactionRecord]) throws(LedgerError) -> [TransactionRecord] {
        do {
            return try server.proof.signed(records, engine: engine, configuration: configuration)
        } catch let error as LedgerError {
            throw error
        } catch {
            server.logger.error("Failed to sign for storekitctl: \(error)", id: .signingKey)
            return records
        }
    }

    /// The root certificate apps and servers verify against: PEM, and DER in base64.
    private func certificate() -> Result {
        let root = server.proof.identity.root
        return Result(json: .object([
            ("pem", .string(String(decoding: root.pem, as: UTF8.self))),
            ("der", .string(Data(root.der).base64EncodedString())),
            ("published", .array(server.proof.rootPaths.map { .string($0) })),
        ]))
    }

    /// A new signing certificate and key under the same root; with `revoke=1`, the old one revoked;
    /// with `chain=1`, a whole new chain.
    private func rotateKey(_ arguments: Arguments) -> Result {
        let chain = arguments["chain"] == "1"
        let revoke = arguments["revoke"] == "1"
        if chain && revoke {
            return .failure(.malformedRequest, "--revoke and --chain do not go together: a new chain already leaves "
                                + "nothing the old one signed verifiable")
        }
        let old = server.proof.identity.leaf
        if revoke {
            // Replies signed on the loop with the old leaf and waiting only for their commit to
            // be durable leave first, before it is revoked; what signers are making with it is
            // made again once it is (collectSignatures).
            server.ledger.waitUntilDurable()
            server.releaseDurable()
        }
        do {
            try server.proof.rotateKey(chain: chain, revoke: revoke)
        } catch {
            return .failure(.internalError, "cannot make a new signing key: \(error)")
        }
        let identity = server.proof.identity
        let expires = Int64(identity.leaf.notAfter.timeIntervalSince1970 * 1000)
        let fields = [("STOREKIT_SIGNING_LEAF_EXPIRES", RFC3339.string(milliseconds: expires))]
        if chain {
            server.logger.notice("Replaced the whole signing chain, root included (storekitctl rotate-key --chain): "
                                     + "hand the new root (\(server.proof.rootPaths[0])) to the servers that validate purchases",
                                 id: .signingKey, fields: fields)
        } else if revoke, let entry = server.proof.identity.revocations.entry(revoking: old) {
            server.logger.notice("Replaced and revoked the signing certificate (storekitctl rotate-key --revoke): nothing it "
                                     + "signed verifies any more (serial \(entry.serial)); the revocation list is published "
                                     + "beside the root certificate",
                                 id: .signingKey, fields: fields + [("STOREKIT_REVOKED_SERIAL", entry.serial)])
        } else {
            server.logger.notice("Replaced the signing certificate (storekitctl rotate-key)", id: .signingKey, fields: fields)
        }
        var json: [(String, JSONValue)] = [
            ("certificate", .string(String(decoding: identity.leaf.pem, as: UTF8.self))),
            ("expires", .string(RFC3339.string(milliseconds: expires))),
        ]
        if chain { json.append(("root", .string(String(decoding: identity.root.pem, as: UTF8.self)))) }
        if revoke, let entry = identity.revocations.entry(revoking: old) { json.append(("revoked", .string(entry.serial))) }
        return Result(json: .object(json))
    }

    /// A queue's app receipt, base64, as a server receives it.
    private func receipt(_ arguments: Arguments) throws(LedgerError) -> Result {
        guard let app = arguments["app"] else { return .failure(.invalidArgument, "receipt needs an APP") }
        guard engine.isRegistered(app: app) else { return .failure(.unknownApp, "app \(app) is not registered") }
        guard let uid = UInt32(arguments["uid"] ?? "0") else { return .failure(.invalidArgument, "uid is not a number") }
        do {
            let receipt = try server.proof.signedReceipt(uid: uid, app: app, engine: engine, configuration: configuration)
            return Result(json: .object([("receipt", .string(Data(receipt).base64EncodedString()))]))
        } catch let error as LedgerError {
            throw error
        } catch {
            return .failure(.internalError, "cannot make the receipt: \(error)")
        }
    }

    private func buy(_ arguments: Arguments) throws(LedgerError) -> Result {
        guard let app = arguments["app"], let product = arguments["product"] else {
            return .failure(.invalidArgument, "buy needs APP and PRODUCT")
        }
        guard let uid = UInt32(arguments["uid"] ?? "0") else { return .failure(.invalidArgument, "uid is not a number") }
        guard let quantity = Int32(arguments["quantity"] ?? "1") else {
            return .failure(.invalidArgument, "quantity is not a number")
        }
        guard engine.isRegistered(app: app) else { return .failure(.unknownApp, "app \(app) is not registered") }
        guard engine.product(app: app, id: product) != nil else {
            return Result(code: .storeKit, message: "product \(product) is not in the catalogue of \(app)",
                          json: .object([("error", .string("product \(product) is not in the catalogue of \(app)")),
                                         ("code", .int(Int64(StoreKitErrorCode.storeProductNotAvailable.rawValue)))]))
        }
        let payment = ClientMessage.AddPayment(requestID: 0, key: "", productID: product, quantity: quantity)
        let outcome = try engine.addPayment(uid: uid, app: app, payment: payment)
        guard outcome.code == .ok else {
            return Result(code: outcome.code, message: outcome.message,
                          json: .object([("error", .string(outcome.message)), ("code", .int(Int64(outcome.detail)))]))
        }
        let record = try engine.store.transaction(id: outcome.value)
        return Result(json: try record.map { (record) throws(LedgerError) in try signed([record])[0].json } ?? .null,
                      effects: outcome.effects)
    }
}
