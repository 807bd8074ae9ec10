import StoreKitSigning

/// One app the daemon serves, from an `apps.d/*.conf` file's `[App]` section.
public struct AppRegistration: Sendable, Equatable {
    /// `ID=`: reverse-DNS identifier, characters `[A-Za-z0-9._-]`, at most 255 bytes.
    public var id: String
    /// `Catalog=`: absolute path of the `.storekit` catalogue (a relative value is resolved
    /// against the directory holding storekitd.conf).
    public var catalogPath: String
    /// `Executable=`: when set, only processes running this absolute path may act as the app.
    public var executable: String?
    /// `ObserverUnit=`: a `.service` unit started when an update finds no connected observer.
    public var observerUnit: String?
    /// `Environment=`: the `environment` written into everything signed for the app.
    public var environment: SigningEnvironment
    /// `Version=`: the app version its receipt states (`CFBundleVersion` on Apple platforms).
    public var version: String
    /// The file and line of `ID=`, for messages about the app.
    public var file: String
    public var line: Int
    /// The line of `Catalog=` in `file`, for messages about the catalogue.
    public var catalogLine: Int
    /// `[HostedContent]` sections: content products of the app come with, one per product.
    public var hostedContent: [HostedContent] = []
    /// `[OfferKey]` sections: the keys the app's promotional offers are signed with, by key id.
    public var offerKeys: [String: OfferKey] = [:]

    public init(id: String, catalogPath: String, executable: String? = nil, observerUnit: String? = nil,
                environment: SigningEnvironment = .xcode, version: String = "1.0",
                file: String, line: Int, catalogLine: Int? = nil) {
        self.id = id
        self.catalogPath = catalogPath
        self.executable = executable
        self.observerUnit = observerUnit
        self.environment = environment
        self.version = version
        self.file = file
        self.line = line
        self.catalogLine = catalogLine ?? line
    }

    /// An error pointing at this app's `Catalog=` line, e.g. for an unreadable catalogue.
    public func catalogError(_ message: String) -> ConfigError {
        ConfigError(file: file, line: catalogLine, message: message)
    }

    /// The content the product `productID` comes with, if any.
    public func content(of productID: String) -> HostedContent? {
        hostedContent.first { $0.productID == productID }
    }

    /// Whether `id` is an acceptable app ID: 1…255 bytes of `[A-Za-z0-9._-]`, no empty
    /// dot-separated component.
    public static func isValidID(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        guard !bytes.isEmpty, bytes.count <= 255 else { return false }
        guard bytes.allSatisfy({ isIDByte($0) }) else { return false }
        return !id.split(separator: ".", omittingEmptySubsequences: false).contains(where: \.isEmpty)
    }

    /// Whether `name` is a valid systemd service unit name (`name.service`, template instances allowed).
    public static func isValidServiceName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        let suffix = Array(".service".utf8)
        guard bytes.count > suffix.count, bytes.count <= 255, bytes.suffix(suffix.count).elementsEqual(suffix) else {
            return false
        }
        let stem = bytes.dropLast(suffix.count)
        return stem.allSatisfy { isIDByte($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "@") || $0 == UInt8(ascii: "\\") }
    }

    private static func isIDByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }
}

/// A key the developer signs promotional offers with (`[OfferKey]`: `ID=` the key identifier
/// App Store Connect gave it, `Key=` a PEM file with its public key, or its private key — the
/// `.p8` — which must then be readable by no other user).
public struct OfferKey: Sendable, Equatable {
    public var id: String
    public var path: String
    public var key: OfferVerificationKey
    public var file: String
    public var line: Int

    public static func == (lhs: OfferKey, rhs: OfferKey) -> Bool {
        lhs.id == rhs.id && lhs.path == rhs.path && lhs.key === rhs.key
    }
}

/// The environment signed data names, so that a server can tell storekitd's data from the App
/// Store's: `Xcode`, as Xcode's local store labels its data (the default), or `Sandbox`.
public enum SigningEnvironment: String, Sendable, CaseIterable {
    case xcode = "Xcode"
    case sandbox = "Sandbox"

    /// The receipt's type attribute for this environment, as Apple writes it.
    public var receiptType: String {
        switch self {
        case .xcode: "Xcode"
        case .sandbox: "ProductionSandbox"
        }
    }
}
