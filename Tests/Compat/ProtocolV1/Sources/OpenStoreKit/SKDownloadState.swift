import Foundation

/// The state of a download of hosted content, with StoreKit's raw values.
public enum SKDownloadState: Int, Sendable {
    /// The download has not started.
    case waiting = 0
    /// The download is in progress.
    case active = 1
    /// The download is paused.
    case paused = 2
    /// The download finished.
    case finished = 3
    /// The download failed.
    case failed = 4
    /// The download was cancelled.
    case cancelled = 5
}
