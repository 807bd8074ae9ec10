import Foundation
import StoreKitSigning
import StoreKitWire

/// The store as a whole: whether this user can pay, and syncing with it (StoreKit 2).
public enum AppStore {
    /// Whether this user may make payments (always true for storekitd's simulated store).
    public static var canMakePayments: Bool { true }

    /// The identifier of this device for the app, which the store's device verification is made
    /// with (`Transaction.deviceVerification`, `AppTransaction.deviceVerification`): on Linux,
    /// made from the machine id (`/etc/machine-id`) and the app identifier, so each app of a
    /// machine has its own. Nil when the machine has no machine id.
    public static var deviceVerificationID: UUID? {
        guard let bytes = try? DeviceIdentifier.forApp(StoreConnection.shared.resolvedAppIdentifier) else { return nil }
        return UUID(uuidString: Digest.uuidString(bytes))
    }

    /// Synchronizes the app's transactions with the store.
    ///
    /// storekitd's ledger is the store itself, so there is nothing to pull: this is a round trip
    /// that throws `StoreKitError.networkError` when the store cannot be reached. Read
    /// `Transaction.currentEntitlements` afterwards, as after Apple's `sync()`.
    public static func sync() async throws {
        try SimulatedFailures.throwIfSet(.appStoreSync)
        do {
            _ = try await StoreConnection.shared.reply { .ping(requestID: $0) }
        } catch {
            throw StoreKitError(error)
        }
    }
}
