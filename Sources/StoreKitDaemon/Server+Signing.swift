import StoreKitPosix
import StoreKitSigning
import StoreKitEngine
import StoreKitWire

// Signing a unit of work's pushes, pages and receipts off the serving thread: the loop builds
// the payloads and receipts (they read the store) and fills in what the caches hold; the
// signer's threads make the rest.

extension Server {
    /// Takes `output`'s pushes, pages and receipts to sign. Pushes and pages whose records are all
    /// signed already (the cache: a `removed` push after a finish) are encoded here; the others
    /// become the returned job, nil when there are none.
    func signingJob(for output: inout UnitOutput) -> Signer.Job? {
        var pushes: [Signer.Push] = []
        var encodedHere: [(indices: [Int], frame: [UInt8])] = []
        for (indices, message) in output.takePendingSignatures() {
            guard var records = message.signableRecords else { continue }
            var payloads: [(index: Int, payload: JSONValue)] = []
            var filled = false
            for index in records.indices where PaymentQueueEngine.isSignable(records[index]) {
                if let cached = proof.cachedJWS(for: records[index]) {
                    records[index].jwsRepresentation = cached
                    filled = true
                    continue
                }
                do {
                    if let payload = try proof.payload(for: records[index], engine: engine, configuration: configuration) {
                        payloads.append((index, payload))
                    }
                } catch {
                    logger.error("Failed to sign transaction \(records[index].id): \(error)", id: .signingKey)
                }
            }
            let message = message.replacingRecords(records)
            if !payloads.isEmpty || (filled && Signer.Job.isPage(message) && records.count > Self.pageRecordsEncodedOnTheLoop) {
                // A page of many records is encoded by a signer's thread even when it has nothing
                // to sign: its encoding grows with the page (a sixth of the loop under a flood of
                // history pages, all of their JWS kept).
                pushes.append(Signer.Push(indices: indices, message: message, payloads: payloads))
            } else if filled {
                encodedHere.append((indices, Frame.encode(body: message.encode())))
            }
        }
        _ = output.replaceFrames(encodedHere)
        let receipts = output.takePendingReceipts()
        guard !pushes.isEmpty || !receipts.isEmpty else { return nil }
        nextSigningTicket += 1
        var job = Signer.Job(ticket: nextSigningTicket, identity: proof.identity, pushes: pushes, receipts: receipts)
        #if STOREKIT_TEST_HOOKS
        if let testHooks {
            job.failsOnPurpose = testHooks.signingFails
            job.delayMilliseconds = testHooks.signingDelay
        }
        #endif
        return job
    }

    /// Signatures up to which a unit's pushes are signed on the loop, after the commit, while
    /// the disk syncs: a hand-off to the signer's thread and back costs more than one or two
    /// signatures when the cores are busy. More go to the signer.
    static let signedOnTheLoop = 2

    /// Records of a page whose JWS are all kept up to which the loop encodes it itself.
    static let pageRecordsEncodedOnTheLoop = 8

    /// Puts the signer's finished jobs into their outputs in the gate, and releases what is
    /// now durable and signed.
    /// True when a job went back to the signers (its leaf was revoked meanwhile).
    @discardableResult
    func collectSignatures() -> Bool {
        var resubmitted = false
        for done in signer.takeDone() {
            if done.identity !== proof.identity, proof.identity.revocations.entry(revoking: done.identity.leaf) != nil {
                // Signed with a leaf revoked meanwhile (`rotate-key --revoke` while the job was on
                // a signer's thread): nothing it made would verify. The same job, the same ticket,
                // signed again with the leaf in use now; the gate keeps waiting for it.
                signer.submit(resigning(done.job, revoked: done.identity))
                resubmitted = true
                continue
            }
            if done.isHeavy {
                if let lane = heavyJobs.removeValue(forKey: done.ticket) ?? nil {
                    heavyJobsPerUID[lane, default: 1] -= 1
                    if heavyJobsPerUID[lane] == 0 { heavyJobsPerUID[lane] = nil }
                }
            } else {
                signingJobs -= 1
            }
            guard fatalFailure == nil else { continue }
            let ready = gate.signed(done.ticket, durable: ledger.durableLSN) { output in
                // In the gate, its bytes are counted already: the signed frames' growth is added.
                for (token, growth) in apply(done, to: &output) { sessions[token]?.outputInGate += growth }
            }
            for output in ready { release(output) }
        }
        return resubmitted
    }

    /// `job` to be signed again with the leaf in use now: its records whose JWS came from the
    /// cache, made by the revoked leaf, are signed again as well.
    func resigning(_ job: Signer.Job, revoked: SigningIdentity) -> Signer.Job {
        var again = job
        again.identity = proof.identity
        let oldHeader = revoked.encodedHeader + "."
        for push in again.pushes.indices {
            guard let records = again.pushes[push].message.signableRecords else { continue }
            let signing = Set(again.pushes[push].payloads.map(\.index))
            for index in records.indices where !signing.contains(index) {
                guard records[index].jwsRepresentation?.hasPrefix(oldHeader) == true else { continue }
                do {
                    if let payload = try proof.payload(for: records[index], engine: engine, configuration: configuration) {
                        again.pushes[push].payloads.append((index, payload))
                    }
                } catch {
                    logger.error("Failed to sign transaction \(records[index].id) again: \(error)", id: .signingKey)
                }
            }
        }
        return again
    }

    /// Puts a signed job's frames into `output` (the cache keeps its signatures); returns how
    /// many bytes each session's output grew.
    @discardableResult
    func apply(_ done: Signer.Done, to output: inout UnitOutput) -> [UInt64: Int] {
        for record in done.signed { proof.remember(record, signedBy: done.identity) }
        for receipt in done.receipts {
            proof.keepReceipt(receipt.bytes, sequence: receipt.sequence, for: receipt.queue, signedBy: done.identity)
        }
        for failure in done.failures { logger.error("Failed to sign \(failure)", id: .signingKey) }
        return output.replaceFrames(done.frames)
    }
}
