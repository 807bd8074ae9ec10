@_spi(StoreKitTest) import OpenStoreKit

extension SKTestSession {
    /// Makes `api` fail with `error` in this process from now on (nil: it succeeds again), as
    /// Apple's `setSimulatedError(_:forAPI:)`.
    ///
    /// The failure is this process's, as its store is (the latest session's daemon): a new
    /// session starts with none, and the bound session's end clears them.
    public func setSimulatedError<API: FailableStoreKitAPI>(_ error: API.Failure?, forAPI api: API) async throws {
        // Every API this module declares routes somewhere; one that does not is a bug here.
        guard let route = (api as? any SimulatedRoute)?.route else {
            preconditionFailure("\(API.self) has no OpenStoreKit entry point")
        }
        guard let error else {
            SimulatedFailures.set(nil, effect: nil, for: route)
            return
        }
        guard let effect = (error as? any SimulatedEffect)?.effect else {
            preconditionFailure("\(API.Failure.self) has no effect in OpenStoreKit")
        }
        SimulatedFailures.set(error, effect: effect, for: route)
    }

    /// The error `api` is made to fail with, nil when it is not, as Apple's `simulatedError(forAPI:)`.
    public func simulatedError<API: FailableStoreKitAPI>(forAPI api: API) async -> API.Failure? {
        guard let route = (api as? any SimulatedRoute)?.route else { return nil }
        return SimulatedFailures.failure(for: route) as? API.Failure
    }
}
