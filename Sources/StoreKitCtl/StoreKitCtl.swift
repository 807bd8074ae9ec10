// Every file of this module imports FoundationEssentials itself: since the module uses
// StoreKitSigning (sign-offer), a file that does not gets an autolink of the whole Foundation
// (and ICU) instead, which storekitd (the same binary) would then load (PurchaseFlowTests).
import FoundationEssentials
import Glibc
import StoreKitConnection
import StoreKitWire

/// A command-line mistake: printed with the usage, exit status 64.
struct UsageError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// What every subcommand is: its name, its help, how it turns its arguments into a control request,
/// and how it renders the answer as a table.
protocol Subcommand: Sendable {
    static var name: String { get }
    static var summary: String { get }
    static var usage: String { get }
    init(_ arguments: inout ArgumentList) throws(UsageError)
    var request: (command: ControlCommand, arguments: [String]) { get }
    func renderTable(_ json: JSONValue) -> String
    /// Binary output instead of text (`certificate --der`); nil for text.
    func renderBytes(_ json: JSONValue) -> [UInt8]?
    /// The answer of a command that needs no daemon (`sign-offer`); nil: ask the daemon (`request`).
    func answerLocally() throws(LocalFailure) -> JSONValue?
}

/// Why a command run without the daemon failed.
struct LocalFailure: Error {
    var message: String
}

extension Subcommand {
    func renderBytes(_ json: JSONValue) -> [UInt8]? { nil }
    func answerLocally() throws(LocalFailure) -> JSONValue? { nil }
}

enum OutputFormat: String {
    case table
    case json
}

public enum StoreKitCtl {
    static let subcommands: [any Subcommand.Type] = [
        StatusCommand.self, AppsCommand.self, ProductsCommand.self, ContentCommand.self, TransactionsCommand.self, BuyCommand.self,
        ApproveCommand.self, DeclineCommand.self, RefundCommand.self, ExpireCommand.self, RenewCommand.self,
        AutoRenewCommand.self, PriceIncreaseCommand.self, PriceConsentCommand.self, BillingIssueCommand.self, ResolveCommand.self, FailNextCommand.self,
        InterruptedCommand.self, AskToBuyCommand.self, StorefrontCommand.self, PromoteCommand.self,
        ClockCommand.self, EntitlementsCommand.self, HistoryCommand.self, SubscriptionsCommand.self,
        SwitchesCommand.self, ClearCommand.self, ResetCommand.self, BackupCommand.self,
        MigrateCommand.self, CertificateCommand.self, RotateKeyCommand.self, ReceiptCommand.self, SignOfferCommand.self, SignEligibilityCommand.self,
        SignCommerceCommand.self,
    ]

    static var globalUsage: String {
        var text = """
            Usage: storekitctl [--socket PATH] [-o table|json] COMMAND [ARGS]

            Administers storekitd through its control socket (root, the daemon's user or AdminGroup=).

            Commands:

            """
        let width = (subcommands.map { $0.name.count }.max() ?? 12) + 2
        for command in subcommands {
            text += "  " + command.name.padded(to: width) + command.summary + "\n"
        }
        text += """

            Options:
              --socket PATH   control socket (default: $STOREKITD_CONTROL_SOCKET, else the runtime dir)
              -o FORMAT       table (default) or json
              -h, --help      show help; COMMAND --help shows the command's help

            Exit status: 0 success, 1 failure, 64 usage error.

            """
        return text
    }

    public static func main(_ raw: [String]) -> Int32 {
        var arguments = ArgumentList(raw)
        var socket: String?
        var format = OutputFormat.table
        let command: any Subcommand
        // Once the command is known, a usage error shows that command's usage (as git and systemctl do).
        var usage = globalUsage
        do {
            // Global options may come before or after the command.
            socket = try arguments.option("--socket")
            if let text = try arguments.option("-o") ?? arguments.option("--output") {
                guard let parsed = OutputFormat(rawValue: text) else { throw UsageError("-o must be table or json") }
                format = parsed
            }
            if arguments.flag("-h") || arguments.flag("--help") {
                if let name = arguments.first, let type = subcommands.first(where: { $0.name == name }) {
                    print(type.usage)
                } else {
                    print(globalUsage, terminator: "")
                }
                return 0
            }
            guard let name = arguments.popFirst() else { throw UsageError("a COMMAND is required") }
            guard let type = subcommands.first(where: { $0.name == name }) else {
                throw UsageError("unknown command '\(name)'")
            }
            usage = type.usage + "\n"
            command = try type.init(&arguments)
            if let extra = arguments.first { throw UsageError("unexpected argument '\(extra)' for \(name)") }
        } catch {
            writeStandardError("storekitctl: \(error.message)\n\n\(usage)")
            return 64
        }
        do throws(LocalFailure) {
            if let answer = try command.answerLocally() {
                print(format == .json ? answer.serialized() : command.renderTable(answer), terminator: format == .json ? "\n" : "")
                return 0
            }
        } catch {
            writeStandardError("storekitctl: \(error.message)\n")
            return 1
        }
        let path = socket ?? SocketLocation.controlSocket(environment: ProcessInfo.processInfo.environment)
        do {
            let (name, commandArguments) = command.request
            let (connection, answer) = try Self.exchange(.control(requestID: 1, command: name.rawValue, arguments: commandArguments), path: path)
            var first: ServerMessage? = answer
            while true {
                let message = try first.take() ?? connection.receive()
                switch message {
                case .controlResult(_, let code, let message, let json):
                    if code != .ok {
                        if format == .json { print(json) }
                        writeStandardError("storekitctl: \(message)\n")
                        return 1
                    }
                    switch format {
                    case .json: print(json)
                    case .table:
                        // The daemon's documents are JSON; were one not, the table shows its text.
                        let object = (try? JSONValue.parse(Array(json.utf8))) ?? .string(json)
                        if let bytes = command.renderBytes(object) {
                            writeStandardOutput(bytes)
                        } else {
                            print(command.renderTable(object), terminator: "")
                        }
                    }
                    return 0
                case .result(_, let code, _, _, let message) where code != .ok:
                    writeStandardError("storekitctl: \(message)\n")
                    return 1
                default:
                    continue
                }
            }
        } catch {
            writeStandardError("storekitctl: \(error)\(Self.hint(for: error, path: path))\n")
            return 1
        }
    }

    /// Connects to `path`, says hello, sends `request` and returns the connection with the first
    /// message that came back. Once more on a new connection when the daemon closed the first
    /// without reading the request, so that it was never executed: a daemon being restarted (an
    /// upgrade restarts only the service; the listening socket stays, and the next daemon
    /// answers). Linux tells which: EPIPE when it had closed before we wrote, ECONNRESET when it
    /// closed with what we wrote unread, the end of the stream before the hello was answered.
    static func exchange(_ request: ClientMessage, path: String) throws(ConnectionError) -> (WireConnection, ServerMessage) {
        var attempt = 0
        while true {
            attempt += 1
            let connection = try WireConnection(path: path)
            var helloAnswered = false
            do throws(ConnectionError) {
                _ = try connection.hello(app: "")
                helloAnswered = true
                try connection.send(request)
                return (connection, try connection.receive())
            } catch {
                let unread = switch error.code {
                case .io(let errno): errno.rawValue == EPIPE || errno.rawValue == ECONNRESET
                case .closed: !helloAnswered
                default: false
                }
                guard unread, attempt == 1 else { throw error }
                usleep(100_000)
            }
        }
    }

    /// What to do about a connection the control socket refused, when the error alone does not say.
    static func hint(for error: any Error, path: String) -> String {
        guard let failure = error as? ConnectionError else { return "" }
        switch failure.code {
        case .connect(let errno) where errno.rawValue == EACCES || errno.rawValue == EPERM:
            return getuid() == 0 ? "" : " (the control socket is for root and the members of the daemon's AdminGroup= "
                + "(storekitd.conf(5)); run storekitctl as root, e.g. with sudo, or ask for that group)"
        case .refused(let code, _) where code == .permissionDenied:
            return " (only root, the daemon's own user and members of its AdminGroup= may use the control socket)"
        case .connect(let errno) where errno.rawValue == ENOENT:
            return " (no daemon serves there: start storekitd, or point STOREKITD_CONTROL_SOCKET or --socket at its control.sock)"
        default:
            return ""
        }
    }
}

/// Writes all of `bytes` to standard output (binary output: `certificate --der`), after what
/// `print` buffered.
func writeStandardOutput(_ bytes: [UInt8]) {
    fflush(nil)
    writeAll(bytes, to: STDOUT_FILENO)
}

/// Writes `text` to standard error.
func writeStandardError(_ text: String) {
    writeAll(Array(text.utf8), to: STDERR_FILENO)
}

/// write(2) until all of `bytes` is written, or the descriptor fails (nothing else to tell then).
private func writeAll(_ bytes: [UInt8], to descriptor: Int32) {
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { return }
        offset += written
    }
}

extension Error {
    var message: String {
        if let usage = self as? UsageError { return usage.message }
        return "\(self)"
    }
}
