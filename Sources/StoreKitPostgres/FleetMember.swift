#if canImport(Glibc)
import Glibc
#endif
import StoreKitPosix

/// Who this daemon is in a fleet sharing one PostgreSQL ledger: the host's name and how a local
/// uid becomes an account (`[Store] HostName=`, `AccountFrom=`). A uid means nothing on another
/// machine; an account does: purchases belong to (account, app) and follow it to every host.
public struct FleetMember: Sendable, Equatable {
    /// How a local uid is turned into the account its purchases belong to.
    public enum AccountSource: String, Sendable, CaseIterable {
        /// The user name from the password database (NSS: files, LDAP, SSSD): the same person on
        /// every host of a fleet that shares its user directory. A uid without a name is `#UID`.
        case userName = "user-name"
        /// The uid itself (`#UID`): for fleets whose uids are the same everywhere but whose names are not.
        case uid
    }

    /// This host's name in the ledger (its queues, its deliveries): by default the machine id.
    public var host: String
    public var accountFrom: AccountSource

    public init(host: String, accountFrom: AccountSource = .userName) {
        self.host = host
        self.accountFrom = accountFrom
    }

    /// Longest host name and account, in bytes (they are keys of every row).
    public static let nameBytes = 255

    /// Why `name` cannot name a host; nil when it can (printable, no spaces, 1…255 bytes).
    public static func problem(withHostName name: String) -> String? {
        guard !name.isEmpty, name.utf8.count <= nameBytes else { return "a host name is 1 to \(nameBytes) bytes" }
        guard name.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F }) else {
            return "a host name has no spaces or control characters"
        }
        return nil
    }

    /// The host name when `HostName=` sets none: the machine id, else "localhost".
    public static var defaultHost: String { machineID() ?? "localhost" }

    /// The machine id (`/etc/machine-id`), the default host name; nil when there is none.
    public static func machineID(path: String = "/etc/machine-id") -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 64)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return nil }
        let id = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            .trimmingSuffix()
        return id.isEmpty ? nil : id
    }
}

/// Local uids and fleet accounts, both ways, cached for the daemon's life (a user database
/// lookup can go over the network with LDAP/SSSD). An account with no local user (it uses the
/// app on other hosts only) gets a stand-in uid from a range no user has (`standInUIDs`), so
/// that the engine can still fire its renewals and refunds; no client can ever be that uid.
final class AccountDirectory {
    let source: FleetMember.AccountSource
    private var accounts: [UInt32: String] = [:]
    private var uids: [String: UInt32] = [:]
    private var nextStandIn = standInUIDs.lowerBound

    /// Above every uid Linux hands out (and below `(uid_t)-1`, "no uid").
    static let standInUIDs: ClosedRange<UInt32> = 0xFFF0_0000...0xFFFF_FFFD

    init(source: FleetMember.AccountSource) { self.source = source }

    func account(of uid: UInt32) -> String {
        if let known = accounts[uid] { return known }
        let account = source == .userName ? (UserDatabase.name(of: uid) ?? "#\(uid)") : "#\(uid)"
        remember(uid: uid, account: account)
        return account
    }

    func uid(of account: String) -> UInt32 {
        if let known = uids[account] { return known }
        var uid: UInt32?
        if account.hasPrefix("#") {
            uid = UInt32(account.dropFirst())
        } else if source == .userName {
            uid = UserDatabase.uid(named: account)
        }
        if uid == nil || Self.standInUIDs.contains(uid!) {
            uid = nextStandIn
            nextStandIn = min(nextStandIn + 1, Self.standInUIDs.upperBound)
        }
        remember(uid: uid!, account: account)
        return uid!
    }

    private func remember(uid: UInt32, account: String) {
        accounts[uid] = account
        uids[account] = uid
    }
}
