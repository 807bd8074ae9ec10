/// Messages a client sends. Type bytes 1–127; see docs/protocol.md.
public enum ClientMessage: Sendable, Equatable {
    /// First message on every connection. `app` is empty on the control socket.
    case hello(version: UInt16, app: String)
    /// Registers this connection as an observer: every unfinished transaction is sent, then a result.
    case subscribe(requestID: UInt32)
    case unsubscribe(requestID: UInt32)
    /// `key` is the client's idempotency key: the same key never makes a second transaction.
    case addPayment(AddPayment)
    case finish(requestID: UInt32, transactionID: UInt64)
    case restore(requestID: UInt32, applicationUsername: String?)
    case products(requestID: UInt32, identifiers: [String])
    /// The unfinished transactions of the connection's (uid, app) with ids above `afterID`, oldest
    /// first, as many as fit `ServerMessage.pageBudget`; an empty page means there are no more.
    case unfinished(requestID: UInt32, afterID: UInt64 = 0)
    /// A storekitctl command (control socket only): a name and its arguments.
    case control(requestID: UInt32, command: String, arguments: [String])
    case ping(requestID: UInt32)
    /// Withdraws a deferred payment the app chose not to continue after a storefront change
    /// (`paymentQueue(_:shouldContinue:in:)` answered false, or did not answer in time).
    case cancelPayment(requestID: UInt32, transactionID: UInt64)
    /// Every transaction of the connection's (uid, app), finished ones too, with ids above
    /// `afterID`, oldest first, each with its JWS (StoreKit 2's `Transaction.all`), paged as `unfinished`.
    case history(requestID: UInt32, afterID: UInt64 = 0)
    /// The buyer's subscriptions in a group (`Product.SubscriptionInfo.status(for:)`); an empty
    /// group asks for every group. Replied with `subscriptionStatus`.
    case subscriptionStatus(requestID: UInt32, groupID: String)
    /// The signed `AppTransaction` of the connection's (uid, app); replied with `signed`.
    case appTransaction(requestID: UInt32)
    /// The app receipt of the connection's (uid, app), made now (`SKReceiptRefreshRequest`);
    /// replied with `receipt`.
    case receipt(requestID: UInt32)
    /// The hosted content of a purchased or restored transaction of the connection's (uid, app)
    /// (version 3); replied with `content`.
    case content(requestID: UInt32, transactionID: UInt64)
    /// File `file` of that content, opened read-only by the daemon and passed with the reply
    /// `contentFile` (SCM_RIGHTS; version 3).
    case openContent(requestID: UInt32, transactionID: UInt64, file: UInt32)

    public struct AddPayment: Sendable, Equatable {
        public var requestID: UInt32
        public var key: String
        public var productID: String
        public var quantity: Int32
        public var applicationUsername: String?
        public var hasRequestData: Bool
        public var simulatesAskToBuy: Bool
        /// A signed promotional offer (`SKPaymentDiscount`, StoreKit 2's `.promotionalOffer`;
        /// version 3).
        public var discount: Discount?
        /// A promotional offer signed as a compact JWS (StoreKit 2's
        /// `.promotionalOffer(_:compactJWS:)`; version 4).
        public var offerJWS: String?
        /// The app server's word on the introductory offer, a compact JWS (StoreKit 2's
        /// `.introductoryOfferEligibility(compactJWS:)`; version 4).
        public var eligibilityJWS: String?
        /// A win-back offer of the product (StoreKit 2's `.winBackOffer(_:)`; version 4).
        public var winBackOfferID: String?
        /// The billing plan to buy (StoreKit 2's `.billingPlanType(_:)`; version 5); nil: up front.
        public var billingPlanType: ProductRecord.BillingPlan.PlanType?
        /// The developer's signed Advanced Commerce request, a compact JWS
        /// (`AdvancedCommerceProduct.purchase(compactJWS:)`; version 5).
        public var advancedCommerceJWS: String?

        public init(
            requestID: UInt32, key: String, productID: String, quantity: Int32,
            applicationUsername: String? = nil, hasRequestData: Bool = false, simulatesAskToBuy: Bool = false,
            discount: Discount? = nil, offerJWS: String? = nil, eligibilityJWS: String? = nil, winBackOfferID: String? = nil,
            billingPlanType: ProductRecord.BillingPlan.PlanType? = nil, advancedCommerceJWS: String? = nil
        ) {
            self.requestID = requestID
            self.key = key
            self.productID = productID
            self.quantity = quantity
            self.applicationUsername = applicationUsername
            self.hasRequestData = hasRequestData
            self.simulatesAskToBuy = simulatesAskToBuy
            self.discount = discount
            self.offerJWS = offerJWS
            self.eligibilityJWS = eligibilityJWS
            self.winBackOfferID = winBackOfferID
            self.billingPlanType = billingPlanType
            self.advancedCommerceJWS = advancedCommerceJWS
        }
    }

    /// A promotional offer with the developer's signature, as `SKPaymentDiscount` holds it.
    public struct Discount: Sendable, Equatable {
        /// The offer's identifier in the catalogue (`adHocOffers[].offerID`).
        public var offerID: String
        /// The identifier of the key that signed it (an `[OfferKey]` of the app's registration).
        public var keyID: String
        /// The UUID the signature was made with, as text.
        public var nonce: String
        /// The signature: base64 of the DER ECDSA signature.
        public var signature: String
        /// When the signature was made, milliseconds since 1970.
        public var timestamp: Int64

        public init(offerID: String, keyID: String, nonce: String, signature: String, timestamp: Int64) {
            self.offerID = offerID
            self.keyID = keyID
            self.nonce = nonce
            self.signature = signature
            self.timestamp = timestamp
        }
    }

    enum Tag: UInt8 {
        case hello = 1, subscribe, unsubscribe, addPayment, finish, restore, products, unfinished, control, ping, cancelPayment,
             history, subscriptionStatus, appTransaction, receipt, content, openContent
    }

    /// The oldest protocol version that carries all of this message: what a client talking to a
    /// daemon of an older version must not send, since the older encoding would drop part of it.
    public var requiredVersion: UInt16 {
        switch self {
        case .addPayment(let payment):
            if payment.advancedCommerceJWS != nil { return ProtocolVersion.advancedCommerce }
            // Up front is what an older daemon bills anyway.
            if payment.billingPlanType == .monthly { return ProtocolVersion.billingPlans }
            if payment.offerJWS != nil || payment.eligibilityJWS != nil || payment.winBackOfferID != nil { return ProtocolVersion.offerJWS }
            return payment.discount != nil ? ProtocolVersion.hostedContent : 1
        case .content, .openContent: return ProtocolVersion.hostedContent
        case .history, .subscriptionStatus, .appTransaction, .receipt: return ProtocolVersion.signedData
        default: return 1
        }
    }

    public var requestID: UInt32? {
        switch self {
        case .hello: nil
        case .subscribe(let id), .unsubscribe(let id), .finish(let id, _), .restore(let id, _),
             .products(let id, _), .unfinished(let id, _), .control(let id, _, _), .ping(let id), .cancelPayment(let id, _),
             .history(let id, _), .subscriptionStatus(let id, _), .appTransaction(let id), .receipt(let id),
             .content(let id, _), .openContent(let id, _, _):
            id
        case .addPayment(let payment): payment.requestID
        }
    }

    /// The frame body: type byte + fields.
    /// The message as a client of protocol `version` sends it (docs/protocol.md §12): version 1
    /// has no `after_id` in `unfinished` and no messages after `cancelPayment`.
    public func encode(version: UInt16 = ProtocolVersion.current) -> [UInt8] {
        var writer = WireWriter()
        switch self {
        case .hello(let version, let app):
            writer.u8(Tag.hello.rawValue); writer.u16(version); writer.string(app)
        case .subscribe(let id):
            writer.u8(Tag.subscribe.rawValue); writer.u32(id)
        case .unsubscribe(let id):
            writer.u8(Tag.unsubscribe.rawValue); writer.u32(id)
        case .addPayment(let payment):
            writer.u8(Tag.addPayment.rawValue)
            writer.u32(payment.requestID)
            writer.string(payment.key)
            writer.string(payment.productID)
            writer.i32(payment.quantity)
            writer.optionalString(payment.applicationUsername)
            writer.bool(payment.hasRequestData)
            writer.bool(payment.simulatesAskToBuy)
            if version >= ProtocolVersion.hostedContent {
                if let discount = payment.discount {
                    writer.u8(1)
                    writer.string(discount.offerID)
                    writer.string(discount.keyID)
                    writer.string(discount.nonce)
                    writer.string(discount.signature)
                    writer.i64(discount.timestamp)
                } else {
                    writer.u8(0)
                }
            }
            if version >= ProtocolVersion.offerJWS {
                writer.optionalString(payment.offerJWS)
                writer.optionalString(payment.eligibilityJWS)
                writer.optionalString(payment.winBackOfferID)
            }
            if version >= ProtocolVersion.billingPlans {
                if let type = payment.billingPlanType {
                    writer.u8(1)
                    writer.u8(type.rawValue)
                } else {
                    writer.u8(0)
                }
            }
            if version >= ProtocolVersion.advancedCommerce { writer.optionalString(payment.advancedCommerceJWS) }
        case .finish(let id, let transactionID):
            writer.u8(Tag.finish.rawValue); writer.u32(id); writer.u64(transactionID)
        case .restore(let id, let username):
            writer.u8(Tag.restore.rawValue); writer.u32(id); writer.optionalString(username)
        case .products(let id, let identifiers):
            writer.u8(Tag.products.rawValue); writer.u32(id); writer.stringList(identifiers)
        case .unfinished(let id, let afterID):
            writer.u8(Tag.unfinished.rawValue); writer.u32(id)
            if version >= 2 { writer.u64(afterID) }
        case .control(let id, let command, let arguments):
            writer.u8(Tag.control.rawValue); writer.u32(id); writer.string(command); writer.stringList(arguments)
        case .ping(let id):
            writer.u8(Tag.ping.rawValue); writer.u32(id)
        case .cancelPayment(let id, let transactionID):
            writer.u8(Tag.cancelPayment.rawValue); writer.u32(id); writer.u64(transactionID)
        case .history(let id, let afterID):
            writer.u8(Tag.history.rawValue); writer.u32(id); writer.u64(afterID)
        case .subscriptionStatus(let id, let groupID):
            writer.u8(Tag.subscriptionStatus.rawValue); writer.u32(id); writer.string(groupID)
        case .appTransaction(let id):
            writer.u8(Tag.appTransaction.rawValue); writer.u32(id)
        case .receipt(let id):
            writer.u8(Tag.receipt.rawValue); writer.u32(id)
        case .content(let id, let transactionID):
            writer.u8(Tag.content.rawValue); writer.u32(id); writer.u64(transactionID)
        case .openContent(let id, let transactionID, let file):
            writer.u8(Tag.openContent.rawValue); writer.u32(id); writer.u64(transactionID); writer.u32(file)
        }
        return writer.bytes
    }

    /// Decodes a message of a client speaking protocol `version` (the daemon decodes with the
    /// version its hello chose; `hello` itself is the same in every version). Every string in it
    /// is refused when it holds a NUL byte.
    public static func decode(_ body: [UInt8], version: UInt16 = ProtocolVersion.current) throws(WireError) -> ClientMessage {
        var reader = WireReader(body, refusingNUL: true)
        guard body.count > 0 else { throw WireError(.emptyFrame) }
        let rawTag = try reader.u8()
        guard let tag = Tag(rawValue: rawTag), tag.rawValue <= ProtocolVersion.lastClientMessage(version: version) else {
            throw WireError(.unknownMessageType(rawTag))
        }
        let message: ClientMessage
        switch tag {
        case .hello:
            message = .hello(version: try reader.u16(), app: try reader.string())
        case .subscribe:
            message = .subscribe(requestID: try reader.u32())
        case .unsubscribe:
            message = .unsubscribe(requestID: try reader.u32())
        case .addPayment:
            var payment = AddPayment(
                requestID: try reader.u32(), key: try reader.string(), productID: try reader.string(),
                quantity: try reader.i32(), applicationUsername: try reader.optionalString(),
                hasRequestData: try reader.bool(), simulatesAskToBuy: try reader.bool())
            if version >= ProtocolVersion.hostedContent {
                switch try reader.u8() {
                case 0: break
                case 1:
                    payment.discount = Discount(offerID: try reader.string(), keyID: try reader.string(), nonce: try reader.string(),
                                                signature: try reader.string(), timestamp: try reader.i64())
                case let other: throw WireError(.invalidValue("optional marker \(other)"))
                }
            }
            if version >= ProtocolVersion.offerJWS {
                payment.offerJWS = try reader.optionalString()
                payment.eligibilityJWS = try reader.optionalString()
                payment.winBackOfferID = try reader.optionalString()
            }
            if version >= ProtocolVersion.billingPlans {
                switch try reader.u8() {
                case 0: break
                case 1:
                    let raw = try reader.u8()
                    guard let type = ProductRecord.BillingPlan.PlanType(rawValue: raw) else {
                        throw WireError(.invalidValue("billing plan type \(raw)"))
                    }
                    payment.billingPlanType = type
                case let other: throw WireError(.invalidValue("optional marker \(other)"))
                }
            }
            if version >= ProtocolVersion.advancedCommerce { payment.advancedCommerceJWS = try reader.optionalString() }
            message = .addPayment(payment)
        case .finish:
            message = .finish(requestID: try reader.u32(), transactionID: try reader.u64())
        case .restore:
            message = .restore(requestID: try reader.u32(), applicationUsername: try reader.optionalString())
        case .products:
            message = .products(requestID: try reader.u32(), identifiers: try reader.stringList())
        case .unfinished:
            message = .unfinished(requestID: try reader.u32(), afterID: version >= 2 ? try reader.u64() : 0)
        case .control:
            message = .control(requestID: try reader.u32(), command: try reader.string(), arguments: try reader.stringList())
        case .ping:
            message = .ping(requestID: try reader.u32())
        case .cancelPayment:
            message = .cancelPayment(requestID: try reader.u32(), transactionID: try reader.u64())
        case .history:
            message = .history(requestID: try reader.u32(), afterID: try reader.u64())
        case .subscriptionStatus:
            message = .subscriptionStatus(requestID: try reader.u32(), groupID: try reader.string())
        case .appTransaction:
            message = .appTransaction(requestID: try reader.u32())
        case .receipt:
            message = .receipt(requestID: try reader.u32())
        case .content:
            message = .content(requestID: try reader.u32(), transactionID: try reader.u64())
        case .openContent:
            message = .openContent(requestID: try reader.u32(), transactionID: try reader.u64(), file: try reader.u32())
        }
        try reader.expectEnd()
        return message
    }
}

/// The protocol versions: the hello carries the client's, and the daemon answers in it.
///
/// Version 1 is what the first OpenStoreKit spoke: no signed data (no `jws_representation` in a
/// `TransactionRecord`, no offers in a `ProductRecord`, no `history`, `subscriptionStatus`,
/// `appTransaction` or `receipt`), `unfinished` answered in one frame. Version 2 added signed
/// data. Version 3 added hosted content (`content`, `openContent`, the welcome's list of
/// downloadable products) and signed promotional offers (`addPayment`'s `discount`). Version 4
/// added: offers and introductory-offer eligibility signed as JWS and win-back offers
/// (`addPayment`'s `offer_jws`, `eligibility_jws`, `win_back_offer_id`), and the subscription
/// group's display name and win-back offers in a `ProductRecord`. Version 5 is today's: billing
/// plans (a `ProductRecord`'s `billing_plans`, `addPayment`'s `billing_plan_type`) and the
/// developer's signed Advanced Commerce request (`addPayment`'s `advanced_commerce_jws`, after the
/// plan); every other message is encoded as in version 4.
/// The daemon serves every version in `served` (docs/protocol.md §13 has the policy).
public enum ProtocolVersion {
    /// The version this build's clients speak.
    public static let current: UInt16 = 5
    /// The versions the daemon serves, oldest first.
    public static let served: ClosedRange<UInt16> = 1...5
    /// The first version with signed data (JWS in records, offers, `history`, `receipt`, …).
    public static let signedData: UInt16 = 2
    /// The first version with hosted content.
    public static let hostedContent: UInt16 = 3
    /// The first version with JWS-signed offers and eligibility, and group display names.
    public static let offerJWS: UInt16 = 4
    /// The first version with billing plans (a `ProductRecord`'s, `addPayment`'s `billing_plan_type`).
    public static let billingPlans: UInt16 = 5
    /// The first version with Advanced Commerce requests (the same version as billing plans).
    public static let advancedCommerce: UInt16 = 5

    /// The last client message type a connection of `version` may send.
    static func lastClientMessage(version: UInt16) -> UInt8 {
        switch version {
        case ...1: ClientMessage.Tag.cancelPayment.rawValue
        case 2: ClientMessage.Tag.receipt.rawValue
        default: ClientMessage.Tag.openContent.rawValue
        }
    }
}
