import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import StoreKitPosix

/// Where apps find the root certificate they verify storekitd's signatures against.
///
/// In order: `$STOREKIT_ROOT_CERTIFICATE`; `root-certificate.pem` beside the socket the app
/// connects to (the daemon writes it into a runtime directory it made itself, as with
/// `make run`); `/var/lib/storekitd/root-certificate.pem` (the system daemon's state directory,
/// where it is written at every start). Beside the socket, a file is only taken from a directory
/// owned by this user or root that nobody else may write into, as for the socket itself; the
/// system path's directory belongs to the daemon's user and must not be writable by group or others.
///
/// Beside the root, wherever it was found, the daemon publishes the intermediate's list of
/// revoked signing certificates (`revoked-certificates.pem`, `RevocationList`); a list there
/// counts only if the intermediate signed it, so a forged one adds or hides nothing; an older
/// genuine one put back hides later revocations from a process that never read them, so the list
/// is taken from the same trusted place as the root.
public enum RootCertificateLocation {
    public static let fileName = "root-certificate.pem"
    public static let revocationsFileName = "revoked-certificates.pem"
    public static let system = "/var/lib/storekitd/root-certificate.pem"

    public static func candidates(socketPath: String?, environment: [String: String]) -> [String] {
        if let explicit = environment["STOREKIT_ROOT_CERTIFICATE"], !explicit.isEmpty { return [explicit] }
        var paths: [String] = []
        if let socketPath, let slash = socketPath.lastIndex(of: "/") {
            paths.append(String(socketPath[..<slash]) + "/" + fileName)
        }
        paths.append(system)
        return paths
    }

    /// The first candidate that exists, read and parsed.
    public static func load(socketPath: String?, environment: [String: String]) throws(SigningError) -> Certificate {
        try locate(socketPath: socketPath, environment: environment).certificate
    }

    /// Where the revocation list beside the root certificate at `rootPath` is.
    public static func revocationsPath(besideRoot rootPath: String) -> String {
        (rootPath.lastIndex(of: "/").map { String(rootPath[..<$0]) } ?? ".") + "/" + revocationsFileName
    }

    /// The revocation list published beside the root certificate at `rootPath`; nil when there is
    /// none (a daemon older than the lists). One that is there but cannot be read is an error: the
    /// caller trusts nothing rather than what may have been revoked.
    public static func revocations(besideRoot rootPath: String) throws(SigningError) -> RevocationList? {
        let path = revocationsPath(besideRoot: rootPath)
        let bytes: [UInt8]
        do throws(Errno) {
            bytes = try FileSystem.readContents(of: path)
        } catch .notFound {
            return nil
        } catch {
            throw SigningError("Cannot read the revocation list \(path): \(error)")
        }
        do {
            return try RevocationList(pem: bytes)
        } catch {
            throw SigningError("\(path): \(error)")
        }
    }

    /// The first candidate that exists, its path and its certificate.
    public static func locate(socketPath: String?, environment: [String: String]) throws(SigningError)
        -> (path: String, certificate: Certificate) {
        let paths = candidates(socketPath: socketPath, environment: environment)
        for path in paths where FileSystem.exists(path) {
            let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
            if environment["STOREKIT_ROOT_CERTIFICATE"] == nil {
                if path == system {
                    guard let info = try? FileSystem.status(of: directory, followingSymlinks: false),
                          info.st_mode & S_IFMT == S_IFDIR, info.st_mode & 0o022 == 0 else { continue }
                } else {
                    guard (try? PrivateDirectory.check(directory.isEmpty ? "/" : directory, uid: getuid())) != nil else { continue }
                }
            }
            do {
                return (path, try Certificate(pem: try FileSystem.readContents(of: path)))
            } catch let error as SigningError {
                throw SigningError("\(path): \(error)")
            } catch {
                throw SigningError("Cannot read the root certificate \(path): \(error)")
            }
        }
        throw SigningError("No storekitd root certificate at \(paths.joined(separator: " or ")) (set STOREKIT_ROOT_CERTIFICATE)")
    }
}

extension SignedDataVerifier {
    /// The root certificate (DER) that `RootCertificateLocation` finds for the socket of
    /// `$STOREKITD_SOCKET` (or none given).
    public static func rootCertificateFromEnvironment(socketPath: String? = nil) throws(SigningError) -> [UInt8] {
        let environment = ProcessInfo.processInfo.environment
        return try RootCertificateLocation.load(socketPath: socketPath ?? environment["STOREKITD_SOCKET"], environment: environment).der
    }
}
