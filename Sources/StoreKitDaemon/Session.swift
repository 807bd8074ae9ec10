import CPosix
import StoreKitPosix
import Synchronization
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

/// Which listening socket a connection came from; decides what it may ask.
public enum SocketKind: String, Sendable {
    case client
    case control
}

/// Bytes queued for all sessions together (`OutputBudget=`), kept by the sessions themselves.
final class OutputAccount {
    var queued = 0
}

/// One connected peer: its identity, its partial input and its pending output.
/// Owned by the serving loop; it owns its socket, closed only by `Server.close(_:)` (`closeSocket`).
final class Session {
    let token: UInt64
    /// Its socket; nil once closed.
    private var socket: Socket?
    /// The socket's number, for epoll and the FD store: valid until `closeSocket()`.
    let fd: Int32
    let kind: SocketKind
    let peer: PeerCredentials
    var decoder: FrameDecoder
    var output: [UInt8] = []
    var outputOffset = 0
    /// Descriptors to pass (SCM_RIGHTS) with the byte of `output` at `position`, in order.
    private var passing: [(position: Int, descriptor: PassedDescriptor)] = []
    /// The app this connection acts as, once the hello was accepted.
    var app: String?
    /// The protocol version its hello chose (`ProtocolVersion.served`): what it is sent is
    /// encoded in it, and what it sends decoded in it. The newest until the hello.
    var version = ProtocolVersion.current
    var subscribed = false
    var closeAfterSending = false
    var pollingWritable = false
    /// Monotonic ms when the current partial frame began arriving, nil when none is pending.
    var partialSince: Int64?
    /// The name under which this connection sits in the service manager's FD store.
    var storeName: String?
    /// Requests decoded and not yet answered (bounded by `MaxRequestsInFlight=`).
    var inFlight = 0
    /// Reading is paused: the session has `MaxRequestsInFlight=` requests waiting.
    var backlogged = false
    /// Reading is paused until then (ms): its uid sent `MaxRequestsPerUIDPerSecond=` requests.
    var pacedUntil: Int64?
    /// Its queued output passed `OutputHighWaterMark=`: it is not read, and its requests wait in
    /// `heldRequests`, until it has read its output.
    var heldForOutput = false
    var heldRequests: [ClientMessage] = []
    /// Output made for it by units of work still waiting in the durability gate.
    var outputInGate = 0
    /// When it was accepted (monotonic ms): it must say hello within `HelloTimeoutSec=`.
    let acceptedAt: Int64
    /// When its queued output last moved (or appeared on an empty queue), monotonic ms.
    var lastSendProgress: Int64
    private let account: OutputAccount
    /// Descriptors of content files made for its replies and not yet closed.
    let descriptorsHeld = DescriptorCount()
    /// Descriptors sent since its socket was last seen read to the end: the peer may not have
    /// taken them yet (they count against the daemon's user in the kernel until it does).
    var descriptorsSent = 0

    /// Descriptors that may be on their way to the peer: held here, or sent and perhaps unread.
    /// What was sent is known to be taken once the peer has read everything written (SIOCOUTQ 0).
    func descriptorsOnTheirWay() -> Int {
        if descriptorsSent > 0, storekit_unread_output(fd) == 0 { descriptorsSent = 0 }
        return descriptorsHeld.value.load(ordering: .relaxed) + descriptorsSent
    }

    init(token: UInt64, socket: consuming Socket, kind: SocketKind, peer: PeerCredentials, maximumFrameSize: Int, account: OutputAccount) {
        self.token = token
        self.fd = socket.rawValue
        self.socket = Optional(consume socket)
        self.kind = kind
        self.peer = peer
        self.decoder = FrameDecoder(maximumBodySize: maximumFrameSize)
        self.account = account
        acceptedAt = Monotonic.milliseconds()
        lastSendProgress = acceptedAt
    }

    deinit { account.queued -= pendingOutput }

    /// Drops what is queued and not sent (the connection is closing): it leaves the daemon's
    /// account at once, not when the last reference to the session goes.
    func discardOutput() {
        account.queued -= pendingOutput
        output = []
        outputOffset = 0
        passing = []
    }

    var pendingOutput: Int { output.count - outputOffset }

    /// Reads what the socket holds into `buffer` (end of file once closed).
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> IOResult {
        try socket?.read(into: buffer) ?? .endOfFile
    }

    /// Closes the socket (once; later calls do nothing) and returns what `close(2)` said.
    func closeSocket() -> Errno? { Socket.close(&socket) }

    /// Output queued or on its way through the gate: what `OutputHighWaterMark=` bounds.
    var queuedOutput: Int { pendingOutput + outputInGate }

    func enqueue(_ message: ServerMessage) {
        enqueue(encodedFrame: Frame.encode(body: message.encode(version: version)))
    }

    /// Queues a frame; `descriptor`, if any, is passed with its first byte.
    func enqueue(encodedFrame: [UInt8], passing descriptor: PassedDescriptor? = nil) {
        if pendingOutput == 0 { lastSendProgress = Monotonic.milliseconds() }
        if let descriptor, !encodedFrame.isEmpty { passing.append((output.count, descriptor)) }
        output.append(contentsOf: encodedFrame)
        account.queued += encodedFrame.count
    }

    /// Writes as much pending output as the socket takes. Returns false when the peer is gone.
    /// A write stops before a byte a descriptor goes with, and that byte starts the next write,
    /// which carries the descriptor: the kernel keeps it with that byte for the peer's read.
    func send() -> Bool {
        while outputOffset < output.count {
            let attached = passing.first.flatMap { $0.position == outputOffset ? $0.descriptor : nil }
            let end = passing.first(where: { $0.position > outputOffset })?.position ?? output.count
            let result = output.withUnsafeBytes { raw in
                Result { () throws(Errno) -> IOResult in
                    let bytes = UnsafeRawBufferPointer(rebasing: raw[outputOffset..<end])
                    guard let attached else { return try socket?.write(bytes) ?? .endOfFile }
                    return try socket?.write(bytes, passing: attached.fd) ?? .endOfFile
                }
            }
            switch result {
            case .success(.transferred(let count)):
                if attached != nil {
                    passing.removeFirst()   // sent with the first of these bytes: closed when released
                    descriptorsSent += 1
                }
                outputOffset += count
                account.queued -= count
                lastSendProgress = Monotonic.milliseconds()
            case .success(.wouldBlock): return true
            case .success(.endOfFile), .failure: return false
            }
        }
        output.removeAll(keepingCapacity: output.capacity <= 65_536)
        outputOffset = 0
        return true
    }
}

/// A descriptor the daemon opened to pass to a client (a hosted content file): closed when the
/// last reference goes, sent or not (the client holds its own duplicate once it is sent), and
/// counted meanwhile against its session's `descriptorsHeld`.
final class PassedDescriptor: @unchecked Sendable {
    let fd: Int32
    private let count: DescriptorCount

    init(adopting fd: Int32, countedIn count: DescriptorCount) {
        self.fd = fd
        self.count = count
        count.value.add(1, ordering: .relaxed)
    }

    deinit {
        _ = Glibc.close(fd)
        count.value.subtract(1, ordering: .relaxed)
    }
}

/// How many descriptors made for a session's replies are still open (queued, in the gate, or
/// being sent): what one connection may make the daemon hold is bounded by it.
final class DescriptorCount: Sendable {
    let value = Atomic<Int>(0)
}

