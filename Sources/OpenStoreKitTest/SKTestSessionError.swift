import StoreKitWire

extension SKTestSession {
    /// How fast time passes for subscriptions in the test environment: Apple's cases and raw
    /// values (`.realTime`, `.monthlyRenewalEveryThirtySeconds`, …), storekitd's own type.
    public typealias TimeRate = StoreKitWire.TimeRate
}

/// Why a test session could not do what it was asked.
public enum SKTestSessionError: Error, Sendable, CustomStringConvertible {
    /// No configuration file by that name or at that path.
    case configurationNotFound(String)
    /// The file is not a StoreKit configuration file, or storekitd refused it.
    case invalidConfiguration(String)
    /// The session's storekitd could not be started.
    case cannotStart(String)
    /// The session's storekitd could not be reached.
    case cannotReach(String)
    /// storekitd refused the command (an unknown transaction, a product not in the catalogue, …).
    case refused(command: String, message: String)

    public var description: String {
        switch self {
        case .configurationNotFound(let name): "StoreKit configuration file not found: \(name)"
        case .invalidConfiguration(let reason): "invalid StoreKit configuration: \(reason)"
        case .cannotStart(let reason): "cannot start the test session's storekitd: \(reason)"
        case .cannotReach(let reason): "cannot reach the test session's storekitd: \(reason)"
        case .refused(let command, let message): "\(command): \(message)"
        }
    }
}
