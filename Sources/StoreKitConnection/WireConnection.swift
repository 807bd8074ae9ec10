import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

/// Why a connection to storekitd failed.
public struct ConnectionError: Error, CustomStringConvertible, Sendable, Equatable {
    public enum Code: Sendable, Equatable {
        case connect(Errno)
        case io(Errno)
        case closed
        case timedOut
        case protocolError(WireError)
        case refused(ResultCode, String)
    }

    public let code: Code
    public let path: String

    public init(_ code: Code, path: String) {
        self.code = code
        self.path = path
    }

    public var description: String {
        switch code {
        case .connect(let errno): "cannot connect to \(path): \(errno)"
        case .io(let errno): "connection to \(path) failed: \(errno)"
        case .closed: "storekitd closed the connection (\(path))"
        case .timedOut: "no answer from storekitd within the receive timeout (\(path))"
        case .protocolError(let error): "protocol error on \(path): \(error)"
        case .refused(let code, let message): "storekitd refused (\(code.name)): \(message)"
        }
    }
}

/// A blocking, framed connection to one of storekitd's sockets. Not thread-safe: one owner
/// (the CLI, the library's connection thread, a benchmark client) sends and receives.
public final class WireConnection {
    /// The socket, owned here: closed by `close()`, or when the connection is released.
    private var socket: FileDescriptor?
    public let path: String
    private var decoder = FrameDecoder(maximumBodySize: 64 << 20)
    /// poll() timeout of `receive()`: -1 (none) unless `setReceiveTimeout` was called.
    private var receiveTimeoutMilliseconds: Int32 = -1
    private var buffer = [UInt8](repeating: 0, count: 65_536)

    /// The socket's number, lent to poll it (the benchmark, tests): valid until `close()`; -1 after.
    public var fd: Int32 {
        switch socket {
        case .some(let socket): socket.rawValue
        case .none: -1
        }
    }

    public var closed: Bool { socket == nil }

    /// The protocol version messages are sent and read in: the one `hello` asked for.
    public private(set) var version = ProtocolVersion.current

    /// The app's products with hosted content, as the welcome listed them (version 3).
    public private(set) var hostedContent: [HostedContentRecord] = []

    /// Whether reads take descriptors the daemon passes (`openContent`); off, the kernel closes
    /// any that come (a plain `read`).
    public var acceptsDescriptors = false
    /// Descriptors received and not yet taken, oldest first: one came with each `contentFile`.
    private var receivedDescriptors: [Int32] = []

    /// Connects and performs the hello exchange; returns the daemon's welcome.
    public init(path: String) throws(ConnectionError) {
        self.path = path
        do {
            socket = FileDescriptor(adopting: try UnixSocket.connect(path: path))
        } catch {
            throw ConnectionError(.connect(error), path: path)
        }
    }

    public func close() {
        try? socket.take()?.close()
        for descriptor in receivedDescriptors { Glibc.close(descriptor) }
        receivedDescriptors = []
    }

    deinit {
        for descriptor in receivedDescriptors { Glibc.close(descriptor) }
    }

    /// The oldest descriptor received and not yet taken; the caller owns it.
    public func takeDescriptor() -> Int32? {
        receivedDescriptors.isEmpty ? nil : receivedDescriptors.removeFirst()
    }

    /// Sends hello and waits for welcome. `uid` is what the daemon saw in SO_PEERCRED.
    public func hello(app: String, version: UInt16 = ProtocolVersion.current) throws(ConnectionError)
        -> (uid: UInt32, storefront: String, storefrontID: String)
    {
        self.version = version
        do {
            try send(.hello(version: version, app: app))
        } catch {
            // The daemon may refuse a peer at once and close: its reason is already in our buffer.
            if case .result(_, let code, _, _, let message)? = try? receive() {
                throw ConnectionError(.refused(code, message), path: path)
            }
            throw error
        }
        switch try receive() {
        case .welcome(_, let uid, let storefront, let storefrontID, let content):
            hostedContent = content
            return (uid, storefront, storefrontID)
        case .result(_, let code, _, _, let message):
            throw ConnectionError(.refused(code, message), path: path)
        default:
            throw ConnectionError(.protocolError(WireError(.invalidValue("expected welcome"))), path: path)
        }
    }

    public func send(_ message: ClientMessage) throws(ConnectionError) {
        try sendRaw(Frame.encode(body: message.encode(version: version)))
    }

    /// Writes bytes as they are (tests use it for malformed frames).
    public func sendRaw(_ bytes: [UInt8]) throws(ConnectionError) {
        do {
            try UnixSocket.writeAll(fd, bytes)
        } catch {
            throw ConnectionError(.io(error), path: path)
        }
    }

    /// Blocks until one whole message arrives.
    public func receive() throws(ConnectionError) -> ServerMessage {
        while true {
            do {
                if let body = try decoder.next() { return try ServerMessage.decode(body, version: version) }
            } catch {
                throw ConnectionError(.protocolError(error), path: path)
            }
            // Wait in poll(POLLIN), not in read(): a reader blocked in read() is woken by the
            // daemon's every read of this socket too (the kernel signals free send space on the
            // same wait queue), a wake-up and a context switch for nothing; poll filters it.
            let readable: Bool
            do throws(Errno) {
                readable = try UnixSocket.waitUntilReadable(fd, timeoutMilliseconds: receiveTimeoutMilliseconds)
            } catch {
                throw ConnectionError(.io(error), path: path)
            }
            guard readable else { throw ConnectionError(.timedOut, path: path) }
            let accepts = acceptsDescriptors
            var descriptors: [Int32] = []
            let result = buffer.withUnsafeMutableBytes { raw in
                Result { () throws(Errno) -> IOResult in
                    accepts ? try UnixSocket.read(fd, into: raw, descriptors: &descriptors) : try UnixSocket.read(fd, into: raw)
                }
            }
            receivedDescriptors.append(contentsOf: descriptors)
            switch result {
            case .success(.transferred(let count)):
                buffer.withUnsafeBytes { decoder.append(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            case .success(.endOfFile):
                throw ConnectionError(.closed, path: path)
            case .success(.wouldBlock):
                // Only with a receive timeout set (the fd is blocking): nothing arrived in time.
                throw ConnectionError(.timedOut, path: path)
            case .failure(let errno):
                throw ConnectionError(.io(errno), path: path)
            }
        }
    }

    /// Makes `receive()` throw `.timedOut` when nothing arrives for `seconds` (SO_RCVTIMEO).
    public func setReceiveTimeout(_ seconds: Double) {
        receiveTimeoutMilliseconds = Int32(max(1, (seconds * 1000).rounded(.up)))
        _ = try? UnixSocket.setReceiveTimeout(fd, seconds: seconds)
    }

    /// Whether a whole message is already buffered (no syscall).
    public var hasBufferedMessage: Bool {
        var copy = decoder
        return (try? copy.next()) != nil
    }
}

/// Where clients find the daemon: `STOREKITD_SOCKET` / `STOREKITD_CONTROL_SOCKET`, else the
/// runtime-dir defaults of DESIGN.md (`/run/storekitd` as root, `$XDG_RUNTIME_DIR/storekitd` else).
public enum SocketLocation {
    /// The user's own daemon (`$XDG_RUNTIME_DIR/storekitd`) when its socket exists in a directory
    /// only this user (or root) controls, else the system daemon's `/run/storekitd` — so apps of
    /// every user find a system-wide storekitd, and none talks to a socket another user planted.
    ///
    /// The order is the daemon's own (`storekitd` without `--runtime-dir` picks the first of its
    /// user's directories): `$XDG_RUNTIME_DIR/storekitd`, then `/tmp/storekitd-UID` (where a
    /// user's daemon serves when `XDG_RUNTIME_DIR` is unset: su, sudo -u, ssh without a session,
    /// containers), then `/run/storekitd`.
    public static func runtimeDirectory(environment: [String: String]) -> String {
        if getuid() == 0 { return systemDirectory }
        for own in userDirectories(environment: environment, uid: getuid())
        where FileSystem.exists(own + "/storekitd.sock") && (try? PrivateDirectory.check(own)) != nil {
            return own
        }
        return systemDirectory
    }

    /// The system daemon's runtime directory.
    public static let systemDirectory = "/run/storekitd"

    /// A user's own daemon's runtime directories, in the order tried: the daemon serves in the
    /// first (`DaemonConfiguration.resolveRuntimeDirectory`), clients look in both.
    public static func userDirectories(environment: [String: String], uid: UInt32) -> [String] {
        var directories: [String] = []
        if let xdg = environment["XDG_RUNTIME_DIR"], xdg.hasPrefix("/") {
            directories.append((xdg.hasSuffix("/") ? String(xdg.dropLast()) : xdg) + "/storekitd")
        }
        directories.append(temporaryDirectory(uid: uid))
        return directories
    }

    /// Where a user's daemon serves without `XDG_RUNTIME_DIR`.
    public static func temporaryDirectory(uid: UInt32) -> String { "/tmp/storekitd-\(uid)" }

    /// The client sockets looked for, in order, for messages ("tried …"): a user directory that
    /// exists but that another user may change is passed over (never used), so not named.
    public static func clientSocketsTried(environment: [String: String]) -> [String] {
        if let explicit = environment["STOREKITD_SOCKET"] { return [explicit] }
        let users = getuid() == 0 ? [] : userDirectories(environment: environment, uid: getuid()).filter { directory in
            !FileSystem.exists(directory) || (try? PrivateDirectory.check(directory)) != nil
        }
        return (users + [systemDirectory]).map { $0 + "/storekitd.sock" }
    }

    public static func clientSocket(environment: [String: String]) -> String {
        environment["STOREKITD_SOCKET"] ?? runtimeDirectory(environment: environment) + "/storekitd.sock"
    }

    public static func controlSocket(environment: [String: String]) -> String {
        environment["STOREKITD_CONTROL_SOCKET"] ?? runtimeDirectory(environment: environment) + "/control.sock"
    }

    /// The process environment without Foundation.
    public static var processEnvironment: [String: String] {
        var result: [String: String] = [:]
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                result[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            pointer += 1
        }
        return result
    }
}
