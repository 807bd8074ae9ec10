import StoreKitPosix
import StoreKitSigning
import StoreKitStore
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

/// Signs the transactions of a unit of work's pushes on a thread of its own.
///
/// An ES256 JWS costs 40–90 µs with its encoding, most of a purchase's work on the serving thread
/// when it was signed there: every other client waited for it. The loop now builds each payload
/// (it reads the store), hands the unit's pushes here, and goes on serving; the unit's output
/// waits in the durability gate until both its commit-log record is on disk and its pushes are
/// signed (`DurabilityGate`), so clients still hear of changes in the order they were made.
/// Jobs are signed in the order they were submitted; the loop is woken after each.
final class Signer: @unchecked Sendable {
    /// One push to sign: its records, with the payload of each record to sign by its index.
    struct Push: Sendable {
        /// Where the push's frames are in the unit's output.
        var indices: [Int]
        var message: ServerMessage
        var payloads: [(index: Int, payload: JSONValue)]
    }

    /// A unit of work's pushes.
    struct Job: Sendable {
        var ticket: UInt64
        var identity: SigningIdentity
        var pushes: [Push]
        /// `debug-fail-signing` (test hooks): every signature fails, as a signing error would.
        var failsOnPurpose = false
        /// `debug-slow-signing` (test hooks): the signer's thread waits this long (ms) before it
        /// signs the job, as a thread starved of its core would.
        var delayMilliseconds: UInt32 = 0

        var signatureCount: Int { pushes.reduce(0) { $0 + $1.payloads.count } }
    }

    /// A signed job: each push's signed frame, the records signed (for the cache), failures.
    struct Done: Sendable {
        var ticket: UInt64
        var identity: SigningIdentity
        var frames: [(indices: [Int], frame: [UInt8])]
        var signed: [TransactionRecord]
        var failures: [String]
    }

    private let condition = Condition()
    /// Guarded by `condition`.
    private var jobs: [Job] = []
    private var done: [Done] = []
    private var busy = false
    private var running = true
    private let onDone: @Sendable () -> Void

    /// `onDone` runs on the signing thread after each job (the loop's wake-up).
    init(onDone: @escaping @Sendable () -> Void) {
        self.onDone = onDone
        NamedThread.start("storekitd-sign") { [self] in loop() }
    }

    func submit(_ job: Job) {
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Signed jobs, oldest first.
    func takeDone() -> [Done] {
        condition.lock()
        defer {
            done.removeAll()
            condition.unlock()
        }
        return done
    }

    /// Blocks until every submitted job is signed (at shutdown).
    func waitUntilIdle() {
        condition.lock()
        while !jobs.isEmpty || busy { condition.wait() }
        condition.unlock()
    }

    func stop() {
        condition.lock()
        running = false
        condition.broadcast()
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while running && jobs.isEmpty { condition.wait() }
            guard running || !jobs.isEmpty else {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            busy = true
            condition.unlock()
            if job.delayMilliseconds > 0 { usleep(job.delayMilliseconds * 1000) }
            let result = Self.sign(job)
            condition.lock()
            done.append(result)
            busy = false
            condition.broadcast()
            condition.unlock()
            onDone()
        }
    }

    static func sign(_ job: Job) -> Done {
        var result = Done(ticket: job.ticket, identity: job.identity, frames: [], signed: [], failures: [])
        for push in job.pushes {
            guard var records = push.message.pushedRecords else { continue }
            for (index, payload) in push.payloads {
                do {
                    if job.failsOnPurpose { throw SigningError("signing fails on purpose (debug-fail-signing)") }
                    records[index].jwsRepresentation = try job.identity.signJWS(payload: payload.serializedBytes())
                    result.signed.append(records[index])
                } catch {
                    result.failures.append("transaction \(records[index].id): \(error)")
                }
            }
            result.frames.append((push.indices, Frame.encode(body: push.message.replacingRecords(records).encode())))
        }
        return result
    }
}

extension ServerMessage {
    /// The records of an `updated` or `removed` push; nil for any other message.
    var pushedRecords: [TransactionRecord]? {
        switch self {
        case .updated(let records), .removed(let records): records
        default: nil
        }
    }

    /// The same push with `records` in place of its own.
    func replacingRecords(_ records: [TransactionRecord]) -> ServerMessage {
        if case .removed = self { .removed(records) } else { .updated(records) }
    }
}
