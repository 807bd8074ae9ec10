import StoreKitPosix
import StoreKitSigning
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

/// Content an app's registration attaches to one of its products (`[HostedContent]`, DESIGN.md
/// "Hosted content"): a directory whose files a buyer's app downloads as the package's
/// `Contents/`. Its files are listed and hashed (SHA-256) when the configuration is loaded, so a
/// download is checked against what the daemon read, and a file changed since fails the check.
public struct HostedContent: Sendable, Equatable {
    public var productID: String
    /// Absolute path of the directory (`Path=`, relative values resolved against the config dir).
    public var directory: String
    /// `Version=` (`SKDownload.contentVersion`).
    public var version: String
    /// Its files, sorted by path; empty until `scan()`.
    public var files: [ContentManifest.File] = []
    /// Where the section is, for messages.
    public var file: String
    public var line: Int

    public init(productID: String, directory: String, version: String, file: String, line: Int) {
        self.productID = productID
        self.directory = directory
        self.version = version
        self.file = file
        self.line = line
    }

    public var manifest: ContentManifest { ContentManifest(productID: productID, version: version, files: files) }
    public var record: HostedContentRecord { HostedContentRecord(productID: productID, version: version, length: manifest.length) }

    /// Deepest folder nesting read (a symbolic link loop ends here, with an error).
    static let maximumDepth = 32

    /// Lists and hashes the directory's regular files (symbolic links followed); an error names
    /// the section's line and the file.
    public mutating func scan() throws(ConfigError) {
        var found: [ContentManifest.File] = []
        try walk(relative: "", depth: 0, into: &found)
        guard !found.isEmpty else { throw error("\(directory) holds no file: a product's content is at least one file") }
        files = found
    }

    private func error(_ message: String) -> ConfigError {
        ConfigError(file: file, line: line, message: "[HostedContent] of \(productID): \(message)")
    }

    private func walk(relative: String, depth: Int, into found: inout [ContentManifest.File]) throws(ConfigError) {
        let path = relative.isEmpty ? directory : directory + "/" + relative
        guard depth <= Self.maximumDepth else { throw error("\(path) is nested more than \(Self.maximumDepth) folders deep") }
        guard let handle = opendir(path) else { throw error("cannot read the folder \(path): \(Errno(rawValue: errno))") }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != ".", name != ".." { names.append(name) }
        }
        closedir(handle)
        for name in names.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            let child = relative.isEmpty ? name : relative + "/" + name
            let full = directory + "/" + child
            var status = stat()
            guard stat(full, &status) == 0 else { throw error("cannot read \(full): \(Errno(rawValue: errno))") }
            switch status.st_mode & S_IFMT {
            case S_IFDIR:
                try walk(relative: child, depth: depth + 1, into: &found)
            case S_IFREG:
                found.append(ContentManifest.File(path: child, length: UInt64(status.st_size), sha256: try Self.hash(full, error: error)))
            default:
                throw error("\(full) is neither a file nor a folder")
            }
        }
    }

    private static func hash(_ path: String, error: (String) -> ConfigError) throws(ConfigError) -> [UInt8] {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw error("cannot read \(path): \(Errno(rawValue: errno))") }
        defer { close(fd) }
        switch SHA256Stream.digest(ofFile: fd) {
        case .success(let digest): return digest
        case .failure(let failure): throw error("cannot read \(path): \(Errno(rawValue: failure.errno))")
        }
    }

    /// Opens file `index` read-only for a buyer's app; nil with the reason when it is gone or
    /// changed size since the configuration was loaded.
    func openFile(_ index: Int) -> Result<Int32, ContentUnavailable> {
        let entry = files[index]
        let path = directory + "/" + entry.path
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { return .failure(ContentUnavailable(message: "cannot open \(path): \(Errno(rawValue: errno))")) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG, UInt64(status.st_size) == entry.length else {
            close(fd)
            return .failure(ContentUnavailable(
                message: "\(path) changed since the configuration was loaded (reload storekitd to list it again)"))
        }
        return .success(fd)
    }

    struct ContentUnavailable: Error {
        var message: String
    }
}
