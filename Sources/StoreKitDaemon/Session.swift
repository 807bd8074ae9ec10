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
    /// Frames queued to send, in order, from `head` on (those before it are sent); the first may
    /// be partly sent (`sentOfHead` bytes). A frame is kept as it was made, never copied into a
    /// buffer: the socket takes them in gathering writes (a history page of hundreds of
    /// kilobytes, copied into one growing buffer, was half of the serving loop's time under a
    /// flood of pages).
    private var frames: [QueuedFrame] = []
    private var head = 0
    private var sentOfHead = 0
    /// Bytes of `frames` not sent yet.
    private(set) var pendingOutput = 0

    /// A frame, and the descriptor passed (SCM_RIGHTS) with its first byte, if any.
    private struct QueuedFrame {
        var bytes: [UInt8]
        var descriptor: PassedDescriptor?
    }

    /// Frames one write gathers at most.
    static let framesPerWrite = 64
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
        frames = []
        head = 0
        sentOfHead = 0
        pendingOutput = 0
    }

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
        guard !encodedFrame.isEmpty else { return }
        if pendingOutput == 0 { lastSendProgress = Monotonic.milliseconds() }
        frames.append(QueuedFrame(bytes: encodedFrame, descriptor: descriptor))
        pendingOutput += encodedFrame.count
        account.queued += encodedFrame.count
    }

    /// Writes as much pending output as the socket takes. Returns false when the peer is gone.
    /// A write gathers up to `framesPerWrite` frames and stops before a frame a descriptor goes
    /// with: that frame starts the next write, which carries the descriptor, and the kernel keeps
    /// it with the frame's first byte for the peer's read.
    func send() -> Bool {
        while head < frames.count {
            let attached = sentOfHead == 0 ? frames[head].descriptor : nil
            var end = head + 1
            while end < frames.count, end - head < Self.framesPerWrite, frames[end].descriptor == nil { end += 1 }
            var buffers: [iovec] = []
            buffers.reserveCapacity(end - head)
            let result = gathering(head..<end, skipping: sentOfHead, into: &buffers) { buffers throws(Errno) -> IOResult in
                try socket?.write(gathering: buffers, passing: attached?.fd) ?? .endOfFile
            }
            switch result {
            case .success(.transferred(let count)):
                if attached != nil {
                    frames[head].descriptor = nil   // sent with the frame's first byte: closed when released
                    descriptorsSent += 1
                }
                advance(by: count)
                account.queued -= count
                lastSendProgress = Monotonic.milliseconds()
            case .success(.wouldBlock):
                compact()
                return true
            case .success(.endOfFile), .failure: return false
            }
        }
        frames.removeAll(keepingCapacity: frames.capacity <= 1_024)
        head = 0
        sentOfHead = 0
        return true
    }

    /// Runs `write` with the frames of `range` as buffers, the first from `skip` on: each frame's
    /// bytes are borrowed in place (one closure per frame, nested), not copied.
    private func gathering(_ range: Range<Int>, skipping skip: Int, into buffers: inout [iovec],
                           _ write: (UnsafeBufferPointer<iovec>) throws(Errno) -> IOResult) -> Result<IOResult, Errno> {
        guard let index = range.first else {
            return buffers.withUnsafeBufferPointer { all in Result { () throws(Errno) -> IOResult in try write(all) } }
        }
        return frames[index].bytes.withUnsafeBytes { raw in
            let from = index == range.lowerBound ? skip : 0
            buffers.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress! + from), iov_len: raw.count - from))
            return gathering(index + 1..<range.upperBound, skipping: 0, into: &buffers, write)
        }
    }

    /// Moves past `count` bytes sent, dropping the frames sent whole.
    private func advance(by count: Int) {
        pendingOutput -= count
        var left = count
        while left > 0, head < frames.count {
            let rest = frames[head].bytes.count - sentOfHead
            if left < rest {
                sentOfHead += left
                return
            }
            left -= rest
            frames[head] = QueuedFrame(bytes: [], descriptor: nil)   // its memory goes now, not at the next compaction
            head += 1
            sentOfHead = 0
        }
    }

    /// Drops the sent frames from the front once they are most of the queue.
    private func compact() {
        guard head >= 64, head * 2 >= frames.count else { return }
        frames.removeFirst(head)
        head = 0
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

