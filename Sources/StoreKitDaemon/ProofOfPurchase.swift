import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import StoreKitEngine
import StoreKitLedger
import StoreKitPosix
import StoreKitSigning
import StoreKitWire

/// What the daemon signs for apps and their servers: every `purchased` or `restored`
/// transaction it sends as a JWS (Apple's `JWSTransaction`), renewal info, the app transaction,
/// and app receipts (docs/receipts.md). Owns the signing identity, which `storekitctl rotate-key`
/// replaces while the daemon runs.
///
/// Pushes, pages of transactions and receipts are signed on the `Signer`'s threads; other replies
/// with signed data (subscription statuses, the app transaction, control commands) on the serving
/// thread, about 40 µs for a transaction. A record signed once keeps its
/// JWS in a small cache until its payload changes, so the `removed` push after a finish and
/// re-sending unfinished transactions at every launch do not sign again.
public final class ProofOfPurchase {
    private(set) var identity: SigningIdentity
    let keyDirectory: String
    /// Where the root certificate is published for apps (0644).
    let rootPaths: [String]
    /// Signed transactions by id, with what their payload depends on: a finish (new sequence,
    /// `finished`) does not change the payload, a refund or a renewal's new end does. Each keeps
    /// only what follows the JWS header (payload and signature, about 700 bytes): the header, the
    /// leaf's chain (about 2 KB), is the same for every JWS of the current key and is put back
    /// in front when one leaves. So a history of tens of thousands of transactions stays signed
    /// while it is paged through, instead of thrashing a cache of whole JWS.
    private var cache: [UInt64: (state: TransactionState, revocationDate: Int64?, expiresDate: Int64?, tail: String)] = [:]
    private var cacheOrder: [UInt64] = []
    private var cacheBytes = 0
    /// Bytes of kept signatures at most (about 45,000 transactions); the oldest go first.
    static let cacheBytesLimit = 32 << 20
    /// Receipts made, by queue, with the queue's last sequence number when each was made: a
    /// receipt is made (and signed) again only when its queue changed since, not per request.
    /// Each app's device identifier (an HMAC of the machine id), made once.
    private var deviceIdentifiers: [String: String] = [:]
    /// `appTransactionID(uid:app:engine:)` of each queue, made once (a password-database lookup
    /// and a digest are not paid per signature); forgotten at a reload and past 65,536 queues.
    private var appTransactionIDs: [QueueKey: String] = [:]
    private var receipts: [QueueKey: (sequence: UInt64, bytes: [UInt8])] = [:]
    private var receiptOrder: [QueueKey] = []
    private var receiptBytes = 0
    /// Bytes of kept receipts at most (a queue of 5,000 unfinished purchases has one of 1.3 MB);
    /// the oldest are dropped first.
    static let receiptBytesLimit = 64 << 20
    /// What each receipt made lists, by transaction id, as of the queue's sequence number: when
    /// the queue moves, only the transactions changed since are read (`receiptChanges`), not the
    /// queue's whole history. Dropped with the queue's kept receipt, and all of them when the
    /// ledger undid changes (its `generation`: a list may hold what a unit read and then rolled
    /// back) or another host changed more than transactions (`externalGeneration`: a history
    /// deleted there moves no transaction).
    /// Entries keep their encoded attributes (`AppReceipt.Entry`): the next receipt encodes only
    /// what changed.
    private var receiptLists: [QueueKey: (sequence: UInt64, purchases: [UInt64: AppReceipt.Entry])] = [:]
    private var receiptListsGenerations: (ledger: UInt64, external: UInt64) = (0, 0)

    init(identity: SigningIdentity, keyDirectory: String, rootPaths: [String]) {
        self.identity = identity
        self.keyDirectory = keyDirectory
        self.rootPaths = rootPaths
    }

    /// Loads (or makes, at first start) the identity in `STATE/signing` and publishes the root.
    static func open(stateDirectory: String, runtimeDirectory: String?, logger: Logger) throws(SigningError) -> ProofOfPurchase {
        let directory = stateDirectory + "/signing"
        let (identity, origin, repairs) = try SigningIdentity.openOrCreate(directory: directory)
        if !repairs.isEmpty {
            // Said once, at the start that found it: the next start finds the modes right.
            logger.warning("The signing key was readable by other users and has been made private ("
                               + repairs.map(\.description).joined(separator: "; ")
                               + "). Anyone who read it can sign purchases that verify: rotate the chain with "
                               + "storekitctl rotate-key --chain and hand the new root to the servers that validate purchases",
                           id: .signingKeyExposed,
                           fields: [("STOREKIT_KEY_DIRECTORY", directory),
                                    ("STOREKIT_REPAIRED", repairs.map(\.description).joined(separator: "; "))])
        }
        var rootPaths = [stateDirectory + "/" + RootCertificateLocation.fileName]
        if let runtimeDirectory { rootPaths.append(runtimeDirectory + "/" + RootCertificateLocation.fileName) }
        for path in rootPaths {
            try identity.publishRoot(to: path)
            try identity.publishRevocations(to: RootCertificateLocation.revocationsPath(besideRoot: path))
        }
        let fields = [("STOREKIT_SIGNING_LEAF_EXPIRES", RFC3339.string(milliseconds: Int64(identity.leaf.notAfter.timeIntervalSince1970 * 1000)))]
        switch origin {
        case .created:
            logger.notice("Made a signing key and certificate chain in \(directory); root certificate at \(rootPaths[0])",
                          id: .signingKey, fields: fields)
        case .leafRenewed:
            logger.notice("Replaced the signing certificate in \(directory): the previous one was about to expire",
                          id: .signingKey, fields: fields)
        case .revokedLeafReplaced:
            logger.notice("Replaced the signing certificate in \(directory): it was revoked (a storekitctl rotate-key "
                              + "--revoke stopped before its new certificate was made)", id: .signingKey, fields: fields)
        case .loaded:
            logger.info("Loaded the signing key from \(directory)", id: .signingKey, fields: fields)
        }
        return ProofOfPurchase(identity: identity, keyDirectory: directory, rootPaths: rootPaths)
    }

    /// `storekitctl rotate-key`: a new leaf from now on; what the old one signed stays verifiable.
    /// With `revoke`, the old leaf is revoked (the list published where the root is): nothing it
    /// signed verifies any more. With `chain`, a new root and intermediate as well (published at
    /// once where the old root was): for a key someone else may have read.
    func rotateKey(chain: Bool = false, revoke: Bool = false) throws(SigningError) {
        if chain {
            identity = try SigningIdentity.replacingChain(in: keyDirectory)
        } else {
            identity = try identity.rotatingLeaf(in: keyDirectory, revokingCurrent: revoke)
        }
        // What the old key signed is kept no more, whatever happens next: the new key is in use.
        cache.removeAll()
        cacheOrder.removeAll()
        cacheBytes = 0
        forgetReceipts()
        if chain || revoke {
            do {
                for path in rootPaths {
                    try identity.publishRoot(to: path)
                    try identity.publishRevocations(to: RootCertificateLocation.revocationsPath(besideRoot: path))
                }
            } catch {
                throw SigningError("The new key is in use, but what apps must now trust could not be published "
                                   + "(it is published again at the next start): \(error)")
            }
        }
    }

    /// Drops every kept receipt: after what changes receipts without a queue's sequence number
    /// moving (a new key, a reload of the registrations and catalogues, a store command that
    /// deletes history).
    /// At a reload: a user may have been renamed, the machine id set.
    func forgetIdentities() {
        appTransactionIDs.removeAll()
        deviceIdentifiers.removeAll()
    }

    func forgetReceipts() {
        receipts.removeAll()
        receiptLists.removeAll()
        receiptOrder.removeAll()
        receiptBytes = 0
    }

    /// Keeps `bytes`, the receipt of `queue` as of its `sequence`, unless the key was rotated
    /// since `signer` made it or a receipt of a later sequence is kept already (one made on a
    /// signer's thread can come back after a newer one).
    func keepReceipt(_ bytes: [UInt8], sequence: UInt64, for queue: QueueKey, signedBy signer: SigningIdentity) {
        guard signer === identity, (receipts[queue]?.sequence ?? 0) <= sequence else { return }
        if let old = receipts.updateValue((sequence, bytes), forKey: queue) {
            receiptBytes -= old.bytes.count
        } else {
            receiptOrder.append(queue)
        }
        receiptBytes += bytes.count
        while receiptBytes > Self.receiptBytesLimit, let oldest = receiptOrder.first {
            receiptOrder.removeFirst()
            receiptBytes -= receipts.removeValue(forKey: oldest)?.bytes.count ?? 0
            receiptLists[oldest] = nil
        }
    }

    static var now: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// `records` with the JWS of each signable one filled in.
    func signed(_ records: [TransactionRecord], engine: PaymentQueueEngine, configuration: DaemonConfiguration) throws -> [TransactionRecord] {
        var result = records
        for index in result.indices where PaymentQueueEngine.isSignable(result[index]) {
            result[index].jwsRepresentation = try jws(for: result[index], engine: engine, configuration: configuration)
        }
        return result
    }

    func jws(for record: TransactionRecord, engine: PaymentQueueEngine, configuration: DaemonConfiguration) throws -> String? {
        if let cached = cachedJWS(for: record) { return cached }
        guard let payload = try payload(for: record, engine: engine, configuration: configuration) else { return nil }
        var signed = record
        signed.jwsRepresentation = try identity.signJWS(payload: payload.serializedBytes())
        remember(signed, signedBy: identity)
        return signed.jwsRepresentation
    }

    /// The JWS signed earlier for `record`, if its payload has not changed since.
    func cachedJWS(for record: TransactionRecord) -> String? {
        cachedTail(for: record).map { identity.encodedHeader + $0 }
    }

    /// The length of the JWS signed earlier for `record` (as `cachedJWS` would give it), without
    /// putting it together.
    func cachedJWSLength(for record: TransactionRecord) -> Int? {
        cachedTail(for: record).map { identity.encodedHeader.utf8.count + $0.utf8.count }
    }

    /// What follows the header of the JWS kept for `record`, if its payload has not changed since.
    private func cachedTail(for record: TransactionRecord) -> String? {
        guard let cached = cache[record.id], cached.state == record.state, cached.revocationDate == record.revocationDate,
              cached.expiresDate == record.expiresDate else { return nil }
        return cached.tail
    }

    /// What `record`'s JWS says (Apple's `JWSTransactionDecodedPayload`); nil when it is not signed.
    /// It carries device verification for this machine and the app (`deviceVerificationNonce`,
    /// `deviceVerification`: SHA-384 of the nonce and `AppStore.deviceVerificationID`), as the
    /// app transaction does.
    func payload(for record: TransactionRecord, engine: PaymentQueueEngine, configuration: DaemonConfiguration) throws -> JSONValue? {
        let environment = configuration.app(record.app)?.environment ?? .xcode
        guard case .object(var members)? = try engine.transactionPayload(record, environment: environment.rawValue, signedDate: Self.now) else {
            return nil
        }
        members += deviceVerification(app: record.app)
        members.append(("appTransactionId", .string(appTransactionID(uid: record.uid, app: record.app, engine: engine))))
        return .object(members)
    }

    /// The app transaction's device verification: it must carry one (no machine id: an error).
    static func appDeviceVerification(app: String) throws -> [(String, JSONValue)] {
        verificationMembers(device: try DeviceIdentifier.forApp(app))
    }

    /// A new nonce, and the device verification of `device` made with it.
    static func verificationMembers(device: [UInt8]) -> [(String, JSONValue)] {
        verificationMembers(device: Digest.uuidString(device))
    }

    /// The same, for the device identifier as its lowercase UUID string (kept per app).
    static func verificationMembers(device: String) -> [(String, JSONValue)] {
        let nonce = Digest.uuidString(randomUUIDBytes())
        return [("deviceVerificationNonce", .string(nonce)),
                ("deviceVerification", .string(Data(Digest.sha384(Array((nonce + device).utf8))).base64EncodedString()))]
    }

    /// A random (version 4) UUID from the system's generator (`getrandom`): Foundation's `UUID()`
    /// opens, reads and closes /dev/urandom each time, three system calls per signature on the
    /// serving loop (seen with strace: one per purchase).
    static func randomUUID() -> UUID {
        let raw = randomUUIDBytes()
        return UUID(uuid: (raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
                           raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]))
    }

    /// The 16 bytes of a random (version 4) UUID.
    static func randomUUIDBytes() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var words = (generator.next() as UInt64, generator.next() as UInt64)
        var raw = withUnsafeBytes(of: &words) { Array($0) }
        raw[6] = raw[6] & 0x0F | 0x40   // version 4
        raw[8] = raw[8] & 0x3F | 0x80   // RFC 4122 variant
        return raw
    }

    /// The id of the user's "download" of `app` (Apple's `appTransactionId`): the same for every
    /// transaction and the app transaction of (account, app), on every host of a fleet that
    /// names accounts alike; a decimal number, as Apple's. Made from the account and the app
    /// (SHA-384, first 63 bits), not stored.
    func appTransactionID(uid: UInt32, app: String, engine: PaymentQueueEngine) -> String {
        let queue = QueueKey(uid: uid, app: app)
        if let known = appTransactionIDs[queue] { return known }
        if appTransactionIDs.count >= 65_536 { appTransactionIDs.removeAll() }
        let made = Self.appTransactionID(uid: uid, app: app, fleet: engine.store.fleetIdentity != nil && engine.store.fleetIdentity?.accountFrom == "uid")
        appTransactionIDs[queue] = made
        return made
    }

    /// `appTransactionID` made afresh; `byUID`: accounts are `#UID` (a fleet's `AccountFrom=uid`).
    static func appTransactionID(uid: UInt32, app: String, fleet byUID: Bool) -> String {
        let account = byUID ? "#\(uid)" : (UserDatabase.name(of: uid) ?? "#\(uid)")
        let digest = Digest.sha384(Array("appTransactionId\u{0}\(app)\u{0}\(account)".utf8))
        let value = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } & 0x7fff_ffff_ffff_ffff
        return String(value)
    }

    /// A new nonce and the device verification made with it for `app` on this machine; nothing
    /// where the machine has no machine id (a transaction is signed without it; the app
    /// transaction, which must carry it, fails as before).
    func deviceVerification(app: String) -> [(String, JSONValue)] {
        let device: String
        if let known = deviceIdentifiers[app] {
            device = known
        } else {
            guard let made = try? DeviceIdentifier.forApp(app) else { return [] }
            if deviceIdentifiers.count >= 1024 { deviceIdentifiers.removeAll() }
            device = Digest.uuidString(made)
            deviceIdentifiers[app] = device
        }
        return Self.verificationMembers(device: device)
    }

    /// Keeps `record`'s JWS for the next time it leaves, unless the key was rotated since
    /// `signer` made it (what the old leaf signed stays valid, but is not handed out again).
    func remember(_ record: TransactionRecord, signedBy signer: SigningIdentity) {
        // Bytes, not Characters: walking a 2 KB header by grapheme (or even byte by byte) was a
        // fifth of the loop's time under load. `signer` begins every JWS with its header.
        let header = signer.encodedHeader.utf8
        guard signer === identity, let jws = record.jwsRepresentation, jws.utf8.count > header.count else { return }
        // A new String, not a slice of the whole JWS, so that the header's bytes are not kept.
        let tail = String(decoding: jws.utf8.dropFirst(header.count), as: UTF8.self)
        if let old = cache.updateValue((record.state, record.revocationDate, record.expiresDate, tail), forKey: record.id) {
            cacheBytes -= old.tail.utf8.count
        } else {
            cacheOrder.append(record.id)
        }
        cacheBytes += tail.utf8.count
        if cacheBytes > Self.cacheBytesLimit {
            // The oldest quarter goes at once, so that eviction is not paid per insertion.
            let evicted = cacheOrder.prefix(max(cacheOrder.count / 4, 1))
            for id in evicted { cacheBytes -= cache.removeValue(forKey: id)?.tail.utf8.count ?? 0 }
            cacheOrder.removeFirst(evicted.count)
        }
    }

    /// `subscriptionStatus`: each subscription of the queue (in `groupID`, when not empty).
    func subscriptionStatuses(uid: UInt32, app: String, groupID: String, engine: PaymentQueueEngine,
                              configuration: DaemonConfiguration) throws -> [SubscriptionStatusRecord] {
        let environment = (configuration.app(app)?.environment ?? .xcode).rawValue
        return try engine.subscriptionStatuses(uid: uid, app: app, groupID: groupID.isEmpty ? nil : groupID).map { status in
            let renewalInfo = engine.renewalInfoPayload(status.subscription, environment: environment, signedDate: Self.now,
                                                        priceIncrease: try engine.priceIncrease(of: status.subscription.originalID),
                                                        advancedCommerce: try engine.renewalCommerceInfo(of: status.subscription))
            return SubscriptionStatusRecord(
                groupID: status.subscription.groupID, state: status.state,
                transaction: try signed([status.latest], engine: engine, configuration: configuration)[0],
                signedRenewalInfo: try identity.signJWS(payload: renewalInfo.serializedBytes()))
        }
    }

    /// The signed renewal info of one subscription (for `storekitctl subscriptions -o json`).
    func signedRenewalInfo(_ subscription: Subscription, engine: PaymentQueueEngine,
                           configuration: DaemonConfiguration) throws(SigningError) -> String {
        let environment = (configuration.app(subscription.app)?.environment ?? .xcode).rawValue
        let payload = engine.renewalInfoPayload(subscription, environment: environment, signedDate: Self.now,
                                                priceIncrease: try? engine.priceIncrease(of: subscription.originalID),
                                                advancedCommerce: try? engine.renewalCommerceInfo(of: subscription))
        return try identity.signJWS(payload: payload.serializedBytes())
    }

    /// When (uid, app) first asked for proof: the app's "original purchase" on Linux, kept in the store.
    func firstSeen(uid: UInt32, app: String, engine: PaymentQueueEngine) throws(LedgerError) -> Int64 {
        let key = "firstSeen.\(uid).\(app)"
        if let text = try engine.store.setting(key), let value = Int64(text) { return value }
        let earliest = try engine.store.all(uid: uid, app: app).map(\.date).min()
        let value = min(earliest ?? engine.clock.now(), engine.clock.now())
        try engine.store.setSetting(key, String(value))
        return value
    }

    /// Apple's `AppTransaction`, signed.
    func appTransaction(uid: UInt32, app: String, engine: PaymentQueueEngine, configuration: DaemonConfiguration) throws -> String {
        let registration = configuration.app(app)
        let environment = registration?.environment ?? .xcode
        let version = registration?.version ?? "1.0"
        let payload: JSONValue = .object([
            ("receiptType", .string(environment.rawValue)),
            ("bundleId", .string(app)),
            ("applicationVersion", .string(version)),
            ("originalApplicationVersion", .string(version)),
            ("receiptCreationDate", .int(engine.clock.now())),
            ("originalPurchaseDate", .int(try firstSeen(uid: uid, app: app, engine: engine))),
            ("appTransactionId", .string(appTransactionID(uid: uid, app: app, engine: engine))),
        ] + (try Self.appDeviceVerification(app: app)) + [
            ("signedDate", .int(Self.now)),
            ("environment", .string(environment.rawValue)),
        ])
        return try identity.signJWS(payload: payload.serializedBytes())
    }

    /// A receipt to answer with: the one kept, or one to sign.
    enum ReceiptAnswer {
        case kept([UInt8])
        /// What to sign (on a signer's thread), with the queue's sequence number it lists.
        case toSign(AppReceipt, sequence: UInt64)
    }

    /// The app receipt of (uid, app): the one kept since the queue last changed, else its
    /// contents, read now, to be signed and kept (`keepReceipt`).
    func receipt(uid: UInt32, app: String, engine: PaymentQueueEngine, configuration: DaemonConfiguration) throws -> ReceiptAnswer {
        let queue = QueueKey(uid: uid, app: app)
        let sequence = try engine.store.lastSequence(uid: uid, app: app)
        if let kept = receipts[queue], kept.sequence == sequence { return .kept(kept.bytes) }
        return .toSign(try receiptContents(uid: uid, app: app, sequence: sequence, engine: engine, configuration: configuration),
                       sequence: sequence)
    }

    /// The app receipt of (uid, app), signed now, on the calling thread (for storekitctl receipt).
    func signedReceipt(uid: UInt32, app: String, engine: PaymentQueueEngine, configuration: DaemonConfiguration) throws -> [UInt8] {
        switch try receipt(uid: uid, app: app, engine: engine, configuration: configuration) {
        case .kept(let bytes):
            return bytes
        case .toSign(let contents, let sequence):
            let bytes = try identity.signReceipt(contents)
            keepReceipt(bytes, sequence: sequence, for: QueueKey(uid: uid, app: app), signedBy: identity)
            return bytes
        }
    }

    /// What the app receipt of (uid, app) says, as of now (unsigned).
    private func receiptContents(uid: UInt32, app: String, sequence: UInt64, engine: PaymentQueueEngine,
                                 configuration: DaemonConfiguration) throws -> AppReceipt {
        let registration = configuration.app(app)
        let version = registration?.version ?? "1.0"
        var opaque = [UInt8](repeating: 0, count: 16)
        for index in opaque.indices { opaque[index] = UInt8.random(in: 0...255) }
        func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
        // What the entries need besides their records, read for all of them at once: the offers
        // (one read of the settings), and each original's date (once per original: a
        // subscription's renewals share it). On PostgreSQL a read is a round trip on the loop;
        // per record, a queue of thousands of renewals cost thousands of them.
        var offers: [UInt64: TransactionOffer] = [:]
        var originalDates: [UInt64: Int64] = [:]
        func prepare(_ records: [TransactionRecord]) throws {
            let subscriptions = records.filter { engine.product(app: app, id: $0.productID)?.kind == .autoRenewable }
            offers = try engine.offers(of: subscriptions.map(\.id))
        }
        func originalDate(_ record: TransactionRecord) throws -> Int64 {
            guard let originalID = record.originalID, originalID != record.id else { return record.date }
            if let known = originalDates[originalID] { return known }
            // Kept only when the original is there (without it, each record's own date stands).
            guard let original = try engine.store.transaction(id: originalID) else { return record.date }
            originalDates[originalID] = original.date
            return original.date
        }
        func entry(_ record: TransactionRecord) throws -> AppReceipt.Entry {
            AppReceipt.Entry(try purchase(record))
        }
        func purchase(_ record: TransactionRecord) throws -> AppReceipt.InAppPurchase {
            let product = engine.product(app: app, id: record.productID)
            let subscription = product?.kind == .autoRenewable
            // The period's offer, as Apple's receipt tells it: `1713` a free trial, `1719` an
            // introductory price (pay as you go or up front), `1721` a promotional offer's id.
            // A win-back offer has no field in the receipt (it is newer than it); restored and
            // family copies, and periods at the full price, carry no offer.
            let offer = subscription ? offers[record.id] : nil
            let introductory = offer?.kind == .introductory
            return AppReceipt.InAppPurchase(
                quantity: Int64(record.quantity), productIdentifier: record.productID,
                transactionIdentifier: String(record.id), originalTransactionIdentifier: String(record.originalID ?? record.id),
                purchaseDate: date(record.date), originalPurchaseDate: date(try originalDate(record)),
                subscriptionExpirationDate: record.expiresDate.map(date), cancellationDate: record.revocationDate.map(date),
                webOrderLineItemID: subscription ? Int64(record.id) : nil,
                isTrialPeriod: introductory && offer?.discountType == TransactionOffer.freeTrial,
                isInIntroOfferPeriod: introductory && offer?.discountType != TransactionOffer.freeTrial,
                promotionalOfferIdentifier: offer?.kind == .promotional ? offer?.id : nil)
        }
        // The list made last, moved on by what changed since; else read whole.
        let queue = QueueKey(uid: uid, app: app)
        let generations = (engine.store.generation, engine.store.externalGeneration)
        if generations != receiptListsGenerations {
            receiptLists.removeAll()
            receiptListsGenerations = generations
        }
        var listed: [UInt64: AppReceipt.Entry] = [:]
        if var kept = receiptLists.removeValue(forKey: queue), kept.sequence <= sequence {
            // Taken out while it changes, so that the dictionary is not copied.
            let (changed, unlisted) = try engine.receiptChanges(uid: uid, app: app, afterSequence: kept.sequence)
            for id in unlisted { kept.purchases[id] = nil }
            try prepare(changed)
            for record in changed { kept.purchases[record.id] = try entry(record) }
            listed = kept.purchases
        } else {
            let records = try engine.receiptPurchases(uid: uid, app: app)
            try prepare(records)
            for record in records { listed[record.id] = try entry(record) }
        }
        receiptLists[queue] = (sequence, listed)
        // In the order of the DER set the receipt sorts them into anyway: no order is needed here.
        let purchases = Array(listed.values)
        let receipt = AppReceipt(
            receiptType: (registration?.environment ?? .xcode).receiptType, bundleIdentifier: app, appVersion: version,
            opaqueValue: opaque,
            sha1Hash: AppReceipt.hash(deviceIdentifier: try DeviceIdentifier.forApp(app), opaqueValue: opaque, bundleIdentifier: app),
            creationDate: date(engine.clock.now()), originalApplicationVersion: version,
            originalPurchaseDate: date(try firstSeen(uid: uid, app: app, engine: engine)), entries: purchases)
        return receipt
    }
}
