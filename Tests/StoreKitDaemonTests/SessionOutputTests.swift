import Foundation
import StoreKitPosix
import Testing
@testable import StoreKitDaemon
#if canImport(Glibc)
import Glibc
#endif

/// A session's output: frames queued as they were made and sent in gathering writes, through a
/// real socket pair whose send buffer fills, with descriptors that must arrive with their frame's
/// first byte.
@Suite struct SessionOutputTests {
    @Test func framesArriveWholeInOrderWithTheirDescriptorsThroughAFullSocket() throws {
        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        let (server, client) = (pair[0], pair[1])
        defer { close(client) }
        var small: Int32 = 4_096
        setsockopt(server, SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        try UnixSocket.setNonBlocking(server, true)
        try UnixSocket.setNonBlocking(client, true)
        let account = OutputAccount()
        let session = Session(token: 1, socket: Socket(adopting: server), kind: .client,
                              peer: PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid()),
                              maximumFrameSize: 1 << 20, account: account)
        defer { _ = session.closeSocket() }

        // Frames of 1 byte to 40 KB (more than the socket holds), every 17th with a descriptor of
        // a file naming the frame; more than `framesPerWrite` frames in a row without one.
        var generator = SystemRandomNumberGenerator()
        var expected: [UInt8] = []
        var frameStarts: [Int: Int] = [:]   // byte offset → frame index, for frames with a descriptor
        let directory = NSTemporaryDirectory() + "session-output-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for index in 0..<400 {
            let size = index % 50 == 0 ? 40_000 : Int.random(in: 1...3_000, using: &generator)
            let frame = (0..<size).map { UInt8(truncatingIfNeeded: $0 &+ index &* 7) }
            var descriptor: PassedDescriptor?
            if index % 17 == 5 {
                let path = directory + "/\(index)"
                try "frame \(index)".write(toFile: path, atomically: true, encoding: .utf8)
                let fd = open(path, O_RDONLY | O_CLOEXEC)
                #expect(fd >= 0)
                descriptor = PassedDescriptor(adopting: fd, countedIn: session.descriptorsHeld)
                frameStarts[expected.count] = index
            }
            expected += frame
            session.enqueue(encodedFrame: frame, passing: descriptor)
        }
        session.enqueue(encodedFrame: [])   // an empty frame is nothing to send
        #expect(session.pendingOutput == expected.count && account.queued == expected.count)

        var received: [UInt8] = []
        var named: [Int: String] = [:]   // frame index → what its descriptor's file says
        var buffer = [UInt8](repeating: 0, count: 7_000)
        var rounds = 0
        while received.count < expected.count, rounds < 100_000 {
            rounds += 1
            #expect(session.send())
            while true {
                var descriptors: [Int32] = []
                let result = try buffer.withUnsafeMutableBytes { try UnixSocket.read(client, into: $0, descriptors: &descriptors) }
                guard case .transferred(let count) = result else { break }
                // A descriptor comes with the read that holds its frame's first byte (the kernel
                // ends a read after the bytes a descriptor came with, not before them).
                for fd in descriptors {
                    let starts = frameStarts.keys.sorted()
                    let frame = starts.count > named.count ? starts[named.count] : nil
                    #expect(frame.map { (received.count..<(received.count + count)).contains($0) } == true,
                            "a descriptor arrived with bytes \(received.count)..<\(received.count + count), its frame starts at \(frame ?? -1)")
                    var text = [UInt8](repeating: 0, count: 64)
                    let length = read(fd, &text, 64)
                    if let frame, let index = frameStarts[frame] { named[index] = String(decoding: text.prefix(max(length, 0)), as: UTF8.self) }
                    close(fd)
                }
                received += buffer.prefix(count)
            }
        }
        #expect(received.count == expected.count)
        #expect(received == expected, "the stream differs")
        #expect(named.count == frameStarts.count, "every descriptor arrived")
        for (_, index) in frameStarts { #expect(named[index] == "frame \(index)") }
        #expect(session.pendingOutput == 0 && account.queued == 0)
        #expect(session.descriptorsHeld.value.load(ordering: .relaxed) == 0, "sent descriptors are closed here")
        #expect(rounds > 10, "the socket filled: \(rounds) rounds")
    }

    @Test func discardedOutputLeavesTheAccountAndClosesItsDescriptors() throws {
        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[1]) }
        let account = OutputAccount()
        let session = Session(token: 2, socket: Socket(adopting: pair[0]), kind: .client,
                              peer: PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid()),
                              maximumFrameSize: 1 << 20, account: account)
        defer { _ = session.closeSocket() }
        session.enqueue(encodedFrame: [1, 2, 3], passing: PassedDescriptor(adopting: open("/dev/null", O_RDONLY), countedIn: session.descriptorsHeld))
        session.enqueue(encodedFrame: [4])
        #expect(account.queued == 4 && session.descriptorsHeld.value.load(ordering: .relaxed) == 1)
        session.discardOutput()
        #expect(account.queued == 0 && session.pendingOutput == 0)
        #expect(session.descriptorsHeld.value.load(ordering: .relaxed) == 0)
    }
}
