import Foundation

/// An object a request tells when it finishes or fails; both callbacks default to doing nothing.
public protocol SKRequestDelegate: NSObjectProtocol {
    /// Tells the delegate that the request finished (after any response was delivered).
    func requestDidFinish(_ request: SKRequest)

    /// Tells the delegate that the request failed.
    func request(_ request: SKRequest, didFailWithError error: any Error)
}

extension SKRequestDelegate {
    /// Does nothing.
    public func requestDidFinish(_ request: SKRequest) {}

    /// Does nothing.
    public func request(_ request: SKRequest, didFailWithError error: any Error) {}
}
