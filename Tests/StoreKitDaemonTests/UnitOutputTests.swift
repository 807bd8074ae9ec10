import FoundationEssentials
@testable import StoreKitDaemon
import StoreKitLedger
import StoreKitSigning
import StoreKitSQLite
import StoreKitWire
import Testing

/// How a unit of work's output is cut into the durability gate's lanes (one per uid), so that
/// one uid's pushes being signed do not hold back another uid's answers.
@Suite("unit output parts")
struct UnitOutputTests {
    /// Sessions 1 and 3 are uid 100's, session 2 uid 200's; session 9 has closed.
    static func uid(of token: UInt64) -> UInt32? {
        [1: 100, 3: 100, 2: 200][token]
    }

    static func purchase(_ id: UInt64, uid: UInt32) -> ServerMessage {
        .updated([TransactionRecord(id: id, uid: uid, app: "org.example.app", productID: "coins", quantity: 1,
                                    state: .purchased, sequence: id, date: 0)])
    }

    static func requestIDs(_ output: Server.UnitOutput) -> [UInt32] {
        output.frames.compactMap { frame -> UInt32? in
            guard let message = try? ServerMessage.decode(Array(frame.frame.dropFirst(Frame.headerSize))),
                  case .result(let id, _, _, _, _) = message else { return nil }
            return id
        }
    }

    @Test("a unit whose frames all go to one uid is one part, unchanged")
    func oneUIDIsOnePart() {
        var output = Server.UnitOutput()
        output.append(1, Frame.encode(body: ServerMessage.result(1, .ok).encode()))
        output.appendToSign(Self.purchase(7, uid: 100), to: [1, 3])
        output.journal.append {}
        let parts = output.parts(laneOf: Self.uid)
        #expect(parts.count == 1)
        #expect(parts.first?.lane == 100)
        #expect(parts.first?.output.frames.count == 3)
        #expect(parts.first?.output.journal.count == 1)
    }

    @Test("frames are split by uid in their order; pushes to sign point at their frames in the new part")
    func splitByUID() throws {
        var output = Server.UnitOutput()
        output.append(2, Frame.encode(body: ServerMessage.result(1, .ok).encode()))
        output.append(1, Frame.encode(body: ServerMessage.result(2, .ok).encode()))
        output.appendToSign(Self.purchase(7, uid: 100), to: [1, 3])
        output.append(2, Frame.encode(body: ServerMessage.result(3, .ok).encode()))
        output.appendToSign(Self.purchase(8, uid: 200), to: [2])
        output.append(9, Frame.encode(body: ServerMessage.result(4, .ok).encode()))
        output.unobserved.append(QueueKey(uid: 300, app: "org.example.other"))
        let parts = output.parts(laneOf: Self.uid)
        #expect(parts.map(\.lane) == [200, 100, nil])
        var byLane: [UInt32?: Server.UnitOutput] = [:]
        for (lane, part) in parts { byLane.updateValue(part, forKey: lane) }
        var uid200 = try #require(byLane[200] ?? nil)
        var uid100 = try #require(byLane[100] ?? nil)
        let closed = try #require(byLane[nil] ?? nil)
        #expect(Self.requestIDs(uid200) == [1, 3])
        #expect(uid200.frames.map(\.token) == [2, 2, 2])
        #expect(Self.requestIDs(uid100) == [2])
        #expect(uid100.frames.map(\.token) == [1, 1, 3])
        #expect(closed.frames.map(\.token) == [9])
        // Journal entries and observer starts travel with the first part only.
        #expect(uid200.unobserved.count == 1 && uid100.unobserved.isEmpty && closed.unobserved.isEmpty)
        // Bytes are counted per part, and add up to the whole.
        #expect(uid200.bytes[2] == output.bytes[2] && uid100.bytes[1] == output.bytes[1] && uid100.bytes[3] == output.bytes[3])
        let signs200 = uid200.takePendingSignatures()
        #expect(signs200.map(\.indices) == [[2]])
        #expect(signs200.first?.message.signableRecords?.first?.id == 8)
        let signs100 = uid100.takePendingSignatures()
        #expect(signs100.map(\.indices) == [[1, 2]])
        #expect(signs100.first?.message.signableRecords?.first?.id == 7)
    }

    @Test("receipts to sign point at their empty reply frames in their uid's part; a request undone drops its receipt")
    func receiptsFollowTheirFrames() throws {
        let receipt = AppReceipt(receiptType: "Xcode", bundleIdentifier: "org.example.app", appVersion: "1", opaqueValue: [],
                                 sha1Hash: [], creationDate: Date(timeIntervalSince1970: 0), originalApplicationVersion: "1",
                                 inAppPurchases: [])
        var output = Server.UnitOutput()
        output.append(2, Frame.encode(body: ServerMessage.result(1, .ok).encode()))
        output.appendReceiptToSign(1, requestID: 2, receipt, queue: .init(uid: 100, app: "org.example.app"), sequence: 5)
        output.append(2, Frame.encode(body: ServerMessage.result(3, .ok).encode()))
        output.appendReceiptToSign(2, requestID: 4, receipt, queue: .init(uid: 200, app: "org.example.app"), sequence: 9)
        let parts = output.parts(laneOf: Self.uid)
        #expect(parts.map(\.lane) == [200, 100])
        var uid200 = parts[0].output
        var uid100 = parts[1].output
        let receipts200 = uid200.takePendingReceipts()
        #expect(receipts200.map(\.index) == [2] && receipts200.map(\.requestID) == [4] && uid200.frames[2].frame.isEmpty)
        let receipts100 = uid100.takePendingReceipts()
        #expect(receipts100.map(\.index) == [0] && receipts100.map(\.sequence) == [5] && uid100.frames[0].frame.isEmpty)
        output.removeFrames(from: 3)
        #expect(output.pendingReceipts.map(\.requestID) == [2])
    }

    @Test("an output with nothing to send and nothing to log has no parts; one with only journal entries has one")
    func emptyOutputs() {
        #expect(Server.UnitOutput().parts(laneOf: Self.uid).isEmpty)
        var logged = Server.UnitOutput()
        logged.journal.append {}
        #expect(logged.parts(laneOf: Self.uid).map(\.lane) == [nil])
    }

    @Test("a kept receipt follows its reply's frame as a tail: into the part of its uid, counted in its session's bytes, undone with its request")
    func receiptTails() throws {
        var output = Server.UnitOutput()
        let big = (0..<100_000).map { UInt8(truncatingIfNeeded: $0) }
        output.append(2, Frame.encode(body: ServerMessage.result(1, .ok).encode()))
        output.replyReceipt(1, requestID: 5, data: big)
        output.replyReceipt(2, requestID: 6, data: [1, 2, 3])
        #expect(output.bytes[1] == Frame.headerSize + 9 + big.count)
        let parts = output.parts(laneOf: Self.uid)
        #expect(parts.map(\.lane) == [200, 100])
        let uid200 = try #require(parts.first?.output), uid100 = try #require(parts.last?.output)
        #expect(uid200.tails == [1: [1, 2, 3]] && uid100.tails == [0: big])
        #expect(uid100.bytes[1] == output.bytes[1] && uid200.bytes[2] == output.bytes[2])
        // The frame and its tail are the frame `.receipt` encodes to.
        let whole = try #require(uid100.frames.first?.frame) + big
        #expect(whole == Frame.encode(body: ServerMessage.receipt(requestID: 5, data: big).encode()))
        var undone = output
        undone.removeFrames(from: 1)
        #expect(undone.tails.isEmpty && undone.bytes[1] == 0)
    }
}
