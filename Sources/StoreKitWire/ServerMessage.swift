/// Messages the daemon sends. Type bytes 128–255; see docs/protocol.md.
public enum ServerMessage: Sendable, Equatable {
    /// Reply to hello: the peer's uid as the daemon sees it, the current storefront, and (version
    /// 3) the app's products that come with hosted content.
    case welcome(version: UInt16, uid: UInt32, storefrontCountryCode: String, storefrontID: String,
                 hostedContent: [HostedContentRecord] = [])
    /// The end of a request. `detail` is the `SKError.Code` when `code == .storeKit`;
    /// `value` is request-specific (the new transaction id for addPayment).
    case result(requestID: UInt32, code: ResultCode, detail: Int32, value: UInt64, message: String)
    /// Transactions that are new or changed (`paymentQueue(_:updatedTransactions:)`).
    case updated([TransactionRecord])
    /// Transactions that were finished (`paymentQueue(_:removedTransactions:)`).
    case removed([TransactionRecord])
    case products(requestID: UInt32, products: [ProductRecord], invalidIdentifiers: [String])
    case transactions(requestID: UInt32, transactions: [TransactionRecord])
    /// Reply to a control command: `json` is the command's JSON document.
    case controlResult(requestID: UInt32, code: ResultCode, message: String, json: String)
    case storefrontChanged(countryCode: String, identifier: String)
    case entitlementsRevoked(productIDs: [String])
    /// A promoted purchase offered to the app (`paymentQueue(_:shouldAddStorePayment:for:)`).
    case promotedPurchase(ProductRecord)
    /// Reply to `subscriptionStatus`.
    case subscriptionStatus(requestID: UInt32, statuses: [SubscriptionStatusRecord])
    /// Reply to `appTransaction`: a compact JWS.
    case signed(requestID: UInt32, jws: String)
    /// Reply to `receipt`: the app receipt's bytes (PKCS#7, DER), as Apple's receipt file.
    case receipt(requestID: UInt32, data: [UInt8])
    /// Reply to `content`: the files of the transaction's hosted content.
    case content(requestID: UInt32, manifest: ContentManifest)
    /// Reply to `openContent`: the file's descriptor came with this frame's first byte
    /// (SCM_RIGHTS); `length` is its size as the manifest lists it.
    case contentFile(requestID: UInt32, file: UInt32, length: UInt64)
    /// A price increase of the buyer's subscription to `productID` waits for consent
    /// (`paymentQueueShouldShowPriceConsent(_:)`; version 3): pushed to observers.
    case priceConsent(productID: String)

    enum Tag: UInt8 {
        case welcome = 128, result, updated, removed, products, transactions, controlResult,
             storefrontChanged, entitlementsRevoked, promotedPurchase, subscriptionStatus, signed, receipt,
             content, contentFile, priceConsent
    }

    /// The most transaction bytes the daemon puts in one `updated` or `transactions` frame (a
    /// signed transaction is about 3 KB): well inside `Frame.defaultMaximumBodySize`.
    public static let pageBudget = 256 * 1024

    public static func result(_ requestID: UInt32, _ code: ResultCode, detail: Int32 = 0, value: UInt64 = 0, _ message: String = "") -> ServerMessage {
        .result(requestID: requestID, code: code, detail: detail, value: value, message: message)
    }

    /// The message as a client of protocol `version` reads it (docs/protocol.md §12): version 1
    /// has records without signed data or offers, and no result code after `quotaExceeded` (17):
    /// `storeUnreachable` (18) reaches it as `storageFailure` (8), with its message.
    public func encode(version: UInt16 = ProtocolVersion.current) -> [UInt8] {
        var writer = WireWriter()
        encode(into: &writer, version: version)
        return writer.bytes
    }

    public func encode(into writer: inout WireWriter, version: UInt16 = ProtocolVersion.current) {
        switch self {
        case .welcome(let chosen, let uid, let country, let id, let content):
            writer.u8(Tag.welcome.rawValue); writer.u16(chosen); writer.u32(uid); writer.string(country); writer.string(id)
            if version >= ProtocolVersion.hostedContent {
                writer.u32(UInt32(content.count))
                for record in content { record.encode(into: &writer) }
            }
        case .result(let id, let code, let detail, let value, let message):
            writer.u8(Tag.result.rawValue); writer.u32(id); writer.u16(code.rawValue(version: version)); writer.i32(detail)
            writer.u64(value); writer.string(message)
        case .updated(let transactions):
            writer.u8(Tag.updated.rawValue); Self.encode(transactions, into: &writer, version: version)
        case .removed(let transactions):
            writer.u8(Tag.removed.rawValue); Self.encode(transactions, into: &writer, version: version)
        case .products(let id, let products, let invalid):
            writer.u8(Tag.products.rawValue); writer.u32(id)
            writer.u32(UInt32(products.count))
            for product in products { product.encode(into: &writer, version: version) }
            writer.stringList(invalid)
        case .transactions(let id, let transactions):
            writer.u8(Tag.transactions.rawValue); writer.u32(id); Self.encode(transactions, into: &writer, version: version)
        case .controlResult(let id, let code, let message, let json):
            writer.u8(Tag.controlResult.rawValue); writer.u32(id); writer.u16(code.rawValue(version: version))
            writer.string(message); writer.string(json)
        case .storefrontChanged(let country, let id):
            writer.u8(Tag.storefrontChanged.rawValue); writer.string(country); writer.string(id)
        case .entitlementsRevoked(let productIDs):
            writer.u8(Tag.entitlementsRevoked.rawValue); writer.stringList(productIDs)
        case .promotedPurchase(let product):
            writer.u8(Tag.promotedPurchase.rawValue); product.encode(into: &writer, version: version)
        case .subscriptionStatus(let id, let statuses):
            writer.u8(Tag.subscriptionStatus.rawValue); writer.u32(id); writer.u32(UInt32(statuses.count))
            for status in statuses { status.encode(into: &writer) }
        case .signed(let id, let jws):
            writer.u8(Tag.signed.rawValue); writer.u32(id); writer.string(jws)
        case .receipt(let id, let data):
            writer.u8(Tag.receipt.rawValue); writer.u32(id); writer.blob(data)
        case .content(let id, let manifest):
            writer.u8(Tag.content.rawValue); writer.u32(id); manifest.encode(into: &writer)
        case .contentFile(let id, let file, let length):
            writer.u8(Tag.contentFile.rawValue); writer.u32(id); writer.u32(file); writer.u64(length)
        case .priceConsent(let productID):
            writer.u8(Tag.priceConsent.rawValue); writer.string(productID)
        }
    }

    static func encode(_ transactions: [TransactionRecord], into writer: inout WireWriter, version: UInt16) {
        writer.u32(UInt32(transactions.count))
        for transaction in transactions { transaction.encode(into: &writer, version: version) }
    }

    static func decodeTransactions(_ reader: inout WireReader, version: UInt16) throws(WireError) -> [TransactionRecord] {
        let count = try reader.count(minimumElementSize: TransactionRecord.minimumEncodedSize(version: version))
        var transactions: [TransactionRecord] = []
        transactions.reserveCapacity(count)
        for _ in 0..<count { transactions.append(try TransactionRecord.decode(from: &reader, version: version)) }
        return transactions
    }

    static func decodeCode(_ reader: inout WireReader) throws(WireError) -> ResultCode {
        let raw = try reader.u16()
        guard let code = ResultCode(rawValue: raw) else { throw WireError(.invalidValue("result code \(raw)")) }
        return code
    }

    /// Decodes a message as a client of protocol `version` reads it.
    public static func decode(_ body: [UInt8], version: UInt16 = ProtocolVersion.current) throws(WireError) -> ServerMessage {
        var reader = WireReader(body)
        guard body.count > 0 else { throw WireError(.emptyFrame) }
        let rawTag = try reader.u8()
        guard let tag = Tag(rawValue: rawTag) else { throw WireError(.unknownMessageType(rawTag)) }
        let message: ServerMessage
        switch tag {
        case .welcome:
            let chosen = try reader.u16()
            let uid = try reader.u32()
            let country = try reader.string()
            let storefrontID = try reader.string()
            var content: [HostedContentRecord] = []
            if version >= ProtocolVersion.hostedContent {
                let count = try reader.count(minimumElementSize: HostedContentRecord.minimumEncodedSize)
                for _ in 0..<count { content.append(try HostedContentRecord.decode(from: &reader)) }
            }
            message = .welcome(version: chosen, uid: uid, storefrontCountryCode: country, storefrontID: storefrontID,
                               hostedContent: content)
        case .result:
            message = .result(requestID: try reader.u32(), code: try decodeCode(&reader), detail: try reader.i32(),
                              value: try reader.u64(), message: try reader.string())
        case .updated:
            message = .updated(try decodeTransactions(&reader, version: version))
        case .removed:
            message = .removed(try decodeTransactions(&reader, version: version))
        case .products:
            let id = try reader.u32()
            let count = try reader.count(minimumElementSize: 30)
            var products: [ProductRecord] = []
            for _ in 0..<count { products.append(try ProductRecord.decode(from: &reader, version: version)) }
            message = .products(requestID: id, products: products, invalidIdentifiers: try reader.stringList())
        case .transactions:
            message = .transactions(requestID: try reader.u32(), transactions: try decodeTransactions(&reader, version: version))
        case .controlResult:
            message = .controlResult(requestID: try reader.u32(), code: try decodeCode(&reader),
                                     message: try reader.string(), json: try reader.string())
        case .storefrontChanged:
            message = .storefrontChanged(countryCode: try reader.string(), identifier: try reader.string())
        case .entitlementsRevoked:
            message = .entitlementsRevoked(productIDs: try reader.stringList())
        case .promotedPurchase:
            message = .promotedPurchase(try ProductRecord.decode(from: &reader, version: version))
        case .subscriptionStatus:
            let id = try reader.u32()
            let count = try reader.count(minimumElementSize: SubscriptionStatusRecord.minimumEncodedSize)
            var statuses: [SubscriptionStatusRecord] = []
            statuses.reserveCapacity(count)
            for _ in 0..<count { statuses.append(try SubscriptionStatusRecord.decode(from: &reader)) }
            message = .subscriptionStatus(requestID: id, statuses: statuses)
        case .signed:
            message = .signed(requestID: try reader.u32(), jws: try reader.string())
        case .receipt:
            message = .receipt(requestID: try reader.u32(), data: try reader.blob())
        case .content:
            message = .content(requestID: try reader.u32(), manifest: try ContentManifest.decode(from: &reader))
        case .contentFile:
            message = .contentFile(requestID: try reader.u32(), file: try reader.u32(), length: try reader.u64())
        case .priceConsent:
            message = .priceConsent(productID: try reader.string())
        }
        try reader.expectEnd()
        return message
    }
}
