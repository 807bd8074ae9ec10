// swift-tools-version:6.0
// The architecture, bottom up: C libraries → Posix/Wire (import nothing of ours) → Store (and
// Postgres beside it) → Engine (no sockets; a ledger through Store's `Ledger`) → Daemon →
// storekitd. The client library sees only Wire, Posix and Signing.
import PackageDescription

let package = Package(
    name: "storekitd",
    products: [
        .library(name: "OpenStoreKit", targets: ["OpenStoreKit"]),
        .library(name: "OpenStoreKitTest", targets: ["OpenStoreKitTest"]),
        .executable(name: "storekitd", targets: ["storekitd"]),
        .executable(name: "storekitctl", targets: ["storekitctl"]),
        .executable(name: "storekit-example-app", targets: ["storekit-example-app"]),
        .executable(name: "storekit2-example-app", targets: ["storekit2-example-app"]),
        .executable(name: "storekitd-bench", targets: ["storekitd-bench"]),
        .executable(name: "storekitd-fuzz", targets: ["storekitd-fuzz"]),
    ],
    targets: [
        // C libraries from Debian, no Swift in them.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CPosix"),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CPostgres"),   // libpq-dev's header; libpq itself is loaded when needed

        // Foundations: no dependency on anything else of ours.
        // Its syscall trampolines take failures a test injects (SyscallFailures) in debug builds only.
        .target(name: "StoreKitPosix", dependencies: ["CPosix"], swiftSettings: [.define("STOREKIT_TEST_HOOKS", .when(configuration: .debug))]),
        .target(name: "StoreKitWire"),
        // A blocking framed connection: the one socket client of the CLI, the library, bench and tests.
        .target(name: "StoreKitConnection", dependencies: ["StoreKitWire", "StoreKitPosix"]),
        // Proof of purchase: keys, the certificate chain, JWS and PKCS#7 receipts, made and checked
        // with OpenSSL's libcrypto. Used by the daemon to sign and by the library to verify.
        .target(name: "StoreKitSigning", dependencies: ["CCrypto", "StoreKitPosix"]),

        // Durable state and the logic over it. The ledger's protocol and values (`Ledger`), and
        // its two backends side by side: neither imports the other, and the engine sees only
        // the protocol.
        .target(name: "StoreKitLedger", dependencies: ["StoreKitPosix", "StoreKitWire"]),
        .target(name: "StoreKitSQLite", dependencies: ["CSQLite", "CPosix", "StoreKitLedger", "StoreKitPosix", "StoreKitWire"]),
        // The same ledger in PostgreSQL (`[Store] Database=`).
        .target(name: "StoreKitPostgres", dependencies: ["CPostgres", "StoreKitLedger", "StoreKitWire", "StoreKitPosix"]),
        .target(name: "StoreKitEngine", dependencies: ["StoreKitLedger", "StoreKitWire", "StoreKitPosix"]),

        // The daemon as a library, and its tiny main. Its test hooks (TestHooks.swift,
        // `--enable-test-hooks`) are compiled into debug builds only, never the packaged one.
        .target(name: "StoreKitDaemon", dependencies: [
            "StoreKitEngine", "StoreKitLedger", "StoreKitSQLite", "StoreKitPostgres", "StoreKitWire", "StoreKitPosix", "StoreKitSigning", "StoreKitConnection", "CSystemd",
        ], swiftSettings: [.define("STOREKIT_TEST_HOOKS", .when(configuration: .debug))]),
        // One binary for the package: run as `storekitctl` (a link to it), storekitd is the
        // administration tool (StoreKitCtl), so the two share one copy of the Swift runtime.
        .executableTarget(name: "storekitd", dependencies: ["StoreKitDaemon", "StoreKitCtl"]),

        // What apps and admins run.
        .target(name: "OpenStoreKit", dependencies: ["StoreKitWire", "StoreKitConnection", "StoreKitPosix", "StoreKitSigning"]),
        // Apple's StoreKitTest: SKTestSession over a private storekitd per session.
        .target(name: "OpenStoreKitTest", dependencies: ["OpenStoreKit", "StoreKitWire", "StoreKitConnection"]),
        .target(name: "StoreKitCtl", dependencies: ["StoreKitWire", "StoreKitConnection", "StoreKitSigning"]),
        .executableTarget(name: "storekitctl", dependencies: ["StoreKitCtl"]),
        .executableTarget(name: "storekit-example-app", dependencies: ["OpenStoreKit"]),
        .executableTarget(name: "storekit2-example-app", dependencies: ["OpenStoreKit"]),
        .executableTarget(name: "storekitd-bench", dependencies: ["StoreKitWire", "StoreKitConnection", "StoreKitPosix", "StoreKitSQLite", "StoreKitSigning",
                                                               "StoreKitTestSupport", "OpenStoreKit"]),
        // Requests through the engine and the store, checked after each: libFuzzer's target with
        // `make fuzz`, a seeded random driver in `make test` (Entry.swift).
        .executableTarget(name: "storekitd-fuzz", dependencies: ["StoreKitEngine", "StoreKitLedger", "StoreKitSQLite", "StoreKitWire", "StoreKitTestSupport"]),

        // Tests.
        .target(name: "StoreKitTestSupport", dependencies: ["StoreKitPosix", "StoreKitWire", "StoreKitConnection"]),
        .testTarget(name: "StoreKitPosixTests", dependencies: ["StoreKitPosix", "StoreKitTestSupport"]),
        .testTarget(name: "StoreKitWireTests", dependencies: ["StoreKitWire"]),
        .testTarget(name: "OpenStoreKitTestTests", dependencies: ["OpenStoreKit", "OpenStoreKitTest", "StoreKitSigning", "StoreKitTestSupport"],
                    exclude: ["Store.storekit"]),
        .testTarget(name: "StoreKitSigningTests", dependencies: ["StoreKitSigning", "StoreKitTestSupport"]),
        .testTarget(name: "StoreKitSQLiteTests", dependencies: ["StoreKitLedger", "StoreKitSQLite", "StoreKitTestSupport"]),
        // Fixtures/ holds the project's own .storekit files, read by path from the tests.
        .testTarget(name: "StoreKitEngineTests", dependencies: ["StoreKitEngine", "StoreKitLedger", "StoreKitSQLite", "StoreKitPostgres", "StoreKitTestSupport"],
                    exclude: ["Fixtures"]),
        .testTarget(name: "StoreKitPostgresTests", dependencies: ["StoreKitPostgres", "StoreKitLedger", "StoreKitSQLite", "StoreKitTestSupport"]),
        .testTarget(name: "StoreKitDaemonTests", dependencies: ["StoreKitDaemon", "StoreKitLedger", "StoreKitTestSupport"]),
        .testTarget(name: "OpenStoreKitTests", dependencies: ["OpenStoreKit", "StoreKitSigning", "StoreKitTestSupport"]),
        .testTarget(name: "StoreKitIntegrationTests", dependencies: ["StoreKitTestSupport", "StoreKitWire", "StoreKitConnection", "StoreKitPosix",
                                                                   "StoreKitSigning"]),
    ],
    swiftLanguageModes: [.v6]
)
