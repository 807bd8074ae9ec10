import FoundationEssentials
import StoreKitEngine
import StoreKitSigning
import StoreKitWire

extension AppRegistration {
    /// Why the signature of a payment's promotional offer is refused, as StoreKit says it
    /// (`SKError`): a field missing or not in its form (`missingOfferParams`), a key the app did not
    /// register, a signature that does not verify, or one older than 24 hours or from the future
    /// (`invalidSignature`); nil when it verifies. The signed text is Apple's
    /// (`PromotionalOfferSignature.payload`), the app's ID standing for its bundle identifier.
    /// Whether the offer exists and the buyer may have it is the engine's to say.
    func offerSignatureRefusal(_ discount: ClientMessage.Discount, productID: String, applicationUsername: String?,
                               nowMilliseconds: Int64) -> Outcome? {
        guard !discount.offerID.isEmpty, !discount.keyID.isEmpty, !discount.nonce.isEmpty, !discount.signature.isEmpty,
              discount.timestamp > 0 else {
            return .storeKit(.missingOfferParams, "the promotional offer lacks its identifier, key identifier, nonce, signature or timestamp")
        }
        guard UUID(uuidString: discount.nonce) != nil else {
            return .storeKit(.missingOfferParams, "the offer's nonce \(discount.nonce) is not a UUID")
        }
        guard let signature = Data(base64Encoded: discount.signature) else {
            return .storeKit(.missingOfferParams, "the offer's signature is not base64")
        }
        guard let key = offerKeys[discount.keyID] else {
            return .storeKit(.invalidSignature, "key \(discount.keyID) signs no promotional offers of \(id) (no [OfferKey] with that ID)")
        }
        let payload = PromotionalOfferSignature.payload(
            appBundleID: id, keyID: discount.keyID, productID: productID, offerID: discount.offerID,
            appAccountToken: applicationUsername, nonce: discount.nonce, timestamp: discount.timestamp)
        guard key.key.verifies(der: Array(signature), over: payload) else {
            return .storeKit(.invalidSignature, "the signature of offer \(discount.offerID) does not verify with key \(discount.keyID)")
        }
        let age = nowMilliseconds - discount.timestamp
        guard age <= PromotionalOfferSignature.lifetimeMilliseconds else {
            return .storeKit(.invalidSignature, "the signature of offer \(discount.offerID) was made \(age / 3_600_000) hours ago; "
                             + "it is good for 24 hours")
        }
        guard age >= -Self.clockSkewMilliseconds else {
            return .storeKit(.invalidSignature, "the signature of offer \(discount.offerID) is dated \(-age / 1000) s in the future")
        }
        return nil
    }

    /// How far in the future a signature's timestamp may be (the signing server's clock ahead).
    static let clockSkewMilliseconds: Int64 = 5 * 60_000
}

/// Why a payment's signed request is refused, as StoreKit says it.
struct SignedRequestRefusal: Error {
    var outcome: Outcome
    init(_ code: StoreKitErrorCode, _ message: String) { outcome = .storeKit(code, message) }
}

/// What a payment's signed requests (version 4's JWS forms) let the engine do, once verified.
struct SignedPaymentTerms {
    /// The promotional offer a `.promotionalOffer(_:compactJWS:)` names.
    var promotionalOfferID: String?
    /// The app server's word on the introductory offer (`.introductoryOfferEligibility(compactJWS:)`).
    var introductoryOfferAllowed: Bool?
    /// The developer's Advanced Commerce request (`AdvancedCommerceProduct.purchase(compactJWS:)`).
    var advancedCommerce: AdvancedCommerceRequest?
}

extension AppRegistration {
    /// The audiences Apple's signed requests name (`aud`).
    static let promotionalOfferAudience = "promotional-offer"
    static let eligibilityAudience = "introductory-offer-eligibility"

    /// Checks a payment's JWS-signed offer and eligibility as the App Store does: ES256 by an
    /// `[OfferKey]` of this app named by `kid`, for this app (`bid`), product (`productId`) and
    /// audience (`aud`), made in the last 24 hours (`iat`, seconds; 5 minutes ahead at most), with a
    /// `nonce`, and, where it names one (`transactionId`, required for eligibility), a transaction
    /// of this buyer: one of its transactions of the app, or its `appTransactionId`
    /// (`ownsTransaction`). The terms, or the refusal (`invalidSignature`; `missingOfferParams`
    /// for a JWS that cannot be read). The Advanced Commerce request is checked first, likewise
    /// (`advancedCommerceRequest`).
    func signedTerms(of payment: ClientMessage.AddPayment, nowMilliseconds: Int64,
                     ownsTransaction: (String) -> Bool) -> Result<SignedPaymentTerms, SignedRequestRefusal> {
        var terms = SignedPaymentTerms()
        if payment.offerJWS != nil, payment.discount != nil {
            return .failure(SignedRequestRefusal(.missingOfferParams,
                "the payment carries two promotional offers (a discount and a signed offer): it may carry one"))
        }
        if let jws = payment.advancedCommerceJWS {
            switch advancedCommerceRequest(jws, nowMilliseconds: nowMilliseconds, ownsTransaction: ownsTransaction) {
            case .failure(let refusal): return .failure(refusal)
            case .success(let request): terms.advancedCommerce = request
            }
        }
        if let jws = payment.offerJWS {
            switch verifiedClaims(jws, audience: Self.promotionalOfferAudience, productID: payment.productID,
                                  transactionRequired: false, nowMilliseconds: nowMilliseconds, ownsTransaction: ownsTransaction) {
            case .failure(let refusal): return .failure(refusal)
            case .success(let claims):
                guard case .string(let offerID)? = claims["offerIdentifier"], !offerID.isEmpty else {
                    return .failure(SignedRequestRefusal(.missingOfferParams, "the signed offer names no offerIdentifier"))
                }
                terms.promotionalOfferID = offerID
            }
        }
        if let jws = payment.eligibilityJWS {
            switch verifiedClaims(jws, audience: Self.eligibilityAudience, productID: payment.productID,
                                  transactionRequired: true, nowMilliseconds: nowMilliseconds, ownsTransaction: ownsTransaction) {
            case .failure(let refusal): return .failure(refusal)
            case .success(let claims):
                guard case .bool(let allowed)? = claims["allowIntroductoryOffer"] else {
                    return .failure(SignedRequestRefusal(.missingOfferParams, "the signed eligibility has no allowIntroductoryOffer"))
                }
                terms.introductoryOfferAllowed = allowed
            }
        }
        return .success(terms)
    }

    /// Checks a payment's signed Advanced Commerce request as the App Store does: the JWS as the
    /// others (audience `advanced-commerce-api`, no product named: the request says what is
    /// bought), its `request` claim base64 of the request's JSON, read by `AdvancedCommerceRequest`.
    /// A JWS or request that cannot be read is `paymentInvalid`; a signature refused, as the others.
    private func advancedCommerceRequest(_ compact: String, nowMilliseconds: Int64,
                                         ownsTransaction: (String) -> Bool) -> Result<AdvancedCommerceRequest, SignedRequestRefusal> {
        switch verifiedClaims(compact, audience: AdvancedCommerceRequest.audience, productID: nil, transactionRequired: false,
                              nowMilliseconds: nowMilliseconds, ownsTransaction: ownsTransaction, malformed: .paymentInvalid) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let claims):
            guard case .string(let encoded)? = claims["request"], let bytes = Data(base64Encoded: encoded) else {
                return .failure(SignedRequestRefusal(.paymentInvalid, "the signed Advanced Commerce request has no request claim in base64"))
            }
            switch AdvancedCommerceRequest.parse(Array(bytes)) {
            case .success(let request): return .success(request)
            case .failure(let invalid):
                return .failure(SignedRequestRefusal(.paymentInvalid, "the Advanced Commerce request is refused: \(invalid.message)"))
            }
        }
    }

    private func verifiedClaims(_ compact: String, audience: String, productID: String?, transactionRequired: Bool,
                                nowMilliseconds: Int64, ownsTransaction: (String) -> Bool,
                                malformed: StoreKitErrorCode = .missingOfferParams) -> Result<[String: JSONValue], SignedRequestRefusal> {
        let what = switch audience {
        case Self.eligibilityAudience: "signed eligibility"
        case AdvancedCommerceRequest.audience: "signed Advanced Commerce request"
        default: "signed offer"
        }
        guard let jws = DeveloperJWS(compact: compact, headerFields: { header in
            guard case .object(let members)? = try? JSONValue.parse(header) else { return nil }
            let fields = Dictionary(members, uniquingKeysWith: { first, _ in first })
            guard case .string(let alg)? = fields["alg"] else { return nil }
            if case .string(let kid)? = fields["kid"] { return (alg, kid) }
            return (alg, nil)
        }) else {
            return .failure(SignedRequestRefusal(malformed, "the \(what) is not a compact JWS signed ES256 with a kid"))
        }
        guard let key = offerKeys[jws.keyID] else {
            return .failure(SignedRequestRefusal(.invalidSignature, "key \(jws.keyID) signs no requests of \(id) (no [OfferKey] with that ID)"))
        }
        guard jws.isSigned(by: key.key) else {
            return .failure(SignedRequestRefusal(.invalidSignature, "the \(what) does not verify with key \(jws.keyID)"))
        }
        guard case .object(let members)? = try? JSONValue.parse(jws.payload) else {
            return .failure(SignedRequestRefusal(malformed, "the \(what)'s claims are not a JSON object"))
        }
        let claims = Dictionary(members, uniquingKeysWith: { first, _ in first })
        func text(_ name: String) -> String? { if case .string(let value)? = claims[name] { value } else { nil } }
        guard text("aud") == audience else {
            return .failure(SignedRequestRefusal(.invalidSignature, "the \(what) is for \(text("aud") ?? "no audience"), not \(audience)"))
        }
        guard text("bid") == id else {
            return .failure(SignedRequestRefusal(.invalidSignature, "the \(what) is for app \(text("bid") ?? "(none)"), not \(id)"))
        }
        if let productID, text("productId") != productID {
            return .failure(SignedRequestRefusal(.invalidSignature, "the \(what) is for product \(text("productId") ?? "(none)"), not \(productID)"))
        }
        guard let nonce = text("nonce"), !nonce.isEmpty else {
            return .failure(SignedRequestRefusal(malformed, "the \(what) has no nonce"))
        }
        // Seconds since 1970, within what milliseconds can hold (a larger one cannot be a date).
        let bound = Int64.max / 1000
        let issued: Int64? = switch claims["iat"] {
        case .int(let seconds)?: seconds
        case .number(let text)?: Int64(text) ?? Double(text).flatMap { $0.isFinite && abs($0) < Double(bound) ? Int64($0) : nil }
        default: nil
        }
        guard let issued, issued >= 0, issued < bound else {
            return .failure(SignedRequestRefusal(malformed, "the \(what) has no iat in seconds since 1970"))
        }
        let age = nowMilliseconds - issued * 1000
        guard age <= PromotionalOfferSignature.lifetimeMilliseconds else {
            return .failure(SignedRequestRefusal(.invalidSignature, "the \(what) was made \(age / 3_600_000) hours ago; it is good for 24 hours"))
        }
        guard age >= -Self.clockSkewMilliseconds else {
            return .failure(SignedRequestRefusal(.invalidSignature, "the \(what) is dated \(-age / 1000) s in the future"))
        }
        if let transaction = text("transactionId") {
            guard ownsTransaction(transaction) else {
                return .failure(SignedRequestRefusal(.invalidSignature, "the \(what) names transaction \(transaction), which is not this buyer's"))
            }
        } else if transactionRequired {
            return .failure(SignedRequestRefusal(malformed, "the \(what) names no transactionId"))
        }
        return .success(claims)
    }
}
