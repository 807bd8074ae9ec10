/// Content a product of the app comes with (`SKProduct.isDownloadable`): what the welcome of a
/// version-3 connection lists, so that a client knows which transactions have `downloads`.
public struct HostedContentRecord: Sendable, Equatable {
    public var productID: String
    /// `SKProduct.downloadContentVersion`, as the registration's `Version=` says.
    public var version: String
    /// The bytes of all its files (`SKProduct.downloadContentLengths`, `SKDownload.expectedContentLength`).
    public var length: UInt64

    public init(productID: String, version: String, length: UInt64) {
        self.productID = productID
        self.version = version
        self.length = length
    }

    /// Smallest encoding: two empty strings and a `u64`.
    static let minimumEncodedSize = 16

    func encode(into writer: inout WireWriter) {
        writer.string(productID)
        writer.string(version)
        writer.u64(length)
    }

    static func decode(from reader: inout WireReader) throws(WireError) -> HostedContentRecord {
        HostedContentRecord(productID: try reader.string(), version: try reader.string(), length: try reader.u64())
    }
}

/// The files of a product's hosted content, as the `content` reply lists them: the client copies
/// file `index` from the descriptor `openContent` passes it, and checks its SHA-256 before the
/// download is `.finished`.
public struct ContentManifest: Sendable, Equatable {
    public struct File: Sendable, Equatable {
        /// Relative to the package's `Contents/` folder, `/`-separated, no `.` or `..` component.
        public var path: String
        public var length: UInt64
        /// SHA-256 of the file's bytes (32 bytes).
        public var sha256: [UInt8]

        public init(path: String, length: UInt64, sha256: [UInt8]) {
            self.path = path
            self.length = length
            self.sha256 = sha256
        }

        /// Smallest encoding: an empty string, a `u64`, an empty blob.
        static let minimumEncodedSize = 16
    }

    public var productID: String
    public var version: String
    public var files: [File]

    public init(productID: String, version: String, files: [File]) {
        self.productID = productID
        self.version = version
        self.files = files
    }

    /// The bytes of all files.
    public var length: UInt64 { files.reduce(0) { $0 + $1.length } }

    /// Whether `path` may name a file of a package: relative, `/`-separated, no empty, `.` or
    /// `..` component (a client writes it under its own download folder).
    public static func isSafePath(_ path: String) -> Bool {
        guard !path.isEmpty, !path.hasPrefix("/") else { return false }
        return path.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { $0 != "" && $0 != "." && $0 != ".." }
    }

    func encode(into writer: inout WireWriter) {
        writer.string(productID)
        writer.string(version)
        writer.u32(UInt32(files.count))
        for file in files {
            writer.string(file.path)
            writer.u64(file.length)
            writer.blob(file.sha256)
        }
    }

    static func decode(from reader: inout WireReader) throws(WireError) -> ContentManifest {
        let productID = try reader.string()
        let version = try reader.string()
        let count = try reader.count(minimumElementSize: File.minimumEncodedSize)
        var files: [File] = []
        files.reserveCapacity(count)
        for _ in 0..<count {
            let file = File(path: try reader.string(), length: try reader.u64(), sha256: try reader.blob())
            guard isSafePath(file.path) else { throw WireError(.invalidValue("content path \(file.path)")) }
            guard file.sha256.count == 32 else { throw WireError(.invalidValue("SHA-256 of \(file.sha256.count) bytes")) }
            files.append(file)
        }
        return ContentManifest(productID: productID, version: version, files: files)
    }
}
