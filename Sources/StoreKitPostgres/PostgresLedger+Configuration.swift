import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

// What the configuration loader asks of a `Database=` connection string before the daemon uses
// it: whether libpq reads it, can be loaded, and whether the files holding its password are safe.

extension PostgresLedger {
    /// Why `conninfo` is no libpq connection string; nil when it is one (for the config loader).
    public static func problem(with conninfo: String) -> String? { PostgresConnection.problem(with: conninfo) }

    /// Why libpq cannot be loaded (LibPQ.swift), with the package to install; nil when it can.
    public static var libraryProblem: String? {
        guard case .failure(let error) = LibPQ.shared else { return nil }
        return "\(error.path): \(error.message)"
    }

    /// The password file named for `conninfo`: its `passfile=`, else `PGPASSFILE`; nil when
    /// neither is set (libpq's default `~/.pgpass` is the user's own business).
    public static func passwordFile(of conninfo: String, environment: [String: String]) -> String? {
        PostgresConnection.options(conninfo)["passfile"] ?? environment["PGPASSFILE"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Why libpq would not use the password file at `path`, as libpq checks it (it says so on
    /// standard error, where nobody reads it, and connects without a password); nil when it
    /// would. A missing file is said too: the configuration names it.
    public static func passwordFileProblem(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return "\(path) cannot be read: \(String(cString: strerror(errno)))" }
        guard info.st_mode & S_IFMT == S_IFREG else { return "\(path) is not a regular file; libpq ignores it" }
        guard info.st_mode & 0o077 == 0 else {
            return "\(path) has group or world access (mode \(String(info.st_mode & 0o7777, radix: 8))); libpq ignores such a "
                + "file: make it 0600, owned by storekitd's user"
        }
        return nil
    }

    /// Why the service file that `conninfo`'s `service=` reads is unsafe for the password it
    /// holds, as for `Database=` itself: every user may read it (or the password file it names
    /// would be ignored by libpq); nil when no service is named, or its files are fine. The
    /// files are libpq's: `PGSERVICEFILE` (else `~/.pg_service.conf`), then
    /// `PGSYSCONFDIR/pg_service.conf` (Debian's default `/etc/postgresql-common`).
    public static func serviceFileProblem(of conninfo: String, environment: [String: String]) -> String? {
        guard let service = PostgresConnection.options(conninfo)["service"], !service.isEmpty else { return nil }
        var files: [String] = []
        if let own = environment["PGSERVICEFILE"], !own.isEmpty {
            files.append(own)
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            files.append(home + "/.pg_service.conf")
        }
        files.append((environment["PGSYSCONFDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/etc/postgresql-common") + "/pg_service.conf")
        for file in files {
            guard let bytes = try? FileSystem.readContents(of: file, followingSymlinks: true) else { continue }
            let text = String(decoding: bytes, as: UTF8.self)
            var inService = false
            for rawLine in text.split(separator: "\n") {
                let line = rawLine.trimmingWhitespace()
                if line.hasPrefix("[") { inService = line == "[\(service)]"; continue }
                guard inService, let equals = line.firstIndex(of: "=") else { continue }
                let key = line[..<equals].trimmingWhitespace()
                let value = line[line.index(after: equals)...].trimmingWhitespace()
                if key == "password", !value.isEmpty {
                    var info = stat()
                    if stat(file, &info) == 0, info.st_mode & 0o004 != 0 {
                        return "service \(service) in \(file) holds a password, and every user may read that file "
                            + "(mode \(String(info.st_mode & 0o7777, radix: 8))): keep the password in a password file instead"
                    }
                } else if key == "passfile", let problem = passwordFileProblem(value) {
                    return "the password file of service \(service) in \(file): \(problem)"
                }
            }
        }
        return nil
    }

    /// The database `conninfo` names, for messages (never its password).
    public static func describe(_ conninfo: String) -> String { PostgresConnection.describe(conninfo) }
}
