/// A payment queue: one app of one user (uid; in a fleet, the account the uid stands for).
public struct QueueKey: Hashable, Sendable {
    public let uid: UInt32
    public let app: String
    public init(uid: UInt32, app: String) {
        self.uid = uid
        self.app = app
    }
}
