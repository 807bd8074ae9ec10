import Foundation
#if !STOREKIT_LIBFUZZER
import StoreKitTestSupport
#endif

// Two ways to run the `requests` target (RequestHarness.swift):
// - `make fuzz` builds it with libFuzzer (`--sanitize=fuzzer -DSTOREKIT_LIBFUZZER`):
//   coverage-guided, the entry point is `LLVMFuzzerTestOneInput` and libFuzzer's own main;
// - the plain build (`swift build`, used by `make test`) is a driver that runs the harness on
//   seeded random inputs for a bounded time, and replays input files given as arguments:
//   `storekitd-fuzz [--seconds N] [--seed S] [FILE...]`.

nonisolated(unsafe) private var harness: RequestHarness?

private func sharedHarness() -> RequestHarness {
    if let harness { return harness }
    let catalog = ProcessInfo.processInfo.environment["STOREKIT_FUZZ_CATALOG"]
        ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../config/catalog/example.storekit").standardized.path
    do {
        let created = try RequestHarness(catalogPath: catalog)
        harness = created
        atexit { harness?.remove() }
        return created
    } catch {
        fatalError("storekitd-fuzz: cannot set up the store: \(error)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequests(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    sharedHarness().run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

#if !STOREKIT_LIBFUZZER
@main
struct FuzzDriver {
    static func main() {
        var seconds = 10.0
        var seed = UInt64(Date().timeIntervalSince1970 * 1000)
        var files: [String] = []
        var arguments = CommandLine.arguments.dropFirst()
        while let argument = arguments.popFirst() {
            switch argument {
            case "--seconds": seconds = arguments.popFirst().flatMap(Double.init) ?? seconds
            case "--seed": seed = arguments.popFirst().flatMap { UInt64($0) } ?? seed
            default: files.append(argument)
            }
        }
        let harness = sharedHarness()
        if !files.isEmpty {
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else { fatalError("cannot read \(file)") }
                harness.run(Array(data))
            }
            print("storekitd-fuzz: replayed \(files.count) inputs, \(harness.executed) requests")
            return
        }
        print("storekitd-fuzz: seed \(seed) (replay with --seed \(seed))")
        var generator = SeededRandomNumberGenerator(seed: seed)
        let deadline = Date().addingTimeInterval(seconds)
        var inputs = 0
        while Date() < deadline {
            let count = Int(generator.next() % 512)
            harness.run((0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
            inputs += 1
        }
        print("storekitd-fuzz: \(inputs) inputs, \(harness.executed) requests in \(Int(seconds)) s, no invariant broken")
    }
}

#endif
