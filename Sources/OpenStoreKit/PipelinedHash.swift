import Foundation
import StoreKitSigning
import Synchronization

/// SHA-256 of a copy, computed on a thread of its own while the copy goes on: the copy hands over
/// each chunk it wrote and takes a free buffer back, so that reading and writing the next chunk
/// overlap hashing this one (hashing runs at about the speed of the copy itself). Chunks are hashed
/// in the order handed over; at most `depth` are in flight.
final class PipelinedHash: @unchecked Sendable {
    private struct State {
        var full: [(buffer: [UInt8], count: Int)] = []
        var free: [[UInt8]] = []
        var finished = false
        var done = false
    }

    private let state = Mutex(State())
    private let changed = NSCondition()
    private let stream = SHA256Stream()

    /// Starts the hashing thread with `depth` buffers of `size` bytes.
    init(depth: Int = 3, size: Int) {
        state.withLock { $0.free = (0..<depth).map { _ in [UInt8](repeating: 0, count: size) } }
        let thread = Thread { [self] in run() }
        thread.name = "OpenStoreKit.hash"
        thread.start()
    }

    /// A free buffer to read the next chunk into (waits while all are being hashed).
    func takeBuffer() -> [UInt8] {
        changed.lock()
        defer { changed.unlock() }
        while true {
            if let buffer = state.withLock({ $0.free.popLast() }) { return buffer }
            changed.wait()
        }
    }

    /// Hands over `count` bytes of `buffer` to hash (after everything handed over before).
    func hash(_ buffer: [UInt8], count: Int) {
        changed.lock()
        state.withLock { $0.full.append((buffer, count)) }
        changed.broadcast()
        changed.unlock()
    }

    /// Gives back a buffer not handed over (a stop or a failure before its chunk was written).
    func giveBack(_ buffer: [UInt8]) {
        changed.lock()
        state.withLock { $0.free.append(buffer) }
        changed.broadcast()
        changed.unlock()
    }

    /// Waits until every chunk handed over is hashed, ends the thread, and returns the digest.
    func finish() -> [UInt8] {
        changed.lock()
        state.withLock { $0.finished = true }
        changed.broadcast()
        while !state.withLock({ $0.done }) { changed.wait() }
        changed.unlock()
        return stream.finish()
    }

    private func run() {
        while true {
            changed.lock()
            var next: (buffer: [UInt8], count: Int)?
            while true {
                let (chunk, finished) = state.withLock { state -> ((buffer: [UInt8], count: Int)?, Bool) in
                    (state.full.isEmpty ? nil : state.full.removeFirst(), state.finished)
                }
                if let chunk { next = chunk; break }
                if finished {
                    state.withLock { $0.done = true }
                    changed.broadcast()
                    changed.unlock()
                    return
                }
                changed.wait()
            }
            changed.unlock()
            guard let (buffer, count) = next else { continue }
            buffer.withUnsafeBytes { stream.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            giveBack(buffer)
        }
    }
}
