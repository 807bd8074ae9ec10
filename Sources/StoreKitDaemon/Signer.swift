import StoreKitEngine
import StoreKitLedger
import StoreKitPosix
import StoreKitSigning
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

/// Signs what a unit of work tells clients, on threads of their own: the transactions of its
/// pushes and of its history and unfinished pages, and the receipts it answers with.
///
/// An ES256 JWS costs 40–90 µs with its encoding, most of a purchase's work on the serving thread
/// when it was signed there: every other client waited for it; a receipt of 5,000 purchases costs
/// about 100 ms. The loop now reads what each needs from the store (payloads, the receipt's
/// purchases), hands the unit's work here, and goes on serving; the unit's output waits in the
/// durability gate until both its commit-log record is on disk and its work is done
/// (`DurabilityGate`), so clients still hear of changes in the order they were made, each uid's
/// in its own lane.
///
/// One thread per online core, at least two. A job with a receipt or pages of many signatures is
/// **heavy**: at most all threads but one work on heavy jobs, so one uid's receipts and history
/// pages never hold back the signatures of another uid's purchases. The loop is woken after each
/// job.
final class Signer: @unchecked Sendable {
    /// One push or page to sign: its records, with the payload of each record to sign by its index.
    struct Push: Sendable {
        /// Where the message's frames are in the unit's output.
        var indices: [Int]
        var message: ServerMessage
        var payloads: [(index: Int, payload: JSONValue)]
    }

    /// A receipt to sign, for the `receipt` request `requestID`, whose reply frame is at `index`.
    struct Receipt: Sendable {
        var index: Int
        var requestID: UInt32
        var receipt: AppReceipt
        /// The queue it is of, and the queue's last sequence number it lists: it is kept under them.
        var queue: QueueKey
        var sequence: UInt64
    }

    /// A unit of work's part (one uid's) to sign.
    struct Job: Sendable {
        var ticket: UInt64
        var identity: SigningIdentity
        var pushes: [Push]
        var receipts: [Receipt] = []
        #if STOREKIT_TEST_HOOKS
        /// `debug-fail-signing` (test hooks): every signature fails, as a signing error would.
        var failsOnPurpose = false
        /// `debug-slow-signing` (test hooks): the signer's thread waits this long (ms) before it
        /// signs the job, as a thread starved of its core would.
        var delayMilliseconds: UInt32 = 0
        #endif

        var signatureCount: Int { pushes.reduce(0) { $0 + $1.payloads.count } }
        /// A receipt, or pages (`history`, `unfinished`) with more than `heavyPageSignatures`
        /// signatures to make: work a request asked for whose size grows with the queue, not the
        /// pushes of changes (which stay light whatever their number, so that `signingDepth`
        /// still holds the loop back when the signers fall behind on them).
        /// A page to encode whose JWS are all kept counts as heavy too: its encoding grows with it.
        var isHeavy: Bool {
            !receipts.isEmpty
                || pushes.reduce(0) { $0 + (Self.isPage($1.message) ? $1.payloads.count : 0) } > Self.heavyPageSignatures
                || pushes.contains { Self.isPage($0.message) && $0.payloads.isEmpty }
        }
        static let heavyPageSignatures = 8

        static func isPage(_ message: ServerMessage) -> Bool {
            if case .transactions = message { true } else { false }
        }
    }

    /// A signed job: each message's signed frame, the records signed (for the cache), the
    /// receipts made (to keep), failures; and the job itself, to be signed again when its leaf
    /// was revoked while it was signed.
    struct Done: Sendable {
        var job: Job
        var ticket: UInt64
        var identity: SigningIdentity
        var isHeavy: Bool
        var frames: [(indices: [Int], frame: [UInt8])]
        var signed: [TransactionRecord]
        var receipts: [(queue: QueueKey, sequence: UInt64, bytes: [UInt8])] = []
        var failures: [String]
    }

    var threadCount: Int { threads.threadCount }
    private let threads: WorkerThread
    /// Guarded by `threads`' lock.
    private var jobs: [Job] = []
    private var heavyJobs: [Job] = []
    private var done: [Done] = []
    private var busy = 0
    private var busyHeavy = 0
    private let onDone: @Sendable () -> Void
    private let logger: Logger

    /// `onDone` runs on a signing thread after each job (the loop's wake-up).
    init(threads count: Int = max(2, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))), logger: Logger,
         onDone: @escaping @Sendable () -> Void) {
        threads = WorkerThread("storekitd-sign", threads: max(2, count))
        self.logger = logger
        self.onDone = onDone
    }

    func start() {
        threads.start(next: { [self] _ in nextJob() }) { [self] job in
            #if STOREKIT_TEST_HOOKS
            if job.delayMilliseconds > 0 {
                // Said before the wait: tests wait for this line to know the job is on a thread.
                logger.info("Signing job \(job.ticket) (\(job.signatureCount) signatures) waits "
                            + "\(job.delayMilliseconds) ms first (debug-slow-signing)")
                usleep(job.delayMilliseconds * 1000)
            }
            #endif
            let result = Self.sign(job)
            threads.update {
                done.append(result)
                busy -= 1
                if job.isHeavy { busyHeavy -= 1 }
            }
            onDone()
        }
    }

    func submit(_ job: Job) {
        threads.update {
            if job.isHeavy { heavyJobs.append(job) } else { jobs.append(job) }
        }
    }

    /// Signed jobs, in the order they were finished.
    func takeDone() -> [Done] {
        threads.read {
            defer { done.removeAll() }
            return done
        }
    }

    /// Blocks until every submitted job is signed (at shutdown).
    func waitUntilIdle() {
        threads.wait { jobs.isEmpty && heavyJobs.isEmpty && busy == 0 }
    }

    func stop() { threads.stop() }

    /// The next job this thread may take (under the lock): a light one first; a heavy one while
    /// another thread stays free for light ones.
    private func nextJob() -> Job? {
        if !jobs.isEmpty {
            busy += 1
            return jobs.removeFirst()
        }
        if !heavyJobs.isEmpty, busyHeavy < threadCount - 1 {
            busy += 1
            busyHeavy += 1
            return heavyJobs.removeFirst()
        }
        return nil
    }

    static func sign(_ job: Job) -> Done {
        var result = Done(job: job, ticket: job.ticket, identity: job.identity, isHeavy: job.isHeavy, frames: [], signed: [],
                          failures: [])
        for push in job.pushes {
            guard var records = push.message.signableRecords else { continue }
            for (index, payload) in push.payloads {
                do {
                    #if STOREKIT_TEST_HOOKS
                    if job.failsOnPurpose { throw SigningError("signing fails on purpose (debug-fail-signing)") }
                    #endif
                    records[index].jwsRepresentation = try job.identity.signJWS(payload: payload.serializedBytes())
                    result.signed.append(records[index])
                } catch {
                    result.failures.append("transaction \(records[index].id): \(error)")
                }
            }
            result.frames.append((push.indices, Frame.encode(body: push.message.replacingRecords(records).encode())))
        }
        for work in job.receipts {
            let reply: ServerMessage
            do {
                #if STOREKIT_TEST_HOOKS
                if job.failsOnPurpose { throw SigningError("signing fails on purpose (debug-fail-signing)") }
                #endif
                let bytes = try job.identity.signReceipt(work.receipt)
                result.receipts.append((work.queue, work.sequence, bytes))
                reply = .receipt(requestID: work.requestID, data: bytes)
            } catch {
                result.failures.append("the receipt of uid \(work.queue.uid) for \(work.queue.app): \(error)")
                reply = .result(work.requestID, .internalError, "cannot sign: \(error)")
            }
            result.frames.append(([work.index], Frame.encode(body: reply.encode())))
        }
        return result
    }
}

extension ServerMessage {
    /// The records of an `updated` or `removed` push or a `transactions` page; nil for any other
    /// message.
    var signableRecords: [TransactionRecord]? {
        switch self {
        case .updated(let records), .removed(let records), .transactions(_, let records): records
        default: nil
        }
    }

    /// The same message with `records` in place of its own.
    func replacingRecords(_ records: [TransactionRecord]) -> ServerMessage {
        switch self {
        case .removed: .removed(records)
        case .transactions(let requestID, _): .transactions(requestID: requestID, transactions: records)
        default: .updated(records)
        }
    }
}
