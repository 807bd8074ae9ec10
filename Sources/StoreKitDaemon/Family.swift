import StoreKitEngine
import StoreKitPosix

/// One `[Family]` section of storekitd.conf: buyers who share what one of them buys of a
/// family-shareable product (PaymentQueueEngine+Family.swift says how).
public struct Family: Sendable, Equatable {
    /// The members' user names, as written, in order.
    public var members: [String]
    /// Their uids, looked up when the configuration was read (again at each reload).
    public var uids: [UInt32]
    /// Where the section starts, for messages.
    public var file: String
    public var line: Int

    /// Reads one `[Family]` section: `Members=` lists user names separated by spaces; it may be
    /// given more than once (the lists add up), and an empty `Members=` empties the list.
    init(parsing section: ConfigFile.Section, file: String) throws(ConfigError) {
        var members: [(name: String, line: Int)] = []
        for entry in section.entries {
            switch entry.key {
            case "Members":
                if entry.value.isEmpty { members.removeAll() }
                for name in entry.value.split(whereSeparator: { $0 == " " || $0 == "\t" }) {
                    members.append((String(name), entry.line))
                }
            default:
                throw ConfigError(file: file, line: entry.line, message: "unknown key '\(entry.key)' in section [Family]")
            }
        }
        var names: [String] = []
        var uids: [UInt32] = []
        for member in members {
            guard let uid = UserDatabase.uid(named: member.name) else {
                throw ConfigError(file: file, line: member.line,
                                  message: "no user '\(member.name)' on this host: Members= lists user names")
            }
            if let index = uids.firstIndex(of: uid) {
                throw ConfigError(file: file, line: member.line,
                                  message: "'\(member.name)' is uid \(uid), already a member as '\(names[index])'")
            }
            names.append(member.name)
            uids.append(uid)
        }
        guard uids.count >= 2 else {
            throw ConfigError(file: file, line: section.line, message: "a [Family] needs at least two members (Members=)")
        }
        guard uids.count <= FamilyGroups.maximumMembers else {
            throw ConfigError(file: file, line: section.line,
                              message: "a [Family] has at most \(FamilyGroups.maximumMembers) members, this one \(uids.count)")
        }
        self.members = names
        self.uids = uids
        self.file = file
        self.line = section.line
    }

    /// The families as the engine takes them; a uid in two of them is an error (where the
    /// second names it).
    static func groups(_ families: [Family]) throws(ConfigError) -> FamilyGroups {
        var owner: [UInt32: Family] = [:]
        for family in families {
            for (name, uid) in zip(family.members, family.uids) {
                if let first = owner[uid] {
                    throw ConfigError(file: family.file, line: family.line,
                                      message: "'\(name)' (uid \(uid)) is already in the family at \(first.file):\(first.line); "
                                      + "a buyer is in one family at most")
                }
                owner[uid] = family
            }
        }
        return FamilyGroups(families.map(\.uids))
    }
}
