import StoreKitPosix
#if canImport(Glibc)
import Glibc
#endif

/// The claim of one daemon on the runtime directory whose sockets it binds: `storekitd.lock`
/// there, locked (`flock`) for the daemon's life and holding its pid and state directory. A
/// second daemon pointed at the same runtime directory (another state directory, the same
/// user's `make run` twice) is refused instead of replacing the first's sockets and root
/// certificate and deleting them when it stops, which left the first unreachable. A daemon
/// given its sockets by systemd takes no claim: the socket units own the directory.
struct RuntimeDirectoryLock: ~Copyable {
    private let file: FileDescriptor
    let path: String

    /// Why a claim could not be taken, in words for the person who started the daemon.
    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    static func take(in directory: String, stateDirectory: String) throws(Refusal) -> RuntimeDirectoryLock {
        let path = directory + "/storekitd.lock"
        let file: FileDescriptor
        do throws(Errno) {
            file = try FileDescriptor.open(path, .readWrite, options: [.create, .noFollow, .closeOnExec], permissions: 0o600)
        } catch {
            throw Refusal(description: "cannot open \(path): \(error)")
        }
        let locked: Bool
        do throws(Errno) {
            locked = try file.tryLockExclusive()
        } catch {
            throw Refusal(description: "cannot lock \(path): \(error)")
        }
        guard locked else {
            let holder = String(decoding: (try? file.read(atAbsoluteOffset: 0, count: 4096)) ?? [], as: UTF8.self)
                .split(separator: "\n").map(String.init)
            let who = holder.count >= 2 ? "pid \(holder[0]), state directory \(holder[1])" : "see \(path)"
            throw Refusal(description: "another storekitd serves in \(directory) (\(who)); stop it, or give this one "
                          + "its own --runtime-dir (a daemon with another state directory must not take over its sockets)")
        }
        let claim = Array("\(getpid())\n\(stateDirectory)\n".utf8)
        do throws(Errno) {
            try file.resize(to: 0)
            try file.write(claim, toAbsoluteOffset: 0)
        } catch {
            throw Refusal(description: "cannot write \(path): \(error)")
        }
        return RuntimeDirectoryLock(file: file, path: path)
    }

    /// Gives the claim up at stop: the file goes first, then the lock with the descriptor.
    consuming func release() {
        unlink(path)
        try? file.close()
    }
}
