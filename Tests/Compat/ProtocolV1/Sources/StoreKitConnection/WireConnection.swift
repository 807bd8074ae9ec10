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
    public let fd: Int32
    public let path: String
    private var decoder = FrameDecoder(maximumBodySize: 64 << 20)
    /// poll() timeout of `receive()`: -1 (none) unless `setReceiveTimeout` was called.
    private var receiveTimeoutMilliseconds: Int32 = -1
    private var buffer = [UInt8](repeating: 0, count: 65_536)
    public private(set) var closed = false

    /// Connects and performs the hello exchange; returns the daemon's welcome.
    public init(path: String) throws(ConnectionError) {
        self.path = path
        do {
            fd = try UnixSocket.connect(path: path)
        } catch {
            throw ConnectionError(.connect(error), path: path)
        }
    }

    deinit { close() }

    public func close() {
        if !closed {
            closed = true
            UnixSocket.close(fd)
        }
    }

    /// Sends hello and waits for welcome. `uid` is what the daemon saw in SO_PEERCRED.
    public func hello(app: String, version: UInt16 = ProtocolVersion.current) throws(ConnectionError)
        -> (uid: UInt32, storefront: String, storefrontID: String)
    {
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
        case .welcome(_, let uid, let storefront, let storefrontID):
            return (uid, storefront, storefrontID)
        case .result(_, let code, _, _, let message):
            throw ConnectionError(.refused(code, message), path: path)
        default:
            throw ConnectionError(.protocolError(WireError(.invalidValue("expected welcome"))), path: path)
        }
    }

    public func send(_ message: ClientMessage) throws(ConnectionError) {
        try sendRaw(Frame.encode(body: message.encode()))
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
                if let body = try decoder.next() { return try ServerMessage.decode(body) }
            } catch {
                throw ConnectionError(.protocolError(error), path: path)
            }
            // Wait in poll(POLLIN), not in read(): a reader blocked in read() is woken by the
            // daemon's every read of this socket too (the kernel signals free send space on the
            // same wait queue), a wake-up and a context switch for nothing; poll filters it.
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let polled = poll(&ready, 1, receiveTimeoutMilliseconds)
            if polled == 0 { throw ConnectionError(.timedOut, path: path) }
            if polled < 0 && errno != EINTR { throw ConnectionError(.io(Errno.current), path: path) }
            let result = buffer.withUnsafeMutableBytes { raw in
                Result { () throws(Errno) -> IOResult in try UnixSocket.read(fd, into: raw) }
            }
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
        var value = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
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
    public static func runtimeDirectory(environment: [String: String]) -> String {
        if getuid() == 0 { return "/run/storekitd" }
        if let xdg = environment["XDG_RUNTIME_DIR"], xdg.hasPrefix("/") {
            let own = xdg + "/storekitd"
            if access(own + "/storekitd.sock", F_OK) == 0, (try? PrivateDirectory.check(own)) != nil { return own }
        }
        return "/run/storekitd"
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
