import Foundation

/// The outcome of a finished child process.
public struct ProcessResult: Sendable {
    public let status: Int32
    public let stdout: String
    public let stderr: String

    public var lines: [String] { stdout.split(separator: "\n").map(String.init) }
}

/// Runs real binaries for end-to-end tests, with a timeout, without polling.
public enum ProcessRunner {
    /// Runs `path` to completion (killed after `timeout` seconds) and collects its output.
    /// `uid`/`gid` run it as another user through `setpriv`.
    public static func run(
        _ path: String, _ arguments: [String], environment: [String: String] = [:], uid: UInt32? = nil,
        timeout: Double = 30
    ) throws -> ProcessResult {
        let process = Process()
        if let uid {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", path] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: path)
            process.arguments = arguments
        }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let outFile = FileManager.default.temporaryDirectory.appendingPathComponent("out-\(UUID().uuidString)")
        let errFile = FileManager.default.temporaryDirectory.appendingPathComponent("err-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: outFile.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errFile.path, contents: nil)
        defer {
            try? FileManager.default.removeItem(at: outFile)
            try? FileManager.default.removeItem(at: errFile)
        }
        let out = try FileHandle(forWritingTo: outFile)
        let err = try FileHandle(forWritingTo: errFile)
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        let done = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in done.signal() }
        try process.run()
        if done.wait(timeout: .now() + timeout) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            done.wait()
        }
        try? out.close()
        try? err.close()
        return ProcessResult(
            status: process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus,
            stdout: (try? String(contentsOf: outFile, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOf: errFile, encoding: .utf8)) ?? "")
    }
}
