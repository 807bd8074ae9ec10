import CPosix
import StoreKitEngine
import StoreKitLedger
import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

// What each client and control request does inside a unit of work.

extension Server {
    func execute(
        _ message: ClientMessage, for session: Session, into output: inout UnitOutput, restoring: inout Set<QueueKey>
    ) throws(LedgerError) {
        let uid = session.peer.uid
        let app = session.app ?? ""
        let queue = QueueKey(uid: uid, app: app)
        if session.kind == .client, let requestID = message.requestID,
           !requestRates.admit(uid: uid, now: Monotonic.milliseconds(), perSecond: configuration.maxRequestsPerUIDPerSecond) {
            let limit = configuration.maxRequestsPerUIDPerSecond
            if sayRefusal(of: uid) {
                let logger = self.logger
                output.journal.append {
                    logger.warning("Refused request of uid \(uid) for \(app): more than \(limit) requests per second",
                                   id: .refused, fields: [("STOREKIT_APP", app), ("STOREKIT_UID", String(uid)),
                                                          ("STOREKIT_REFUSAL", ResultCode.rateLimited.name)])
                }
            }
            output.reply(session, .result(requestID, .rateLimited,
                                          "more than \(limit) requests per second from uid \(uid) (MaxRequestsPerUIDPerSecond=)"))
            return
        }
        switch message {
        case .hello:
            preconditionFailure("hello is handled when decoded")
        case .ping(let id):
            output.reply(session, .result(id, .ok))
        case .subscribe(let id):
            if !session.subscribed {
                session.subscribed = true
                observers[queue, default: []].insert(session.token)
                output.subscriptions.append((queue, session.token))
                keepInFDStore(session)
                activator.observerConnected(queue)
                let logger = self.logger
                let pid = session.peer.pid
                output.journal.append {
                    logger.info("Observer of \(app) for uid \(uid) connected (pid \(pid))", id: .observerConnected,
                                fields: [("STOREKIT_APP", app), ("STOREKIT_UID", String(uid))])
                }
            }
            // Every registration gets every unfinished transaction, in frames of bounded size;
            // unsigned: StoreKit 1 needs no JWS, and StoreKit 2 reads the signed queue with
            // `unfinished` (a snapshot of 100,000 signed transactions is 330 MB and seconds of
            // signing on the serving loop). Changes pushed from now on are signed.
            let unfinished = try engine.unfinished(uid: uid, app: app)
            var start = 0
            while start < unfinished.count {
                let page = page(unfinished[start...], signed: false)
                output.reply(session, .updated(page))
                start += page.count
            }
            // Promotions offered while nobody observed are offered now, once; price increases
            // waiting for consent are told at every registration until answered.
            for product in try engine.takePromotions(queue) { output.reply(session, .promotedPurchase(product)) }
            if session.version >= ProtocolVersion.hostedContent {
                for productID in try engine.pendingPriceConsents(queue) { output.reply(session, .priceConsent(productID: productID)) }
            }
            output.reply(session, .result(id, .ok, value: UInt64(unfinished.count)))
        case .unsubscribe(let id):
            if session.subscribed {
                session.subscribed = false
                observers[queue]?.remove(session.token)
                keepInFDStore(session)
            }
            output.reply(session, .result(id, .ok))
        case .addPayment(let payment):
            guard writesAllowed(payment.requestID, session, &output) else { return }
            // A promotional offer's signature is checked here, where the keys are; not for a
            // payment sent again whose key already made its transaction (it is answered as before).
            if let discount = payment.discount, let registration = configuration.app(app),
               try !answeredBefore(payment, uid: uid, app: app),
               let refusal = registration.offerSignatureRefusal(discount, productID: payment.productID,
                                                                applicationUsername: payment.applicationUsername,
                                                                nowMilliseconds: WallClock.milliseconds()) {
                apply(refusal, requestID: payment.requestID, session: session, into: &output)
                return
            }
            // The JWS forms (versions 4 and 5) likewise.
            var terms = SignedPaymentTerms()
            if payment.offerJWS != nil || payment.eligibilityJWS != nil || payment.advancedCommerceJWS != nil,
               try !answeredBefore(payment, uid: uid, app: app) {
                guard let registration = configuration.app(app) else {
                    apply(.refused(.unknownApp, "app \(app) is not registered"), requestID: payment.requestID, session: session, into: &output)
                    return
                }
                // A ledger error while looking the transaction up is the request's error, not a refusal.
                var lookupError: LedgerError?
                let owns = { (transaction: String) -> Bool in
                    do throws(LedgerError) { return try self.owns(transaction, uid: uid, app: app) } catch {
                        lookupError = error
                        return false
                    }
                }
                let verdict = registration.signedTerms(of: payment, nowMilliseconds: WallClock.milliseconds(), ownsTransaction: owns)
                if let lookupError { throw lookupError }
                switch verdict {
                case .failure(let refusal):
                    apply(refusal.outcome, requestID: payment.requestID, session: session, into: &output)
                    return
                case .success(let verified):
                    terms = verified
                }
            }
            let outcome = try engine.addPayment(uid: uid, app: app, payment: payment, promotionalOfferID: terms.promotionalOfferID,
                                                introductoryOfferAllowed: terms.introductoryOfferAllowed,
                                                advancedCommerce: terms.advancedCommerce)
            apply(outcome, requestID: payment.requestID, session: session, into: &output)
        case .finish(let id, let transactionID):
            guard writesAllowed(id, session, &output) else { return }
            let outcome = try engine.finish(uid: uid, app: app, transactionID: transactionID)
            apply(outcome, requestID: id, session: session, into: &output)
        case .restore(let id, let username):
            guard writesAllowed(id, session, &output) else { return }
            // Single-flight: a second restore of the same queue in this unit of work joins the first.
            if restoring.contains(queue) {
                output.reply(session, .result(id, .ok))
                return
            }
            restoring.insert(queue)
            let outcome = try engine.restore(uid: uid, app: app, applicationUsername: username)
            apply(outcome, requestID: id, session: session, into: &output)
        case .cancelPayment(let id, let transactionID):
            guard writesAllowed(id, session, &output) else { return }
            let outcome = try engine.cancelDeferred(uid: uid, app: app, transactionID: transactionID)
            apply(outcome, requestID: id, session: session, into: &output)
        case .products(let id, let identifiers):
            let (products, invalid) = engine.products(app: app, identifiers: identifiers)
            output.reply(session, .products(requestID: id, products: products, invalidIdentifiers: invalid))
        case .unfinished(let id, _) where session.version == 1:
            // Version 1 asks once and reads every unfinished transaction in one frame, unsigned.
            output.reply(session, .transactions(requestID: id, transactions: try engine.unfinished(uid: uid, app: app)))
        case .unfinished(let id, let afterID):
            let records = try engine.unfinished(uid: uid, app: app).filter { $0.id > afterID }
            output.appendToSign(.transactions(requestID: id, transactions: page(records[...], signed: true)), to: [session.token])
        case .history(let id, let afterID):
            output.appendToSign(.transactions(requestID: id, transactions: try historyPage(uid: uid, app: app, after: afterID)),
                                to: [session.token])
        case .subscriptionStatus(let id, let groupID):
            output.reply(session, try signedReply(id) {
                .subscriptionStatus(requestID: id, statuses: try proof.subscriptionStatuses(
                    uid: uid, app: app, groupID: groupID, engine: engine, configuration: configuration))
            })
        case .appTransaction(let id):
            output.reply(session, try signedReply(id) {
                .signed(requestID: id, jws: try proof.appTransaction(uid: uid, app: app, engine: engine, configuration: configuration))
            })
        case .receipt(let id):
            // Kept, or read now and signed on a signer's thread once the unit is committed.
            let answer: ProofOfPurchase.ReceiptAnswer
            do {
                answer = try proof.receipt(uid: uid, app: app, engine: engine, configuration: configuration)
            } catch let error as LedgerError {
                throw error
            } catch {
                logger.error("Failed to make the receipt: \(error)", id: .signingKey)
                output.reply(session, .result(id, .internalError, "cannot make the receipt: \(error)"))
                return
            }
            switch answer {
            case .kept(let bytes):
                output.replyReceipt(session.token, requestID: id, data: bytes)
            case .toSign(let contents, let sequence):
                output.appendReceiptToSign(session.token, requestID: id, contents, queue: QueueKey(uid: uid, app: app), sequence: sequence)
            }
        case .content(let id, let transactionID):
            switch try ownedContent(transactionID, uid: uid, app: app) {
            case .success(let content):
                output.reply(session, .content(requestID: id, manifest: content.manifest))
                let logger = self.logger
                output.journal.append {
                    logger.info("uid \(uid) of \(app) asked for the content of \(content.productID) \(content.version) "
                                + "(transaction \(transactionID))", id: .contentRequested,
                                fields: [("STOREKIT_APP", app), ("STOREKIT_UID", String(uid)), ("STOREKIT_PRODUCT", content.productID),
                                         ("STOREKIT_TRANSACTION_ID", String(transactionID))])
                }
            case .failure(let refusal):
                output.reply(session, .result(id, .noContent, refusal.message))
            }
        case .openContent(let id, let transactionID, let file):
            switch try ownedContent(transactionID, uid: uid, app: app) {
            case .success(let content):
                // A connection that asks for files faster than it reads them holds the daemon's
                // descriptors (and the kernel's, for those sent and unread): a few at a time.
                guard session.descriptorsOnTheirWay() < Self.descriptorsPerConnection else {
                    output.reply(session, .result(id, .quotaExceeded,
                        "\(Self.descriptorsPerConnection) content files are on their way to this connection already: read them first"))
                    return
                }
                guard Int(file) < content.files.count else {
                    output.reply(session, .result(id, .invalidArgument,
                                                  "the content of \(content.productID) has \(content.files.count) files, no file \(file)"))
                    return
                }
                switch content.openFile(Int(file)) {
                case .success(let fd):
                    output.reply(session, .contentFile(requestID: id, file: file, length: content.files[Int(file)].length),
                                 passing: PassedDescriptor(adopting: fd, countedIn: session.descriptorsHeld))
                case .failure(let unavailable):
                    let logger = self.logger
                    output.journal.append {
                        logger.error("Hosted content of \(content.productID) for \(app): \(unavailable.message)", id: .contentUnavailable,
                                     fields: [("STOREKIT_APP", app), ("STOREKIT_PRODUCT", content.productID)])
                    }
                    output.reply(session, .result(id, .noContent, unavailable.message))
                }
            case .failure(let refusal):
                output.reply(session, .result(id, .noContent, refusal.message))
            }
        #if STOREKIT_TEST_HOOKS
        case .control(let id, let command, let arguments) where testHooks != nil && TestHooks.commands.contains(command):
            let (code, message) = testHooks!.execute(command, arguments, ledger: ledger)
            output.reply(session, .controlResult(requestID: id, code: code, message: message, json: "null"))
        #endif
        case .control(let id, let command, let arguments):
            let controller = ControlCommands(engine: engine, configuration: configuration, server: self)
            let result = try controller.execute(command: command, arguments: arguments, writesStopped: mutatingRefusal)
            for effect in result.effects { route(effect, into: &output) }
            output.reply(session, .controlResult(requestID: id, code: result.code, message: result.message,
                                                 json: result.json.serialized()))
        }
    }

    /// Content files one connection may have on their way (opened for its replies, not yet read
    /// into its socket's buffer).
    static let descriptorsPerConnection = 16

    /// Whether `transaction` (a decimal id) is one of (uid, app)'s transactions or its app transaction id.
    func owns(_ transaction: String, uid: UInt32, app: String) throws(LedgerError) -> Bool {
        if transaction == proof.appTransactionID(uid: uid, app: app, engine: engine) { return true }
        guard let id = UInt64(transaction), let record = try engine.store.transaction(id: id) else { return false }
        return record.uid == uid && record.app == app
    }

    /// Whether the payment's key already made a transaction (a payment sent again).
    func answeredBefore(_ payment: ClientMessage.AddPayment, uid: UInt32, app: String) throws(LedgerError) -> Bool {
        guard !payment.key.isEmpty else { return false }
        return try engine.store.transaction(uid: uid, app: app, paymentKey: payment.key) != nil
    }

    /// The hosted content a transaction gives its owner: a purchased or restored, unrevoked
    /// transaction of this (uid, app) whose product comes with content. Another uid's transaction
    /// is refused as one that does not exist.
    func ownedContent(_ transactionID: UInt64, uid: UInt32, app: String) throws(LedgerError) -> Result<HostedContent, ContentRefusal> {
        guard let record = try engine.store.transaction(id: transactionID), record.uid == uid, record.app == app else {
            return .failure(ContentRefusal(message: "transaction \(transactionID) is not in this queue"))
        }
        guard record.state == .purchased || record.state == .restored else {
            return .failure(ContentRefusal(message: "transaction \(transactionID) is \(record.state): only a purchased or restored "
                                               + "transaction has content to download"))
        }
        guard record.revocationDate == nil else {
            return .failure(ContentRefusal(message: "transaction \(transactionID) was refunded: its content is no longer the buyer's"))
        }
        guard let content = configuration.app(app)?.content(of: record.productID) else {
            return .failure(ContentRefusal(message: "\(record.productID) comes with no hosted content"))
        }
        return .success(content)
    }

    struct ContentRefusal: Error {
        var message: String
    }

    /// A page of the history after `afterID`, read from the ledger a chunk at a time until the
    /// page is full: a page costs what it holds, wherever it is in a long history. Its records
    /// are signed after the unit of work (`appendToSign`), so each is sized with its JWS.
    func historyPage(uid: UInt32, app: String, after afterID: UInt64) throws(LedgerError) -> [TransactionRecord] {
        let chunk = 128
        var page: [TransactionRecord] = []
        var bytes = 0
        var cursor = afterID
        while true {
            let records = try engine.history(uid: uid, app: app, afterID: cursor, limit: chunk)
            for record in records {
                bytes += sentSize(of: record)
                if !page.isEmpty, bytes > ServerMessage.pageBudget { return page }
                page.append(record)
            }
            guard records.count == chunk, let last = records.last else { return page }
            cursor = last.id
        }
    }

    /// As many of `records` as fit in `ServerMessage.pageBudget` bytes (at least one), sized with
    /// the JWS each will carry when `signed`.
    func page(_ records: ArraySlice<TransactionRecord>, signed: Bool) -> [TransactionRecord] {
        var page: [TransactionRecord] = []
        var bytes = 0
        for record in records {
            bytes += signed ? sentSize(of: record) : record.encodedSize
            if !page.isEmpty, bytes > ServerMessage.pageBudget { break }
            page.append(record)
        }
        return page
    }

    /// `record`'s encoded size with the JWS it will carry: the kept one's, else an upper bound.
    func sentSize(of record: TransactionRecord) -> Int {
        guard PaymentQueueEngine.isSignable(record), record.jwsRepresentation == nil else { return record.encodedSize }
        let jws = proof.cachedJWSLength(for: record) ?? proof.identity.encodedHeader.utf8.count + Self.jwsPayloadBound
        return record.encodedSize + 4 + jws   // the JWS and its length
    }

    /// Bytes a JWS has beyond its header, at most: the payload's base64 (a transaction's payload
    /// is under 1.5 KB, with ids and names at their longest) and the signature.
    static let jwsPayloadBound = 2_200

    /// `records` with their JWS; a record that cannot be signed goes without one (the app then
    /// sees it unverified), and the journal says why.
    func signedForSending(_ records: [TransactionRecord]) -> [TransactionRecord] {
        do {
            return try proof.signed(records, engine: engine, configuration: configuration)
        } catch {
            logger.error("Failed to sign transactions \(records.map { String($0.id) }.joined(separator: ", ")): \(error)",
                         id: .signingKey)
            return records
        }
    }

    /// The reply `make` builds; a store failure is the unit of work's, any other (signing) is
    /// answered `internalError` with the reason, and logged.
    func signedReply(_ id: UInt32, _ make: () throws -> ServerMessage) throws(LedgerError) -> ServerMessage {
        do {
            return try make()
        } catch let error as LedgerError {
            throw error
        } catch {
            logger.error("Failed to sign: \(error)", id: .signingKey)
            return .result(id, .internalError, "cannot sign: \(error)")
        }
    }

    func apply(_ outcome: Outcome, requestID: UInt32, session: Session, into output: inout UnitOutput) {
        if outcome.code != .ok, sayRefusal(of: session.peer.uid) {
            let logger = self.logger
            let uid = session.peer.uid
            let app = session.app ?? ""
            output.journal.append {
                logger.info("Refused request of uid \(uid) for \(app): \(outcome.message)", id: .refused,
                            fields: [("STOREKIT_APP", app), ("STOREKIT_UID", String(uid)),
                                     ("STOREKIT_REFUSAL", outcome.code.name)])
            }
        }
        for effect in outcome.effects { route(effect, into: &output) }
        output.reply(session, .result(requestID: requestID, code: outcome.code, detail: outcome.detail,
                                      value: outcome.value, message: outcome.message))
    }
}
