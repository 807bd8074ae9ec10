import StoreKitSigning
import FoundationEssentials
import StoreKitWire

/// `storekitctl certificate [--der]`: the root certificate apps and servers verify against.
struct CertificateCommand: Subcommand {
    static let name = "certificate"
    static let summary = "print the root certificate signatures verify against [--der]"
    static let usage = """
        Usage: storekitctl certificate [--der] [-o json]

        Prints the root certificate of storekitd's signing chain: PEM by default, DER (binary) with
        --der. Apps and servers verify receipts and signed transactions against it, offline; the
        daemon also publishes it as root-certificate.pem in its state directory (docs/receipts.md).
        """
    let der: Bool
    init(_ arguments: inout ArgumentList) throws(UsageError) { der = arguments.flag("--der") }
    var request: (command: ControlCommand, arguments: [String]) { (.certificate, []) }
    func renderTable(_ json: JSONValue) -> String {
        json["pem"]?.string ?? ""
    }
    func renderBytes(_ json: JSONValue) -> [UInt8]? {
        guard der, let base64 = json["der"]?.string, let data = Data(base64Encoded: base64) else { return nil }
        return [UInt8](data)
    }
}

/// `storekitctl rotate-key [--revoke | --chain]`: a new signing certificate and key; with
/// --revoke, the old one revoked; with --chain, a new root too.
struct RotateKeyCommand: Subcommand {
    static let name = "rotate-key"
    static let summary = "replace the signing key and certificate [--revoke: revoke the old one; --chain: the root and intermediate too]"
    static let usage = """
        Usage: storekitctl rotate-key [--revoke | --chain] [-o json]

        Makes a new signing key and certificate under the same root and intermediate and signs with
        them from now on. Everything signed before stays verifiable: each JWS carries its chain,
        and verifiers check it at the time it was signed.

        With --revoke, the old signing certificate is also revoked: the intermediate's list of
        revoked certificates (revoked-certificates.pem, beside the published root certificate)
        names it, and nothing it signed verifies any more, whatever its date (StoreKit 2's
        VerificationError.revokedCertificate; SKAppReceipt refuses its receipts). Apps and servers
        keep their root. Use it when the signing key alone may have been copied.

        With --chain, makes a whole new chain instead (root, intermediate and signing certificate,
        each with a new key), publishes the new root where the old one was, and prints it. Use it
        when a key may have been read by someone else (the journal says so when storekitd finds
        its key files readable by other users): what the old chain signed no longer verifies under
        the new root, and every app and server must be given the new root (docs/receipts.md).
        """
    let chain: Bool
    let revoke: Bool
    init(_ arguments: inout ArgumentList) throws(UsageError) {
        chain = arguments.flag("--chain")
        revoke = arguments.flag("--revoke")
        if chain && revoke {
            throw UsageError("--revoke and --chain do not go together: a new chain already leaves nothing the old one signed verifiable")
        }
    }
    var request: (command: ControlCommand, arguments: [String]) {
        (.rotateKey, chain ? ["chain=1"] : revoke ? ["revoke=1"] : [])
    }
    func renderTable(_ json: JSONValue) -> String {
        var text = "New signing certificate, valid until \(json["expires"]?.string ?? "?")\n"
        if let serial = json["revoked"]?.string {
            text += "Revoked the previous signing certificate, serial \(serial): nothing it signed verifies any more\n"
        }
        guard chain, let root = json["root"]?.string else { return text }
        return text + "New root certificate (give it to every app and server that verifies purchases):\n" + root
    }
}

/// `storekitctl receipt APP --uid N`: a queue's app receipt, as a server receives it.
struct ReceiptCommand: Subcommand {
    static let name = "receipt"
    static let summary = "print APP's receipt for a user, base64 [--uid N]"
    static let usage = """
        Usage: storekitctl receipt APP [--uid N] [-o json]

        Makes and prints the app receipt of APP for uid N (default 0): the PKCS#7 file that
        SKReceiptRefreshRequest writes for the app, base64-encoded as an app sends it to its server.
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        let uid = try list.number("--uid")
        arguments = ["app=\(try list.positional("APP"))"]
        if let uid { arguments.append("uid=\(uid)") }
    }
    var request: (command: ControlCommand, arguments: [String]) { (.receipt, arguments) }
    func renderTable(_ json: JSONValue) -> String { (json["receipt"]?.string ?? "") + "\n" }
}

/// `storekitctl sign-offer`: a promotional offer's signature, made here as the developer's server
/// makes it (no daemon involved), for tests and for trying offers out.
struct SignOfferCommand: Subcommand {
    static let name = "sign-offer"
    static let summary = "sign a promotional offer with an offer key (for tests)"
    static let usage = """
        Usage: storekitctl sign-offer --key FILE --key-id ID [--username NAME] APP PRODUCT OFFER [-o json]
               storekitctl sign-offer --jws --key FILE --key-id ID [--transaction ID] APP PRODUCT OFFER [-o json]

        Signs promotional offer OFFER of PRODUCT for APP as the app's server would, with the private
        key in FILE (PEM, App Store Connect's .p8) whose identifier is ID (an [OfferKey] of APP's
        registration holds its public key): a new nonce, the time now, and the signature (ECDSA
        P-256, SHA-256, base64 of DER) over Apple's fields joined by U+2063. --username is the
        payment's applicationUsername (StoreKit 2's appAccountToken), when the payment will carry one.
        Prints what SKPaymentDiscount and Product.PurchaseOption.promotionalOffer take.

        With --jws, prints the offer signed as a compact JWS instead (Apple's version 2, what
        Product.PurchaseOption.promotionalOffer(_:compactJWS:) takes): ES256, kid ID; claims
        productId, offerIdentifier, bid, aud "promotional-offer", iat, nonce, iss "storekitctl", and
        transactionId when --transaction names one of the buyer's transactions (or its
        appTransactionID).
        """
    let keyFile: String
    let keyID: String
    let username: String?
    let jws: Bool
    let transaction: String?
    let app: String
    let product: String
    let offer: String

    init(_ arguments: inout ArgumentList) throws(UsageError) {
        guard let keyFile = try arguments.option("--key") else { throw UsageError("sign-offer needs --key FILE") }
        guard let keyID = try arguments.option("--key-id") else { throw UsageError("sign-offer needs --key-id ID") }
        self.keyFile = keyFile
        self.keyID = keyID
        username = try arguments.option("--username")
        jws = arguments.flag("--jws")
        transaction = try arguments.option("--transaction")
        if jws, username != nil { throw UsageError("sign-offer --jws takes no --username (the JWS names none)") }
        if !jws, transaction != nil { throw UsageError("sign-offer takes --transaction with --jws only") }
        app = try arguments.positional("APP")
        product = try arguments.positional("PRODUCT")
        offer = try arguments.positional("OFFER")
    }

    /// Not sent: the command answers locally.
    var request: (command: ControlCommand, arguments: [String]) { (.status, []) }

    func answerLocally() throws(LocalFailure) -> JSONValue? {
        let key = try readSigningKey(keyFile)
        if jws {
            var claims: [(String, JSONValue)] = [("productId", .string(product)), ("offerIdentifier", .string(offer))]
            if let transaction { claims.append(("transactionId", .string(transaction))) }
            return .object([("compactJWS", .string(try signRequest(claims, audience: "promotional-offer", app: app,
                                                                   keyID: keyID, key: key)))])
        }
        let nonce = UUID().uuidString.lowercased()
        let timestamp = Int64(Date().timeIntervalSince1970 * 1000)
        let payload = PromotionalOfferSignature.payload(appBundleID: app, keyID: keyID, productID: product, offerID: offer,
                                                        appAccountToken: username, nonce: nonce, timestamp: timestamp)
        let signature: [UInt8]
        do {
            signature = try key.signatureDER(over: payload)
        } catch {
            throw LocalFailure(message: "cannot sign: \(error)")
        }
        return .object([
            ("offerIdentifier", .string(offer)), ("keyIdentifier", .string(keyID)), ("nonce", .string(nonce)),
            ("timestamp", .int(timestamp)), ("signature", .string(Data(signature).base64EncodedString())),
        ])
    }

    func renderTable(_ json: JSONValue) -> String {
        if let compact = json["compactJWS"]?.string { return compact + "\n" }
        return renderKeyValues(json)
    }
}

/// The private key in `file` (PEM, App Store Connect's .p8).
func readSigningKey(_ file: String) throws(LocalFailure) -> SigningKey {
    guard let pem = FileManager.default.contents(atPath: file) else { throw LocalFailure(message: "cannot read \(file)") }
    do {
        return try SigningKey(pem: Array(pem))
    } catch {
        throw LocalFailure(message: "\(file): \(error)")
    }
}

/// A request signed as Apple's App Store Server Library signs them (`JWSSignatureCreator`):
/// `claims` with `bid`, `iss`, `aud`, `iat` (seconds) and a new `nonce`, ES256, `kid` in the header.
func signRequest(_ claims: [(String, JSONValue)], audience: String, app: String, keyID: String,
                 key: SigningKey) throws(LocalFailure) -> String {
    let all = claims + [("bid", .string(app)), ("iss", .string("storekitctl")), ("aud", .string(audience)),
                        ("iat", .int(Int64(Date().timeIntervalSince1970))), ("nonce", .string(UUID().uuidString.lowercased()))]
    let header: JSONValue = .object([("alg", .string("ES256")), ("kid", .string(keyID)), ("typ", .string("JWT"))])
    do {
        return try DeveloperJWS.sign(claims: JSONValue.object(all).serializedBytes(), keyID: keyID, with: key,
                                     header: header.serializedBytes())
    } catch {
        throw LocalFailure(message: "cannot sign: \(error)")
    }
}

/// `storekitctl sign-eligibility`: the app's server's decision on an introductory offer, signed
/// as the server signs it (no daemon involved), for tests.
struct SignEligibilityCommand: Subcommand {
    static let name = "sign-eligibility"
    static let summary = "sign an introductory-offer eligibility with an offer key (for tests)"
    static let usage = """
        Usage: storekitctl sign-eligibility --key FILE --key-id ID --transaction ID APP PRODUCT yes|no [-o json]

        Signs, as the app's server would, whether the buyer may have PRODUCT's introductory offer:
        a compact JWS (ES256, kid ID, with the private key in FILE, PEM) with the claims productId,
        allowIntroductoryOffer (yes: true, no: false), transactionId (one of the buyer's
        transactions, or its appTransactionID), bid APP, aud "introductory-offer-eligibility", iat,
        nonce and iss "storekitctl": what Product.PurchaseOption.introductoryOfferEligibility(compactJWS:)
        takes. The daemon checks it with the [OfferKey] ID of APP's registration.
        """
    let keyFile: String
    let keyID: String
    let transaction: String
    let app: String
    let product: String
    let allowed: Bool

    init(_ arguments: inout ArgumentList) throws(UsageError) {
        guard let keyFile = try arguments.option("--key") else { throw UsageError("sign-eligibility needs --key FILE") }
        guard let keyID = try arguments.option("--key-id") else { throw UsageError("sign-eligibility needs --key-id ID") }
        guard let transaction = try arguments.option("--transaction") else {
            throw UsageError("sign-eligibility needs --transaction ID (one of the buyer's, or its appTransactionID)")
        }
        self.keyFile = keyFile
        self.keyID = keyID
        self.transaction = transaction
        app = try arguments.positional("APP")
        product = try arguments.positional("PRODUCT")
        switch try arguments.positional("yes|no") {
        case "yes": allowed = true
        case "no": allowed = false
        case let other: throw UsageError("sign-eligibility: expected yes or no, not \(other)")
        }
    }

    /// Not sent: the command answers locally.
    var request: (command: ControlCommand, arguments: [String]) { (.status, []) }

    func answerLocally() throws(LocalFailure) -> JSONValue? {
        let claims: [(String, JSONValue)] = [("productId", .string(product)), ("allowIntroductoryOffer", .bool(allowed)),
                                             ("transactionId", .string(transaction))]
        return .object([("compactJWS", .string(try signRequest(claims, audience: "introductory-offer-eligibility", app: app,
                                                               keyID: keyID, key: try readSigningKey(keyFile))))])
    }

    func renderTable(_ json: JSONValue) -> String { (json["compactJWS"]?.string ?? "") + "\n" }
}

/// `storekitctl sign-commerce`: an Advanced Commerce API request signed as the developer's
/// server signs it (no daemon involved), for tests.
struct SignCommerceCommand: Subcommand {
    static let name = "sign-commerce"
    static let summary = "sign an Advanced Commerce request with an offer key (for tests)"
    static let usage = """
        Usage: storekitctl sign-commerce --key FILE --key-id ID APP REQUEST [-o json]

        Signs the Advanced Commerce API request in the file REQUEST (JSON) for APP as the app's
        server would (Apple's AdvancedCommerceAPIInAppSignatureCreator):
        a compact JWS (ES256, kid ID, with the private key in FILE, PEM) with the claims request
        (base64 of the file's bytes), bid APP, aud "advanced-commerce-api", iat, nonce and iss
        "storekitctl": what AdvancedCommerceProduct.purchase(compactJWS:) takes. The request is
        signed as written (only checked to be a JSON object): the daemon reads it, and checks the
        signature with the [OfferKey] ID of APP's registration.
        """
    let keyFile: String
    let keyID: String
    let app: String
    let requestFile: String

    init(_ arguments: inout ArgumentList) throws(UsageError) {
        guard let keyFile = try arguments.option("--key") else { throw UsageError("sign-commerce needs --key FILE") }
        guard let keyID = try arguments.option("--key-id") else { throw UsageError("sign-commerce needs --key-id ID") }
        self.keyFile = keyFile
        self.keyID = keyID
        app = try arguments.positional("APP")
        requestFile = try arguments.positional("REQUEST")
    }

    /// Not sent: the command answers locally.
    var request: (command: ControlCommand, arguments: [String]) { (.status, []) }

    func answerLocally() throws(LocalFailure) -> JSONValue? {
        guard let data = FileManager.default.contents(atPath: requestFile) else { throw LocalFailure(message: "cannot read \(requestFile)") }
        guard case .object? = try? JSONValue.parse(Array(data)) else { throw LocalFailure(message: "\(requestFile) is not a JSON object") }
        let key = try readSigningKey(keyFile)
        return .object([("compactJWS", .string(try signRequest([("request", .string(data.base64EncodedString()))],
                                                               audience: "advanced-commerce-api", app: app, keyID: keyID, key: key)))])
    }

    func renderTable(_ json: JSONValue) -> String { (json["compactJWS"]?.string ?? "") + "\n" }
}
