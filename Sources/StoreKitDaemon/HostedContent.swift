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
    /// What each of `files` was when it was hashed: a reload hashes again only a file whose
    /// stamp changed (or a new one).
    var stamps: [FileStamp] = []
    /// How many files the last `scan` read and hashed (the others kept their digests).
    public var hashedCount = 0
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
    /// What the log says of it after a start or reload.
    var summary: String {
        "\(productID) \(version): \(files.count) file\(files.count == 1 ? "" : "s"), \(manifest.length) bytes from \(directory)"
            + (hashedCount == files.count ? "" : " (\(hashedCount) hashed again, the others unchanged)")
    }

    public var record: HostedContentRecord { HostedContentRecord(productID: productID, version: version, length: manifest.length) }

    /// Deepest folder nesting read (a symbolic link loop ends here, with an error).
    static let maximumDepth = 32

    /// Lists and hashes the directory's regular files (symbolic links followed); an error names
    /// the section's line and the file. A file `known` has with the same stamp (the previous
    /// configuration's listing, at a reload) keeps its digest without being read.
    public mutating func scan(reusing known: [String: (FileStamp, [UInt8])] = [:]) throws(ConfigError) {
        var found: [(ContentManifest.File, FileStamp)] = []
        hashedCount = 0
        try walk(relative: "", depth: 0, known: known, into: &found)
        guard !found.isEmpty else { throw error("\(directory) holds no file: a product's content is at least one file") }
        files = found.map(\.0)
        stamps = found.map(\.1)
    }

    /// Each file's digest by its full path, with its stamp: what a reload's `scan` may reuse.
    var digests: [String: (FileStamp, [UInt8])] {
        var result: [String: (FileStamp, [UInt8])] = [:]
        for (file, stamp) in zip(files, stamps) { result[directory + "/" + file.path] = (stamp, file.sha256) }
        return result
    }

    /// What identifies a file's bytes without reading them: device, inode, size, and the times
    /// of its last change of data and of status (a rewrite in place moves both).
    public struct FileStamp: Sendable, Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modified: Int64
        var changed: Int64

        init(_ status: stat) {
            device = UInt64(status.st_dev)
            inode = UInt64(status.st_ino)
            size = Int64(status.st_size)
            modified = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
            changed = Int64(status.st_ctim.tv_sec) * 1_000_000_000 + Int64(status.st_ctim.tv_nsec)
        }
    }

    private func error(_ message: String) -> ConfigError {
        ConfigError(file: file, line: line, message: "[HostedContent] of \(productID): \(message)")
    }

    private mutating func walk(relative: String, depth: Int, known: [String: (FileStamp, [UInt8])],
                      into found: inout [(ContentManifest.File, FileStamp)]) throws(ConfigError) {
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
                try walk(relative: child, depth: depth + 1, known: known, into: &found)
            case S_IFREG:
                let stamp = FileStamp(status)
                let digest: [UInt8]
                if let (knownStamp, knownDigest) = known[full], knownStamp == stamp {
                    digest = knownDigest
                } else {
                    digest = try Self.hash(full, error: error)
                    hashedCount += 1
                }
                found.append((ContentManifest.File(path: child, length: UInt64(status.st_size), sha256: digest), stamp))
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
        // Non-blocking: a FIFO put in a file's place must not hold the serving loop.
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { return .failure(ContentUnavailable(message: "cannot open \(path): \(Errno(rawValue: errno))")) }
        var status = stat()
        // The very file that was listed (device and inode), not another put in its place (a
        // symbolic link to something else the daemon may read), of the length listed.
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG, UInt64(status.st_size) == entry.length,
              index >= stamps.count || (UInt64(status.st_dev) == stamps[index].device && UInt64(status.st_ino) == stamps[index].inode) else {
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
