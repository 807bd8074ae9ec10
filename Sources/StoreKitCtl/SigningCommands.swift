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

/// `storekitctl rotate-key [--chain]`: a new signing certificate and key; with --chain, a new root too.
struct RotateKeyCommand: Subcommand {
    static let name = "rotate-key"
    static let summary = "replace the signing key and certificate [--chain: the root and intermediate too]"
    static let usage = """
        Usage: storekitctl rotate-key [--chain] [-o json]

        Makes a new signing key and certificate under the same root and intermediate and signs with
        them from now on. Everything signed before stays verifiable: each JWS carries its chain,
        and verifiers check it at the time it was signed.

        With --chain, makes a whole new chain instead (root, intermediate and signing certificate,
        each with a new key), publishes the new root where the old one was, and prints it. Use it
        when a key may have been read by someone else (the journal says so when storekitd finds
        its key files readable by other users): what the old chain signed no longer verifies under
        the new root, and every app and server must be given the new root (docs/receipts.md).
        """
    let chain: Bool
    init(_ arguments: inout ArgumentList) throws(UsageError) { chain = arguments.flag("--chain") }
    var request: (command: ControlCommand, arguments: [String]) { (.rotateKey, chain ? ["chain=1"] : []) }
    func renderTable(_ json: JSONValue) -> String {
        let expires = "New signing certificate, valid until \(json["expires"]?.string ?? "?")\n"
        guard chain, let root = json["root"]?.string else { return expires }
        return expires + "New root certificate (give it to every app and server that verifies purchases):\n" + root
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

        Signs promotional offer OFFER of PRODUCT for APP as the app's server would, with the private
        key in FILE (PEM, App Store Connect's .p8) whose identifier is ID (an [OfferKey] of APP's
        registration holds its public key): a new nonce, the time now, and the signature (ECDSA
        P-256, SHA-256, base64 of DER) over Apple's fields joined by U+2063. --username is the
        payment's applicationUsername (StoreKit 2's appAccountToken), when the payment will carry one.
        Prints what SKPaymentDiscount and Product.PurchaseOption.promotionalOffer take.
        """
    let keyFile: String
    let keyID: String
    let username: String?
    let app: String
    let product: String
    let offer: String

    init(_ arguments: inout ArgumentList) throws(UsageError) {
        guard let keyFile = try arguments.option("--key") else { throw UsageError("sign-offer needs --key FILE") }
        guard let keyID = try arguments.option("--key-id") else { throw UsageError("sign-offer needs --key-id ID") }
        self.keyFile = keyFile
        self.keyID = keyID
        username = try arguments.option("--username")
        app = try arguments.positional("APP")
        product = try arguments.positional("PRODUCT")
        offer = try arguments.positional("OFFER")
    }

    /// Not sent: the command answers locally.
    var request: (command: ControlCommand, arguments: [String]) { (.status, []) }

    func answerLocally() throws(LocalFailure) -> JSONValue? {
        guard let pem = FileManager.default.contents(atPath: keyFile) else { throw LocalFailure(message: "cannot read \(keyFile)") }
        let key: SigningKey
        do {
            key = try SigningKey(pem: Array(pem))
        } catch {
            throw LocalFailure(message: "\(keyFile): \(error)")
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

    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}
