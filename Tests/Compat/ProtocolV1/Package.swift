// swift-tools-version:6.0
// storekitd's own client of protocol version 1, kept as it shipped: OpenStoreKit, the wire codec,
// the connection and storekit-example-app, copied unchanged from the last commit that spoke
// version 1 (70856c7, before "Protocol 2"). Never edited: it stands for the apps built before the
// daemon was upgraded. Tests/StoreKitIntegrationTests/ProtocolV1Tests.swift builds it and runs it
// against today's daemon (docs/protocol.md §12, "Versions served").
import PackageDescription

let package = Package(
    name: "storekit-protocol-v1-client",
    products: [
        .executable(name: "storekit-example-app", targets: ["storekit-example-app"]),
    ],
    targets: [
        .systemLibrary(name: "CPosix"),
        .target(name: "StoreKitPosix", dependencies: ["CPosix"]),
        .target(name: "StoreKitWire"),
        .target(name: "StoreKitConnection", dependencies: ["StoreKitWire", "StoreKitPosix"]),
        .target(name: "OpenStoreKit", dependencies: ["StoreKitWire", "StoreKitConnection"]),
        .executableTarget(name: "storekit-example-app", dependencies: ["OpenStoreKit"]),
    ],
    swiftLanguageModes: [.v6]
)
