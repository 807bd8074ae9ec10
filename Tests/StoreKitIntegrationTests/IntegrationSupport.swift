import Foundation
import StoreKitConnection
import StoreKitTestSupport
import StoreKitWire
import Testing
#if canImport(Glibc)
import Glibc
#endif

// Shared helpers of the end-to-end suites: a request/reply client over the real wire protocol,
// `storekitctl -o json` parsing, a long-running example app. Waiting is `eventually` (StoreKitTestSupport).

/// The sample app of `config/` and its products.
enum Sample {
    static let app = "com.example.game"
    static let coins = "com.example.game.coins100"
    static let levelPack = "com.example.game.level_pack"
    static let monthly = "com.example.game.premium.monthly"
    static let yearly = "com.example.game.premium.yearly"
    static let seasonPass = "com.example.game.season_pass"
}

/// How long any single wait of these tests may take before it counts as a failure (not a hang).
let receiveTimeout: Double = 10

/// How long one run of the example app (`buy`, `restore`, `list`) may take; it needs well under a second.
let appTimeout: Double = 10

/// A test failure with a message, for conditions `#require` cannot express.
struct IntegrationFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

// MARK: - storekitctl -o json

/// One row of `storekitctl transactions -o json`.
struct ListedTransaction: Equatable, CustomStringConvertible {
    var id: String
    var state: String
    var productIdentifier: String
    var quantity: Int
    var originalTransactionIdentifier: String?
    var uid: Int
    var app: String
    var sequence: Int
    var finished: Bool
    var errorCode: Int?

    init(json: Any) throws {
        guard let object = json as? [String: Any],
              let id = object["transactionIdentifier"] as? String,
              let state = object["state"] as? String,
              let product = object["productIdentifier"] as? String,
              let quantity = object["quantity"] as? Int,
              let uid = object["uid"] as? Int,
              let app = object["app"] as? String,
              let sequence = object["sequence"] as? Int,
              let finished = object["finished"] as? Bool
        else { throw IntegrationFailure("not a transaction: \(json)") }
        self.id = id
        self.state = state
        productIdentifier = product
        self.quantity = quantity
        originalTransactionIdentifier = object["originalTransactionIdentifier"] as? String
        self.uid = uid
        self.app = app
        self.sequence = sequence
        self.finished = finished
        errorCode = (object["error"] as? [String: Any])?["code"] as? Int
    }

    var description: String { "\(id) \(productIdentifier) \(state)\(finished ? " finished" : "") seq \(sequence) uid \(uid) \(app)" }
}

extension DaemonProcess {
    /// `storekitctl transactions [ARGS] -o json`, parsed.
    func transactions(_ arguments: [String] = []) throws -> [ListedTransaction] {
        let json = try ctlJSON(["transactions"] + arguments)
        guard let array = json as? [Any] else { throw IntegrationFailure("transactions is not an array: \(json)") }
        return try array.map(ListedTransaction.init(json:))
    }

    /// `storekitctl buy APP PRODUCT [--uid N]`: a purchase made outside the app, left unfinished.
    func buyOutsideApp(_ product: String, app: String = Sample.app, uid: UInt32? = nil) throws -> ListedTransaction {
        var arguments = ["buy", app, product]
        if let uid { arguments += ["--uid", String(uid)] }
        return try ListedTransaction(json: ctlJSON(arguments))
    }

    /// Makes the temp dir and the runtime dir traversable by other users (mkdtemp makes 0700).
    func openDirectoriesToOtherUsers() {
        chmod(directory.path, 0o755)
        chmod(runtimeDirectory, 0o755)
    }

    var isRunning: Bool { process?.isRunning ?? false }
}

// MARK: - Example app output

/// The JSON lines the example app printed.
func events(_ output: String) -> [[String: Any]] {
    output.split(separator: "\n").compactMap { line in
        (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }
}

/// The transaction events (`event: updated`) the example app printed.
func updates(_ output: String) -> [[String: Any]] {
    events(output).filter { $0["event"] as? String == "updated" }
}

/// The ids of the example app's ledger, one per line (`ID PRODUCT QUANTITY`).
func ledgerIDs(_ path: String) -> [String] {
    let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    return text.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }
}

/// A long-running child (the example app's `observe`), its stdout collected in a file.
final class RunningProcess {
    let process = Process()
    private let outputPath: String
    private let errorPath: String
    private let exited = DispatchSemaphore(value: 0)

    /// `input`: the child's standard input (default: none, `/dev/null`).
    init(_ executable: String, _ arguments: [String], environment: [String: String], input: Pipe? = nil) throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("run-\(UUID().uuidString)").path
        outputPath = base + ".out"
        errorPath = base + ".err"
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
        process.standardInput = input ?? FileHandle.nullDevice
        let exited = self.exited
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: outputPath)
        try? FileManager.default.removeItem(atPath: errorPath)
    }

    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }
    var errorOutput: String { (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "" }

    /// Waits until the output satisfies `condition` (or the process exits, or the deadline passes).
    @discardableResult
    func waitForOutput(timeout: Double = receiveTimeout, _ condition: (String) -> Bool) -> Bool {
        eventually(timeout: timeout) { condition(output) || !process.isRunning } && condition(output)
    }

    /// SIGKILL by pid (a crash of the app) and wait for it.
    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        exited.wait()
    }
}

// MARK: - Raw protocol client

/// What the daemon answered to one request, with the pushes that arrived before the answer.
struct Reply {
    var pushes: [ServerMessage]
    var code: ResultCode
    var detail: Int32
    var value: UInt64
    var message: String

    /// Transactions of the `updated` pushes, in order.
    var updated: [TransactionRecord] {
        pushes.flatMap { message -> [TransactionRecord] in
            if case .updated(let records) = message { return records }
            return []
        }
    }

    var removed: [TransactionRecord] {
        pushes.flatMap { message -> [TransactionRecord] in
            if case .removed(let records) = message { return records }
            return []
        }
    }
}

extension WireConnection {
    /// Makes a blocked `receive()` give up after `seconds`, so that a silent daemon fails a test.
    func setReceiveTimeout(_ seconds: Double) {
        var value = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Whether the daemon closed this connection (end of file or reset) within `timeout` seconds;
    /// false when more data arrived instead or the connection stayed open.
    func closedByPeer(within timeout: Double = receiveTimeout) -> Bool {
        if hasBufferedMessage { return false }
        var closed = false
        eventually(timeout: timeout) {
            var byte: UInt8 = 0
            let count = recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return false }   // open, nothing yet
            closed = count == 0 || (count < 0 && errno == ECONNRESET)
            return true
        }
        return closed
    }
}

/// The debug control commands of a daemon started with `--enable-test-hooks`, each answered
/// with its result code.
final class TestHooks {
    private let control: WireConnection
    private var requestID: UInt32 = 0

    init(_ daemon: DaemonProcess) throws {
        control = try WireConnection(path: daemon.controlSocket)
        _ = try control.hello(app: "")
    }

    func run(_ command: String, _ arguments: [String]) throws -> ResultCode {
        requestID += 1
        try control.send(.control(requestID: requestID, command: command, arguments: arguments))
        while true { if case .controlResult(requestID, let code, _, _) = try control.receive() { return code } }
    }
}

/// A protocol client on the client socket: numbered requests, pushes collected with each answer.
final class Client {
    let connection: WireConnection
    /// The uid the daemon saw in SO_PEERCRED (from the welcome).
    private(set) var uid: UInt32 = 0
    private var nextRequestID: UInt32 = 1

    /// Connects and says hello as `app`. `asUID` connects with this thread's effective uid set to
    /// it, so that SO_PEERCRED carries it (root only).
    /// `version`: the protocol version the hello asks for (messages are sent and read in it).
    init(_ daemon: DaemonProcess, app: String = Sample.app, asUID: UInt32? = nil,
         version: UInt16 = ProtocolVersion.current) throws {
        if let asUID {
            connection = try connectWithThreadUID(asUID, path: daemon.clientSocket)
        } else {
            connection = try WireConnection(path: daemon.clientSocket)
        }
        connection.setReceiveTimeout(receiveTimeout)
        uid = try connection.hello(app: app, version: version).uid
    }

    func close() { connection.close() }

    func makeRequestID() -> UInt32 {
        defer { nextRequestID += 1 }
        return nextRequestID
    }

    /// Sends one request and reads until its result.
    func request(_ make: (UInt32) -> ClientMessage) throws -> Reply {
        let id = makeRequestID()
        try connection.send(make(id))
        return try reply(to: id)
    }

    /// Reads until the result of `requestID`, keeping what came before it.
    func reply(to requestID: UInt32) throws -> Reply {
        var pushes: [ServerMessage] = []
        while true {
            let message = try connection.receive()
            if case .result(let id, let code, let detail, let value, let text) = message, id == requestID {
                return Reply(pushes: pushes, code: code, detail: detail, value: value, message: text)
            }
            pushes.append(message)
        }
    }

    /// Registers as an observer; returns the snapshot of unfinished transactions.
    func subscribe() throws -> [TransactionRecord] {
        let reply = try request { .subscribe(requestID: $0) }
        guard reply.code == .ok else { throw IntegrationFailure("subscribe refused: \(reply.code.name) \(reply.message)") }
        return reply.updated
    }

    func addPayment(_ product: String, quantity: Int32 = 1, key: String = UUID().uuidString,
                    hasRequestData: Bool = false) throws -> Reply {
        try request { id in
            .addPayment(.init(requestID: id, key: key, productID: product, quantity: quantity,
                              hasRequestData: hasRequestData))
        }
    }

    func finish(_ transactionID: UInt64) throws -> Reply {
        try request { .finish(requestID: $0, transactionID: transactionID) }
    }

    func restore() throws -> Reply {
        try request { .restore(requestID: $0, applicationUsername: nil) }
    }

    /// Buys `product` and returns the purchased transaction (checked: `purchased`, answered ok).
    func buy(_ product: String) throws -> TransactionRecord {
        let reply = try addPayment(product)
        guard reply.code == .ok, let record = reply.updated.last, record.state == .purchased else {
            throw IntegrationFailure("purchase of \(product) failed: \(reply)")
        }
        return record
    }

    /// The `unfinished` request: this connection's (uid, app) queue, answered with a list.
    func unfinished() throws -> [TransactionRecord] {
        let id = makeRequestID()
        try connection.send(.unfinished(requestID: id))
        while true {
            switch try connection.receive() {
            case .transactions(let requestID, let records) where requestID == id:
                return records
            case .result(let requestID, let code, _, _, let message) where requestID == id:
                throw IntegrationFailure("unfinished refused: \(code.name) \(message)")
            default:
                continue
            }
        }
    }

    /// The next push (an update that is not an answer).
    func nextPush() throws -> ServerMessage { try connection.receive() }
}

// MARK: - Connecting as another uid

/// Connects to `path` with the calling thread's effective uid switched to `uid` for the connect
/// only, so the daemon's SO_PEERCRED sees `uid`. Linux credentials are per thread; the raw
/// `setresuid` syscall (unlike glibc's wrapper) changes only this thread, so tests running in
/// parallel on other threads stay root. Needs root.
func connectWithThreadUID(_ uid: UInt32, path: String) throws -> WireConnection {
    try setThreadEffectiveUID(uid)
    defer { try? setThreadEffectiveUID(0) }
    return try WireConnection(path: path)
}

private func setThreadEffectiveUID(_ uid: UInt32) throws {
    typealias SyscallFunction = @convention(c) (Int, Int, Int, Int) -> Int
    #if arch(x86_64)
    let setresuidNumber = 117
    #elseif arch(arm64)
    let setresuidNumber = 147
    #else
    throw IntegrationFailure("setresuid syscall number unknown on this architecture")
    #endif
    guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "syscall") else {
        throw IntegrationFailure("cannot find syscall(2)")
    }
    let syscall = unsafeBitCast(symbol, to: SyscallFunction.self)
    // setresuid(-1, uid, -1): only the effective uid changes; real and saved stay 0, so it can go back.
    guard syscall(setresuidNumber, -1, Int(uid), -1) == 0, geteuid() == uid else {
        throw IntegrationFailure("setresuid(-1, \(uid), -1) failed: errno \(errno)")
    }
}

// MARK: - A value shared by test threads

/// A value shared by a test's threads under an `NSLock`. Tests use it instead of
/// `Synchronization.Mutex`, whose contended path (a PI futex handed over in the uninstrumented
/// runtime) ThreadSanitizer cannot see, so it reports the protected value as raced
/// (scripts/test-sanitize.sh); NSLock's pthread mutex it understands.
final class LockedValue<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
