import Foundation
import StoreKitTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

// libstorekit, the C client library, against the real daemon: `make libstorekit` builds it,
// gcc compiles its C tests (libstorekit/tests/storekit-test.c) and the example
// (docs/examples/c/buy-and-finish.c, from an installed copy only), and they run with
// STOREKITD_SOCKET and STOREKIT_ROOT_CERTIFICATE pointing at a daemon of this test's own.

/// The library built once per test run, and the C programs compiled against it.
enum LibStoreKit {
    static var buildDirectory: String { Paths.repository + "/.build/libstorekit" }
    static var library: String { buildDirectory + "/libstorekit.so.0" }
    static var header: String { Paths.repository + "/libstorekit/include/storekit/storekit.h" }

    /// `make libstorekit`, once.
    static let built: Result<String, IntegrationFailure> = {
        do {
            let result = try ProcessRunner.run("/usr/bin/env", ["make", "--no-print-directory", "-C", Paths.repository, "libstorekit"],
                                               timeout: 300)
            guard result.status == 0 else {
                return .failure(IntegrationFailure("make libstorekit failed (\(result.status)):\n\(result.stdout)\n\(result.stderr)"))
            }
            return .success(library)
        } catch {
            return .failure(IntegrationFailure("cannot run make: \(error)"))
        }
    }()

    /// gcc with the library's warnings as errors; throws with gcc's words when it fails.
    static func compile(_ arguments: [String]) throws {
        let result = try ProcessRunner.run("/usr/bin/gcc", ["-std=c11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE"] + arguments,
                                           timeout: 300)
        guard result.status == 0 else { throw IntegrationFailure("gcc \(arguments.joined(separator: " ")):\n\(result.stderr)") }
    }

    /// The C tests linked against the built library, in `directory`.
    static func testProgram(in directory: TemporaryDirectory) throws -> String {
        _ = try built.get()
        let program = directory.file("storekit-test")
        try compile(["-I", Paths.repository + "/libstorekit/include", Paths.repository + "/libstorekit/tests/storekit-test.c",
                     "-L", buildDirectory, "-lstorekit", "-Wl,-rpath," + buildDirectory, "-o", program])
        return program
    }

    /// The environment of a C program talking to `daemon`.
    static func environment(_ daemon: DaemonProcess) -> [String: String] {
        daemon.clientEnvironment.merging(["STOREKIT_ROOT_CERTIFICATE": daemon.stateDirectory + "/root-certificate.pem",
                                          "STOREKIT_CONNECT_TIMEOUT": "10"]) { $1 }
    }

    /// The functions the header declares, by name.
    static func headerFunctions() throws -> Set<String> {
        let text = try String(contentsOfFile: header, encoding: .utf8)
        let pattern = try NSRegularExpression(pattern: #"^[a-z][^;#/]*?\**\b(storekit_[a-z_]+)\("#, options: [.anchorsMatchLines])
        let range = NSRange(text.startIndex..., in: text)
        return Set(pattern.matches(in: text, range: range).compactMap { match in
            Range(match.range(at: 1), in: text).map { String(text[$0]) }
        })
    }
}

@Suite("libstorekit (C) against the real daemon", .serialized,
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/gcc"), "gcc builds libstorekit"))
struct LibStoreKitTests {
    @Test("the exported dynamic symbols are the header's functions, all versioned LIBSTOREKIT_0, and the symbols file lists them")
    func exportedSymbols() throws {
        let library = try LibStoreKit.built.get()
        let nm = try ProcessRunner.run("/usr/bin/nm", ["-D", "--defined-only", library])
        try #require(nm.status == 0, "nm: \(nm.stderr)")
        var exported: Set<String> = []
        for line in nm.lines {
            guard let symbol = line.split(separator: " ").last.map(String.init) else { continue }
            #expect(symbol.hasSuffix("@@LIBSTOREKIT_0") || symbol == "LIBSTOREKIT_0", "not versioned LIBSTOREKIT_0: \(symbol)")
            let name = String(symbol.split(separator: "@").first ?? "")
            if name != "LIBSTOREKIT_0" { exported.insert(name) }
        }
        let declared = try LibStoreKit.headerFunctions()
        #expect(declared.count > 50, "the header's functions were not found: \(declared.sorted())")
        #expect(exported == declared,
                "exported but not declared: \(exported.subtracting(declared).sorted()); declared but not exported: \(declared.subtracting(exported).sorted())")

        let symbolsFile = try String(contentsOfFile: Paths.repository + "/debian/libstorekit0.symbols", encoding: .utf8)
        let lines = symbolsFile.split(separator: "\n").map(String.init)
        #expect(lines.first == "libstorekit.so.0 libstorekit0 #MINVER#", "the symbols file's first line: \(lines.first ?? "")")
        var listed: Set<String> = []
        for line in lines.dropFirst() where line.hasPrefix(" ") {
            let fields = line.trimmingCharacters(in: .whitespaces).split(separator: " ")
            #expect(fields.count == 2 && fields[0].hasSuffix("@LIBSTOREKIT_0") && fields[1] == "0.2.0",
                    "a symbols line is not `NAME@LIBSTOREKIT_0 0.2.0` (0.2.0: the first package with the library): \(line)")
            let name = String(fields[0].split(separator: "@").first ?? "")
            if name != "LIBSTOREKIT_0" { listed.insert(name) }
        }
        #expect(listed == declared,
                "in the symbols file only: \(listed.subtracting(declared).sorted()); in the header only: \(declared.subtracting(listed).sorted())")

        let dynamic = try ProcessRunner.run("/usr/bin/readelf", ["-d", library])
        #expect(dynamic.stdout.contains("Library soname: [libstorekit.so.0]"), "soname: \(dynamic.stdout)")
        let needed = dynamic.lines.filter { $0.contains("(NEEDED)") }.compactMap { $0.split(separator: "[").last?.dropLast() }
        #expect(Set(needed.map(String.init)).isSubset(of: ["libcrypto.so.3", "libc.so.6", "ld-linux-x86-64.so.2"]),
                "links only libcrypto and libc: \(needed)")
    }

    @Test("the C tests pass against a real daemon: hello, products, buy, JWS, finish, refusals, restore, receipt, no daemon, malformed frames")
    func cTests() throws {
        let work = TemporaryDirectory("sklib")
        defer { work.remove() }
        let program = try LibStoreKit.testProgram(in: work)
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let environment = LibStoreKit.environment(daemon)

        let flow = try ProcessRunner.run(program, ["flow", "com.example.game"], environment: environment, timeout: 120)
        #expect(flow.status == 0, "flow: \(flow.stdout)\n\(flow.stderr)\n\(daemon.log(tail: 20))")
        #expect(flow.stdout.contains("checks passed"), "\(flow.stdout)")

        let noDaemon = try ProcessRunner.run(program, ["no-daemon"], timeout: 60)
        #expect(noDaemon.status == 0, "no-daemon: \(noDaemon.stdout)\n\(noDaemon.stderr)")

        let malformed = try ProcessRunner.run(program, ["malformed"], timeout: 120)
        #expect(malformed.status == 0, "malformed: \(malformed.stdout)\n\(malformed.stderr)")
        #expect(malformed.lines.filter { $0.hasPrefix("  ") }.count >= 15, "each malformed frame was tried: \(malformed.stdout)")

        // What the C program bought and finished is finished in the daemon's ledger too.
        let left = try daemon.transactions(["--app", "com.example.game", "--unfinished"])
        #expect(left.isEmpty, "the C tests left unfinished transactions: \(left)")
    }

    @Test("a JWS and a receipt of a leaf revoked with rotate-key --revoke: REVOKED_CERTIFICATE from libstorekit, the list read beside the root; what the new leaf signs verifies")
    func revokedCertificate() throws {
        let work = TemporaryDirectory("sklibrev")
        defer { work.remove() }
        let program = try LibStoreKit.testProgram(in: work)
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let environment = LibStoreKit.environment(daemon)
        func verify(_ kind: String, _ bytes: Data, root: String? = nil) throws -> String {
            let file = work.file("signed-\(UUID().uuidString)")
            try bytes.write(to: URL(fileURLWithPath: file))
            let result = try ProcessRunner.run(program, ["verify", kind, file] + (root.map { [$0] } ?? []),
                                               environment: environment, timeout: 30)
            #expect(result.status == 0, "\(result.stderr)")
            return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        func bought(_ product: String) throws -> Data {
            let object = try #require(try daemon.ctlJSON(["buy", Sample.app, product]) as? [String: Any])
            return Data(try #require(object["jwsRepresentation"] as? String).utf8)
        }
        func receipt() throws -> Data {
            let object = try #require(try daemon.ctlJSON(["receipt", Sample.app]) as? [String: Any])
            let text = try #require(object["receipt"] as? String)
            return try #require(Data(base64Encoded: text))
        }
        let root = daemon.stateDirectory + "/root-certificate.pem"
        let before = try bought(Sample.levelPack)
        let receiptBefore = try receipt()
        #expect(try verify("jws", before) == "0 success")
        #expect(try verify("receipt", receiptBefore) == "0 success")

        #expect(try daemon.ctl(["rotate-key", "--revoke"]).status == 0)
        #expect(try verify("jws", before) == "111 signed with a revoked certificate")
        #expect(try verify("jws", before, root: root) == "111 signed with a revoked certificate")
        #expect(try verify("receipt", receiptBefore) == "111 signed with a revoked certificate")
        #expect(try verify("jws", try bought(Sample.seasonPass)) == "0 success")
        #expect(try verify("receipt", try receipt()) == "0 success")

        // A list that cannot be read trusts nothing.
        try "not a list".write(toFile: daemon.stateDirectory + "/revoked-certificates.pem", atomically: true, encoding: .utf8)
        #expect(try verify("jws", try bought(Sample.coins)) == "109 the certificate chain does not lead to the root")
    }

    @Test("the C tests are clean under AddressSanitizer and UndefinedBehaviorSanitizer, leaks included")
    func sanitizers() throws {
        let work = TemporaryDirectory("sklibasan")
        defer { work.remove() }
        let program = work.file("storekit-test-asan")
        let sources = try FileManager.default.contentsOfDirectory(atPath: Paths.repository + "/libstorekit/src")
            .filter { $0.hasSuffix(".c") }.sorted().map { Paths.repository + "/libstorekit/src/" + $0 }
        try LibStoreKit.compile(["-g", "-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
                                 "-I", Paths.repository + "/libstorekit/include"] + sources
                                + [Paths.repository + "/libstorekit/tests/storekit-test.c", "-lcrypto", "-o", program])
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let sanitizer = ["ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"]
        for arguments in [["flow", "com.example.game"], ["no-daemon"], ["malformed"]] {
            let result = try ProcessRunner.run(program, arguments, environment: LibStoreKit.environment(daemon).merging(sanitizer) { $1 },
                                               timeout: 180)
            #expect(result.status == 0 && !result.stderr.contains("Sanitizer"),
                    "\(arguments[0]) under ASan/UBSan (\(result.status)):\n\(result.stdout)\n\(result.stderr.suffix(4000))")
        }
    }

    @Test("the daemon killed and started again: DISCONNECTED, RECONNECTED, the unfinished transaction delivered again, same descriptor")
    func reconnection() throws {
        let work = TemporaryDirectory("sklibre")
        defer { work.remove() }
        let program = try LibStoreKit.testProgram(in: work)
        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let ready = work.file("ready")
        let output = work.file("output")
        let errors = work.file("errors")
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        _ = FileManager.default.createFile(atPath: errors, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = ["reconnect", "com.example.game", ready]
        process.environment = ProcessInfo.processInfo.environment.merging(LibStoreKit.environment(daemon)) { $1 }
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        let bought = eventually(timeout: 20) {
            ((try? String(contentsOfFile: ready, encoding: .utf8)) ?? "").hasSuffix("\n") || !process.isRunning
        }
        let id = ((try? String(contentsOfFile: ready, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(bought && !id.isEmpty,
                     "the C program did not buy: \((try? String(contentsOfFile: errors, encoding: .utf8)) ?? "")")
        daemon.kill()
        try daemon.start()
        let finished = exited.wait(timeout: .now() + 60) == .success
        let stdout = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        let stderr = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
        try #require(finished, "the C program did not finish after the restart:\n\(stdout)\n\(stderr)")
        #expect(process.terminationStatus == 0, "reconnect (\(process.terminationStatus)):\n\(stdout)\n\(stderr)")
        #expect(stdout.contains("transaction \(id) delivered again"), "\(stdout)")
        let row = try daemon.transactions(["--app", "com.example.game"]).first { $0.id == id }
        #expect(row?.finished == true, "the redelivered transaction was finished after the restart: \(String(describing: row))")
    }

    @Test("buy-and-finish.c builds from installed files only (pkg-config storekit), buys, verifies, finishes; failures exit non-zero")
    func example() throws {
        _ = try LibStoreKit.built.get()
        let work = TemporaryDirectory("sklibex")
        defer { work.remove() }
        let root = work.file("root")
        let install = try ProcessRunner.run("/usr/bin/env", ["make", "--no-print-directory", "-C", Paths.repository, "install-libstorekit",
                                                             "DESTDIR=" + root, "PREFIX=/usr"], timeout: 300)
        try #require(install.status == 0, "make install-libstorekit: \(install.stdout)\n\(install.stderr)")
        let multiarch = try ProcessRunner.run("/usr/bin/gcc", ["-print-multiarch"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let libraryDirectory = root + "/usr/lib/" + multiarch
        for file in ["libstorekit.so.0.1.0", "libstorekit.so.0", "libstorekit.so", "pkgconfig/storekit.pc"] {
            #expect(FileManager.default.fileExists(atPath: libraryDirectory + "/" + file), "not installed: \(file)")
        }
        #expect(FileManager.default.fileExists(atPath: root + "/usr/include/storekit/storekit.h"))
        #expect(FileManager.default.fileExists(atPath: root + "/usr/share/man/man3/storekit_open.3"))

        // Only the installed tree: the example copied out of the repository, pkg-config in the DESTDIR.
        let source = work.file("buy-and-finish.c")
        try FileManager.default.copyItem(atPath: Paths.repository + "/docs/examples/c/buy-and-finish.c", toPath: source)
        let program = work.file("buy-and-finish")
        let build = try ProcessRunner.run("/bin/sh", ["-c", "cc -std=c11 -Wall -Wextra -Werror \"$0\" $(pkg-config --cflags --libs storekit) -o \"$1\"",
                                                      source, program],
                                          environment: ["PKG_CONFIG_SYSROOT_DIR": root, "PKG_CONFIG_LIBDIR": libraryDirectory + "/pkgconfig",
                                                        "PKG_CONFIG_PATH": ""])
        try #require(build.status == 0, "cc buy-and-finish.c $(pkg-config --cflags --libs storekit): \(build.stderr)")

        let daemon = try DaemonProcess()
        defer { daemon.remove() }
        try daemon.start()
        let environment = LibStoreKit.environment(daemon).merging(["LD_LIBRARY_PATH": libraryDirectory]) { $1 }
        let bought = try ProcessRunner.run(program, ["com.example.game", "com.example.game.coins100"], environment: environment)
        #expect(bought.status == 0, "buy-and-finish: \(bought.stderr)")
        let id = bought.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(UInt64(id) != nil, "it prints the transaction id: \(bought.stdout)")
        let row = try daemon.transactions(["--app", "com.example.game"]).first { $0.id == id }
        #expect(row?.state == "purchased" && row?.finished == true, "bought and finished: \(String(describing: row))")

        let unknown = try ProcessRunner.run(program, ["com.example.game", "com.example.nothing"], environment: environment)
        #expect(unknown.status != 0 && unknown.stderr.contains("refused"), "an unknown product: \(unknown.status) \(unknown.stderr)")
        let wrongRoot = try ProcessRunner.run(program, ["com.example.game", "com.example.game.coins100"],
                                              environment: environment.merging(["STOREKIT_ROOT_CERTIFICATE": "/nonexistent.pem"]) { $1 })
        #expect(wrongRoot.status != 0 && wrongRoot.stderr.contains("signature"), "no root: \(wrongRoot.status) \(wrongRoot.stderr)")
        _ = try daemon.ctlJSON(["fail-next", "paymentCancelled"])
        let failed = try ProcessRunner.run(program, ["com.example.game", "com.example.game.coins100"], environment: environment)
        #expect(failed.status != 0 && failed.stderr.contains("failed"), "a failed transaction: \(failed.status) \(failed.stderr)")
        let unregistered = try ProcessRunner.run(program, ["com.example.nobody", "com.example.game.coins100"], environment: environment)
        #expect(unregistered.status != 0 && unregistered.stderr.contains("not registered"), "\(unregistered.stderr)")
        daemon.kill()
        let noDaemon = try ProcessRunner.run(program, ["com.example.game", "com.example.game.coins100"],
                                             environment: environment.merging(["STOREKITD_SOCKET": work.file("none.sock")]) { $1 })
        #expect(noDaemon.status != 0 && noDaemon.stderr.contains("no storekitd socket"), "\(noDaemon.stderr)")
    }
}
