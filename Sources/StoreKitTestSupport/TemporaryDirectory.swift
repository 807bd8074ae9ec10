import Foundation

/// A fresh directory under /tmp (short, so socket paths stay under 108 bytes), removed on `remove()`.
public final class TemporaryDirectory: @unchecked Sendable {
    public let path: String

    public init(_ label: String = "skd") {
        let template = "/tmp/\(label)-" + String(repeating: "X", count: 6)   // mkdtemp template
        var bytes = Array(template.utf8CString)
        let created = bytes.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(created != nil, "mkdtemp failed: \(errno)")
        path = String(decoding: bytes.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public func file(_ name: String) -> String { path + "/" + name }

    public func write(_ name: String, _ contents: String) throws {
        let target = file(name)
        try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        try contents.write(toFile: target, atomically: true, encoding: .utf8)
    }

    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// The repository checkout and the build directory holding the real binaries.
public enum Paths {
    /// `.build/<config>`: where `storekitd`, `storekitctl` and the test bundle are built.
    public static var buildDirectory: String {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return (executable as NSString).deletingLastPathComponent
    }

    public static func binary(_ name: String) -> String { buildDirectory + "/" + name }

    /// The repository root, from this file's location.
    public static var repository: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
    }

    public static var sampleConfig: String { repository + "/config" }

}
