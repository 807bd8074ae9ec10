#if canImport(Glibc)
import Glibc
#endif

/// The password database (NSS: /etc/passwd, and whatever else nsswitch.conf names), read with
/// the reentrant calls.
public enum UserDatabase {
    /// The name of the user `uid`, nil when there is none.
    public static func name(of uid: UInt32) -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name else {
            return nil
        }
        return String(cString: name)
    }

    /// The uid of the user called `name`, nil when there is none.
    public static func uid(named name: String) -> UInt32? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return entry.pw_uid
    }
}
