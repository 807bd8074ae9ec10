import Foundation
import Glibc
import StoreKitConnection
import StoreKitSigning
import StoreKitWire
import Synchronization

/// Copies one download's hosted content on a thread of its own, over a connection of its own.
///
/// For each file of the manifest, storekitd passes a read-only descriptor (`openContent`); the
/// file is read from where the copy so far ends, hashed and written into a staging folder beside
/// the final one (`.PRODUCT-VERSION.partial`). When every file matches its SHA-256, the staging
/// folder gets `ContentInfo.plist` and is renamed into place (`downloads/PRODUCT`), so a folder
/// at `contentURL` is always whole. A pause stops after the current chunk and keeps the copy; a
/// lost connection is reconnected (a descriptor already held keeps working through a daemon
/// restart); a failed write (a full disk) fails the download and keeps what was copied, so
/// `start` again goes on from there; a cancel deletes the staging folder.
final class ContentDownloader: @unchecked Sendable {
    enum Stop: Sendable {
        case pause
        case cancel
    }

    private let download: SKDownload
    private let app: String
    private let socketPath: String
    private let stopRequest = Mutex<Stop?>(nil)
    /// Bytes read per step: the unit of progress, of pause and of cancel.
    static let chunkSize = 1 << 20
    /// Progress is told at most this often (and at each change of state).
    static let progressInterval: TimeInterval = 0.1

    init(download: SKDownload, app: String, socketPath: String) {
        self.download = download
        self.app = app
        self.socketPath = socketPath
    }

    /// Starts copying on a new thread.
    func start() {
        CryptoLibrary.keepUntilExit()
        let thread = Thread { [self] in run() }
        thread.name = "OpenStoreKit.download"
        thread.start()
    }

    /// Asks the copy to stop after its current chunk.
    func stop(_ how: Stop) {
        stopRequest.withLock { if $0 != .cancel { $0 = how } }
    }

    // MARK: Where content goes

    /// `$XDG_CACHE_HOME/storekit/APP/downloads` (default `~/.cache/...`), or the test session's.
    static func downloadsDirectory(app: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        let cacheHome = ReceiptFile.baseDirectory(session: cacheHomeOverride.withLock { $0 }, variable: "XDG_CACHE_HOME", underHome: ".cache",
                                                  environment: environment)
        return URL(fileURLWithPath: cacheHome + "/storekit/" + app + "/downloads")
    }

    /// Where `SKTestSession` keeps its content (its own temporary folder); nil outside a session.
    static let cacheHomeOverride = Mutex<String?>(nil)

    static func finalURL(app: String, productID: String) -> URL {
        downloadsDirectory(app: app).appendingPathComponent(productID, isDirectory: true)
    }

    static func stagingURL(app: String, productID: String, version: String) -> URL {
        downloadsDirectory(app: app).appendingPathComponent(".\(productID)-\(version).partial", isDirectory: true)
    }

    /// Deletes what a cancelled download copied, unless a process of the app is copying into it
    /// now (it holds the content's lock).
    static func discardStaging(app: String, productID: String, version: String) {
        let lock = lockURL(app: app, productID: productID, version: version).path
        let fd = Glibc.open(lock, O_RDWR | O_CLOEXEC)
        if fd >= 0 {
            defer { close(fd) }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return }
        }
        try? FileManager.default.removeItem(at: stagingURL(app: app, productID: productID, version: version))
    }

    /// The lock file of a product's content (`downloads/.locks/PRODUCT-VERSION.lock`).
    static func lockURL(app: String, productID: String, version: String) -> URL {
        downloadsDirectory(app: app).appendingPathComponent(".locks", isDirectory: true)
            .appendingPathComponent("\(productID)-\(version).lock")
    }

    // MARK: The copy

    private struct Failure: Error {
        var error: any Error
    }

    /// A pause or cancel asked for while waiting for storekitd.
    private struct StopAsked: Error {
        var stop: Stop
    }

    private func run() {
        let productID = download.contentIdentifier
        let version = download.contentVersion
        let staging = Self.stagingURL(app: app, productID: productID, version: version)
        do {
            var connection = try connect()
            let manifest = try fetchManifest(&connection)
            // One process of the app copies a product's content at a time (an observer beside a
            // buyer may both be given the transaction): the other waits, then finds it in place.
            guard let lock = try lockContent(productID: productID, version: version) else {
                // Another process holds the lock and is copying into the staging folder: it is not
                // this one's to delete.
                finish(stopped: stopRequest.withLock { $0 } ?? .pause, staging: nil, copied: nil, total: manifest.length)
                return
            }
            defer { close(lock) }
            if installedMatches(manifest) {
                finishInstalled(productID: productID)
                return
            }
            let total = manifest.length
            var copied: UInt64 = 0
            let started = Date()
            var copiedThisRun: UInt64 = 0
            var lastTold = Date.distantPast
            for (index, file) in manifest.files.enumerated() {
                let destination = staging.appendingPathComponent("Contents", isDirectory: true).appendingPathComponent(file.path)
                let source = try openFile(UInt32(index), file: file, connection: &connection)
                defer { close(source) }
                let outcome = try copy(file, from: source, to: destination) { step, reused in
                    copied += step
                    if !reused { copiedThisRun += step }
                    let now = Date()
                    guard now.timeIntervalSince(lastTold) >= Self.progressInterval else { return }
                    lastTold = now
                    self.report(copied: copied, total: total, thisRun: copiedThisRun, since: started)
                }
                if let stop = outcome {
                    finish(stopped: stop, staging: staging, copied: copied, total: total)
                    return
                }
            }
            try install(manifest, from: staging)
            finishInstalled(productID: productID)
            return
        } catch {
            if let asked = error.error as? StopAsked {
                // Stopped before anything was copied this run: nothing to delete without the lock.
                finish(stopped: asked.stop, staging: nil, copied: nil, total: 0)
                return
            }
            download.withProgress {
                $0.state = .failed
                $0.error = error.error
                $0.timeRemaining = SKDownloadTimeRemainingUnknown
                $0.worker = nil
            }
        }
        tell()
    }

    private func finishInstalled(productID: String) {
        download.withProgress {
            $0.state = .finished
            $0.progress = 1
            $0.timeRemaining = 0
            $0.error = nil
            $0.contentURL = Self.finalURL(app: app, productID: productID)
            $0.worker = nil
        }
        tell()
    }

    /// Takes the app's lock of this content (`flock` on `.locks/PRODUCT-VERSION.lock` in the
    /// downloads folder), waiting while another process of the app holds it; nil when a pause or cancel
    /// came meanwhile. The lock goes with the descriptor returned.
    private func lockContent(productID: String, version: String) throws(Failure) -> Int32? {
        // Lock files stay (removing one while another process waits on it would let a third take
        // a lock of its own on a new file): one small file per product, in `.locks/`.
        let lockFile = Self.lockURL(app: app, productID: productID, version: version)
        do {
            try FileManager.default.createDirectory(at: lockFile.deletingLastPathComponent(), withIntermediateDirectories: true)
        } catch {
            throw Failure(error: error)
        }
        let path = lockFile.path
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw posix(errno, "cannot open \(path)") }
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                let code = errno
                close(fd)
                throw posix(code, "cannot lock \(path)")
            }
            if stopRequest.withLock({ $0 }) != nil {
                close(fd)
                return nil
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return fd
    }

    /// Whether the content at `contentURL` is this manifest's, whole: its `ContentInfo.plist`
    /// names the product and version, and every file matches its SHA-256 (another process of the
    /// app, or an earlier purchase, put it there).
    private func installedMatches(_ manifest: ContentManifest) -> Bool {
        let final = Self.finalURL(app: app, productID: manifest.productID)
        guard let data = FileManager.default.contents(atPath: final.appendingPathComponent("ContentInfo.plist").path),
              let info = try? PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any],
              info["ContentVersion"] as? String == manifest.version, info["IAPProductIdentifier"] as? String == manifest.productID
        else { return false }
        for file in manifest.files {
            let fd = Glibc.open(final.appendingPathComponent("Contents").appendingPathComponent(file.path).path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return false }
            defer { close(fd) }
            guard case .success(let digest) = SHA256Stream.digest(ofFile: fd), digest == file.sha256 else { return false }
        }
        return true
    }

    /// A stop asked for while copying: paused keeps the copy, cancelled deletes it.
    /// `staging`: the staging folder, when this worker holds the content's lock (a cancel deletes
    /// it); `copied`: how far it got, nil to leave the progress as it was.
    private func finish(stopped: Stop, staging: URL?, copied: UInt64?, total: UInt64) {
        if stopped == .cancel, let staging { try? FileManager.default.removeItem(at: staging) }
        download.withProgress {
            $0.state = stopped == .cancel ? .cancelled : .paused
            $0.timeRemaining = SKDownloadTimeRemainingUnknown
            $0.worker = nil
            if stopped == .cancel {
                $0.progress = 0
            } else if let copied, total > 0 {
                $0.progress = Float(Double(copied) / Double(total))
            }
        }
        tell()
    }

    private func report(copied: UInt64, total: UInt64, thisRun: UInt64, since started: Date) {
        let elapsed = Date().timeIntervalSince(started)
        let rate = elapsed > 0.2 && thisRun > 0 ? Double(thisRun) / elapsed : 0
        download.withProgress {
            $0.progress = total == 0 ? 1 : Float(Double(copied) / Double(total))
            $0.timeRemaining = rate > 0 ? Double(total - min(copied, total)) / rate : SKDownloadTimeRemainingUnknown
        }
        tell()
    }

    private func tell() {
        SKPaymentQueue.default().tellObservers(about: [download])
    }

    /// Copies `file` from `source` into `destination`, going on from what a previous run left
    /// there (hashed again, not copied again). `progress` gets each step's bytes and whether they
    /// were already there. Returns the stop asked for, or nil once the file is whole and checked.
    private func copy(_ file: ContentManifest.File, from source: Int32, to destination: URL,
                      progress: (UInt64, Bool) -> Void) throws(Failure) -> Stop? {
        do {
            try FileManager.default.createDirectory(at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
        } catch {
            throw Failure(error: error)
        }
        let fd = Glibc.open(destination.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw posix(errno, "cannot write \(destination.path)") }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw posix(errno, "cannot read \(destination.path)") }
        var offset = UInt64(status.st_size)
        if offset > file.length {
            guard ftruncate(fd, 0) == 0 else { throw posix(errno, "cannot truncate \(destination.path)") }
            offset = 0
        }
        // Hashed on a thread of its own while the copy reads and writes the next chunks.
        let hash = PipelinedHash(size: Self.chunkSize)
        var finished = false
        defer { if !finished { _ = hash.finish() } }
        // What an earlier run copied is read back into the hash.
        var position: UInt64 = 0
        while position < offset {
            var buffer = hash.takeBuffer()
            let count: Int
            do {
                count = try readChunk(fd, into: &buffer, at: position, limit: offset - position, what: destination.path)
            } catch {
                hash.giveBack(buffer)
                throw error
            }
            guard count > 0 else {
                hash.giveBack(buffer)
                break
            }
            hash.hash(buffer, count: count)
            position += UInt64(count)
        }
        // Told as one step: a resumed download's first progress is where it stopped.
        if position > 0 { progress(position, true) }
        while offset < file.length {
            if let stop = stopRequest.withLock({ $0 }) { return stop }
            var buffer = hash.takeBuffer()
            let count: Int
            do {
                count = try readChunk(source, into: &buffer, at: offset, limit: file.length - offset, what: file.path)
            } catch {
                hash.giveBack(buffer)
                throw error
            }
            guard count > 0 else {
                hash.giveBack(buffer)
                throw Failure(error: Self.skError("the content file \(file.path) ended at \(offset) of \(file.length) bytes "
                                                  + "(changed since storekitd listed it)"))
            }
            var written = 0
            while written < count {
                let result = buffer.withUnsafeBytes { raw in
                    pwrite(fd, raw.baseAddress! + written, count - written, off_t(offset) + off_t(written))
                }
                if result < 0 {
                    if errno == EINTR { continue }
                    let code = errno
                    // What this step wrote in part is cut off: the copy stays a prefix of the file.
                    _ = ftruncate(fd, off_t(offset))
                    hash.giveBack(buffer)
                    throw posix(code, "cannot write \(destination.path)")
                }
                written += result
            }
            hash.hash(buffer, count: count)
            offset += UInt64(count)
            progress(UInt64(count), false)
        }
        finished = true
        guard hash.finish() == file.sha256 else {
            try? FileManager.default.removeItem(at: destination)
            throw Failure(error: Self.skError("the content file \(file.path) does not match the SHA-256 storekitd listed "
                                              + "(changed since it was listed): it was deleted; start the download again"))
        }
        guard fsync(fd) == 0 else { throw posix(errno, "cannot write \(destination.path)") }
        return nil
    }

    private func readChunk(_ fd: Int32, into buffer: inout [UInt8], at offset: UInt64, limit: UInt64, what: String) throws(Failure) -> Int {
        let wanted = Int(min(UInt64(buffer.count), limit))
        while true {
            let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, wanted, off_t(offset)) }
            if count >= 0 { return count }
            if errno == EINTR { continue }
            throw posix(errno, "cannot read \(what)")
        }
    }

    /// Writes `ContentInfo.plist` and moves the staging folder into place, replacing an older
    /// download of the product.
    private func install(_ manifest: ContentManifest, from staging: URL) throws(Failure) {
        let final = Self.finalURL(app: app, productID: manifest.productID)
        do {
            let info: [String: Any] = ["ContentVersion": manifest.version, "IAPProductIdentifier": manifest.productID]
            let data = try PropertyListSerialization.data(fromPropertyList: info, format: .xml, options: 0)
            try data.write(to: staging.appendingPathComponent("ContentInfo.plist"), options: .atomic)
            // On disk before it is in place (the app may finish the transaction once it is):
            // the package's folders, then the rename, then the downloads folder that holds it.
            try Self.syncTree(staging)
            if FileManager.default.fileExists(atPath: final.path) { try FileManager.default.removeItem(at: final) }
            guard rename(staging.path, final.path) == 0 else { throw posix(errno, "cannot move the content to \(final.path)") }
            Self.sync(final.deletingLastPathComponent().path)
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(error: error)
        }
    }

    /// fsync of a file or folder, best effort.
    static func sync(_ path: String) {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }

    /// fsync of `ContentInfo.plist` and every folder of the package (its files were synced as
    /// they were copied).
    static func syncTree(_ root: URL) throws {
        sync(root.appendingPathComponent("ContentInfo.plist").path)
        var folders = [root.path]
        if let walker = FileManager.default.enumerator(atPath: root.path) {
            while let relative = walker.nextObject() as? String {
                var isFolder: ObjCBool = false
                let path = root.path + "/" + relative
                if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue { folders.append(path) }
            }
        }
        for folder in folders { sync(folder) }
    }

    // MARK: Talking to storekitd

    /// How long a download waits for storekitd to come back before it fails.
    static var unreachableTimeout: TimeInterval { StoreConnection.unreachableTimeout }

    /// A connection that takes descriptors; storekitd is waited for (jittered backoff) for
    /// `unreachableTimeout`, as a restart takes a moment.
    private func connect() throws(Failure) -> WireConnection {
        let deadline = Date().addingTimeInterval(Self.unreachableTimeout)
        var backoff = 0.05
        while true {
            do {
                let connection = try WireConnection(path: socketPath)
                _ = try connection.hello(app: app)
                connection.acceptsDescriptors = true
                connection.setReceiveTimeout(30)
                return connection
            } catch {
                if case .refused(let code, let message) = error.code {
                    throw Failure(error: StoreConnection.error(code: code, detail: 0, message: message))
                }
                guard Date() < deadline else {
                    throw Failure(error: SKError(.cloudServiceNetworkConnectionFailed,
                                                 userInfo: [NSLocalizedDescriptionKey: "Cannot connect to the store: \(error)"]))
                }
            }
            if let stop = stopRequest.withLock({ $0 }) { throw Failure(error: StopAsked(stop: stop)) }
            Thread.sleep(forTimeInterval: backoff * Double.random(in: 0.5...1.5))
            backoff = min(backoff * 2, 1)
        }
    }

    /// Sends `message` and waits for its answer, reconnecting (and sending again) when the
    /// connection breaks: both requests only read.
    private func ask(_ message: ClientMessage, on connection: inout WireConnection) throws(Failure) -> ServerMessage {
        var attempts = 0
        while true {
            do {
                try connection.send(message)
                while true {
                    let reply = try connection.receive()
                    switch reply {
                    case .result(_, let code, let detail, _, let text) where code != .ok:
                        throw Failure(error: StoreConnection.error(code: code, detail: detail, message: text))
                    case .content, .contentFile, .result:
                        return reply
                    default:
                        continue   // pushes are not this connection's business (it does not subscribe)
                    }
                }
            } catch let refusal as Failure {
                throw refusal   // the daemon's answer: not a connection to make again
            } catch {
                attempts += 1
                guard attempts < 100 else {
                    throw Failure(error: SKError(.cloudServiceNetworkConnectionFailed,
                                                 userInfo: [NSLocalizedDescriptionKey: "Lost the store: \(error)"]))
                }
                connection.close()
                connection = try connect()
            }
        }
    }

    private func fetchManifest(_ connection: inout WireConnection) throws(Failure) -> ContentManifest {
        let transactionID = download.transactionID
        guard case .content(_, let manifest) = try ask(.content(requestID: 1, transactionID: transactionID), on: &connection) else {
            throw Failure(error: Self.skError("storekitd did not answer with the content of transaction \(transactionID)"))
        }
        guard manifest.productID == download.contentIdentifier, manifest.version == download.contentVersion else {
            throw Failure(error: Self.skError("the content of \(download.contentIdentifier) is now version \(manifest.version), "
                                              + "not \(download.contentVersion): the app gets the new version's download when it "
                                              + "connects again"))
        }
        return manifest
    }

    private func openFile(_ index: UInt32, file: ContentManifest.File, connection: inout WireConnection) throws(Failure) -> Int32 {
        let transactionID = download.transactionID
        while true {
            guard case .contentFile(_, index, let length) = try ask(.openContent(requestID: 2, transactionID: transactionID, file: index),
                                                                    on: &connection) else {
                throw Failure(error: Self.skError("storekitd did not answer with file \(file.path)"))
            }
            guard let fd = connection.takeDescriptor() else {
                throw Failure(error: Self.skError("storekitd's answer for \(file.path) came without its file"))
            }
            guard length == file.length else {
                close(fd)
                throw Failure(error: Self.skError("\(file.path) is \(length) bytes now, not \(file.length)"))
            }
            return fd
        }
    }

    static func skError(_ message: String) -> SKError {
        SKError(.unknown, userInfo: [NSLocalizedDescriptionKey: message])
    }

    private func posix(_ code: Int32, _ what: String) -> Failure {
        Failure(error: NSError(domain: NSPOSIXErrorDomain, code: Int(code),
                               userInfo: [NSLocalizedDescriptionKey: "\(what): \(String(cString: strerror(code)))"]))
    }
}
