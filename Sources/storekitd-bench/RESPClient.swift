import StoreKitPosix
#if canImport(Glibc)
import Glibc
#endif

/// A minimal blocking Redis client (RESP2) over a Unix socket, for the peer measurements.
final class RESPClient {
    indirect enum Reply: Equatable {
        case simple(String)
        case error(String)
        case integer(Int)
        case bulk([UInt8]?)
        case array([Reply]?)

        var string: String? {
            switch self {
            case .simple(let text): text
            case .bulk(let bytes?): String(decoding: bytes, as: UTF8.self)
            default: nil
            }
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let fd: Int32
    private var buffer: [UInt8] = []
    private var position = 0
    private var chunk = [UInt8](repeating: 0, count: 1 << 16)

    init(path: String) throws {
        fd = try UnixSocket.connect(path: path)
    }

    deinit { UnixSocket.close(fd) }

    static func encode(_ arguments: [String], into output: inout [UInt8]) {
        output.append(contentsOf: Array("*\(arguments.count)\r\n".utf8))
        for argument in arguments {
            let bytes = Array(argument.utf8)
            output.append(contentsOf: Array("$\(bytes.count)\r\n".utf8))
            output.append(contentsOf: bytes)
            output.append(contentsOf: [13, 10])
        }
    }

    func send(_ arguments: [String]) throws {
        var output: [UInt8] = []
        Self.encode(arguments, into: &output)
        try UnixSocket.writeAll(fd, output)
    }

    /// Sends many commands at once (pipelining).
    func sendPipelined(_ commands: [[String]]) throws {
        var output: [UInt8] = []
        for command in commands { Self.encode(command, into: &output) }
        try UnixSocket.writeAll(fd, output)
    }

    func command(_ arguments: [String]) throws -> Reply {
        try send(arguments)
        let reply = try read()
        if case .error(let message) = reply { throw Failure(description: "redis: \(message)") }
        return reply
    }

    private func fill() throws {
        if position > 0 && position == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            position = 0
        }
        // Waits in poll(), as WireConnection does (see there): same client I/O for both sides.
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&ready, 1, -1)
        let count = chunk.withUnsafeMutableBytes { raw in Glibc.read(fd, raw.baseAddress, raw.count) }
        guard count > 0 else { throw Failure(description: "redis connection closed") }
        buffer.append(contentsOf: chunk[0..<count])
    }

    private func line() throws -> String {
        while true {
            var index = position
            while index + 1 < buffer.count {
                if buffer[index] == 13 && buffer[index + 1] == 10 {
                    let text = String(decoding: buffer[position..<index], as: UTF8.self)
                    position = index + 2
                    return text
                }
                index += 1
            }
            try fill()
        }
    }

    func read() throws -> Reply {
        let header = try line()
        guard let kind = header.first else { throw Failure(description: "empty reply") }
        let rest = String(header.dropFirst())
        switch kind {
        case "+": return .simple(rest)
        case "-": return .error(rest)
        case ":": return .integer(Int(rest) ?? 0)
        case "$":
            let length = Int(rest) ?? -1
            if length < 0 { return .bulk(nil) }
            while buffer.count - position < length + 2 { try fill() }
            let bytes = Array(buffer[position..<(position + length)])
            position += length + 2
            return .bulk(bytes)
        case "*":
            let count = Int(rest) ?? -1
            if count < 0 { return .array(nil) }
            var items: [Reply] = []
            items.reserveCapacity(count)
            for _ in 0..<count { items.append(try read()) }
            return .array(items)
        default:
            throw Failure(description: "unexpected reply '\(header)'")
        }
    }
}

/// A private redis-server with the durable at-least-once settings of the comparison.
final class RedisPeer {
    let directory: String
    let socketPath: String
    let pid: pid_t

    init(directory: String) throws {
        self.directory = directory
        socketPath = directory + "/redis.sock"
        let arguments = ["redis-server", "--port", "0", "--unixsocket", socketPath, "--unixsocketperm", "700",
                         "--dir", directory, "--appendonly", "yes", "--appendfsync", "always", "--save", "",
                         "--daemonize", "no", "--logfile", directory + "/redis.log"]
        pid = try spawn("/usr/bin/redis-server", arguments)
        for _ in 0..<200 {
            if let client = try? RESPClient(path: socketPath), (try? client.command(["PING"])) != nil { return }
            usleep(25_000)
        }
        throw RESPClient.Failure(description: "redis-server did not start (is the redis-server package installed?)")
    }

    func stop() {
        // SIGKILL: the measurement is over and nothing of this redis is kept.
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }
}
