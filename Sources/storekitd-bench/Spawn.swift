import StoreKitPosix
#if canImport(Glibc)
import Glibc
#endif

/// Starts a child process with posix_spawn; returns its pid. Its output goes to `stdoutPath`
/// and `stderrPath` (files made or emptied), else to /dev/null.
func spawn(_ path: String, _ arguments: [String], environment: [String]? = nil, stdoutPath: String? = nil,
           stderrPath: String? = nil) throws -> pid_t {
    var pid: pid_t = 0
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    if let stdoutPath {
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    } else {
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    }
    posix_spawn_file_actions_addopen(&actions, 2, stderrPath ?? "/dev/null", stderrPath == nil ? O_WRONLY : O_WRONLY | O_CREAT | O_TRUNC,
                                     0o644)
    let argv = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    let env = (environment ?? currentEnvironment()).map { strdup($0) } + [nil]
    defer { for pointer in env { free(pointer) } }
    let status = posix_spawn(&pid, path, &actions, nil, argv, env)
    guard status == 0 else { throw BenchError("cannot start \(path): \(String(cString: strerror(status)))") }
    return pid
}

func currentEnvironment() -> [String] {
    var result: [String] = []
    var pointer = environ
    while let entry = pointer.pointee {
        result.append(String(cString: entry))
        pointer += 1
    }
    return result
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func monotonicNanoseconds() -> UInt64 { Monotonic.nanoseconds() }

/// Resident set size of `pid` in bytes, from /proc.
func residentBytes(of pid: pid_t) -> Int {
    guard let file = fopen("/proc/\(pid)/status", "r") else { return 0 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, 256, file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if text.hasPrefix("VmRSS:") {
            let digits = text.filter(\.isNumber)
            return (Int(digits) ?? 0) * 1024
        }
    }
    return 0
}

/// Raises the soft open-file limit to the hard limit (10,000 connections need more than 1024).
func raiseFileLimit() {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}
