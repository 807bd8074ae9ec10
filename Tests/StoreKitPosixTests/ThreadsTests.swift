import Foundation
import StoreKitPosix
import StoreKitTestSupport
import Synchronization
import Testing

/// The daemon's own threads and condition variables (Threads.swift), and the helpers that stand in
/// for Foundation in the daemon's modules.
@Suite struct ThreadsTests {
    @Test("a named thread runs its body, and the kernel knows it by its name")
    func namedThreadRunsUnderItsName() throws {
        let done = Condition()
        let seen = Mutex<String?>(nil)
        NamedThread.start("storekit-test1") {
            let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
            done.withLock {
                seen.withLock { $0 = comm.trimmingWhitespace() }
                done.signal()
            }
        }
        let deadline = Monotonic.seconds() + 5
        done.withLock {
            while seen.withLock({ $0 }) == nil && Monotonic.seconds() < deadline { done.wait(untilMonotonic: deadline) }
        }
        #expect(seen.withLock { $0 } == "storekit-test1")
    }

    @Test("a timed wait ends at its monotonic deadline, not before, and says it timed out")
    func timedWaitEndsAtTheDeadline() {
        let condition = Condition()
        let start = Monotonic.seconds()
        let signalled = condition.withLock { condition.wait(untilMonotonic: start + 0.2) }
        let elapsed = Monotonic.seconds() - start
        #expect(!signalled)
        #expect(elapsed >= 0.2, "woke after \(elapsed) s")
        #expect(elapsed < 5, "woke after \(elapsed) s")
        // A deadline already past returns at once.
        let past = condition.withLock { condition.wait(untilMonotonic: start) }
        #expect(!past)
    }

    @Test("a signal wakes a thread waiting with a far deadline")
    func signalWakesTheWaiter() {
        let condition = Condition()
        let flag = Mutex(false)
        let woke = Mutex<Double?>(nil)
        let start = Monotonic.seconds()
        NamedThread.start("storekit-test2") {
            condition.withLock {
                while !flag.withLock({ $0 }) { condition.wait(untilMonotonic: start + 30) }
            }
            woke.withLock { $0 = Monotonic.seconds() }
        }
        usleep(50_000)
        condition.withLock {
            flag.withLock { $0 = true }
            condition.signal()
        }
        while woke.withLock({ $0 }) == nil && Monotonic.seconds() - start < 10 { usleep(1_000) }
        let after = (woke.withLock { $0 } ?? .infinity) - start
        #expect(after < 10, "the waiter woke after \(after) s")
    }

    @Test("white space is trimmed at both ends only, as Foundation's trimming did", arguments: [
        ("  key = value \t", "key = value"), ("\r\nline\r\n", "line"), ("", ""), (" \t ", ""), ("a", "a"), ("a b", "a b"),
    ])
    func trimming(text: String, expected: String) {
        #expect(text.trimmingWhitespace() == expected)
        #expect(text.trimmingWhitespace() == text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    @Test("reading a whole file: a FIFO without a writer is refused at once (EINVAL), a directory is EISDIR, /dev/null is empty")
    func readContentsRefusesWhatIsNoRegularFile() throws {
        let directory = TemporaryDirectory("storekit-read")
        defer { directory.remove() }
        let path = directory.path
        #expect(mkfifo(path + "/fifo", 0o600) == 0)
        let start = Monotonic.seconds()
        #expect(throws: Errno.invalidArgument) { try FileSystem.readContents(of: path + "/fifo", followingSymlinks: true) }
        #expect(Monotonic.seconds() - start < 2, "the FIFO held the read")
        #expect(throws: Errno(rawValue: EISDIR)) { try FileSystem.readContents(of: path, followingSymlinks: true) }
        #expect(try FileSystem.readContents(of: "/dev/null", followingSymlinks: true).isEmpty)
        #expect(FileManager.default.createFile(atPath: path + "/file", contents: Data("text\n".utf8)))
        #expect(try FileSystem.readContents(of: path + "/file") == Array("text\n".utf8))
    }

    @Test("writers racing to replace one file each succeed, and the file is always one of them whole (two instances of an app writing its receipt)")
    func concurrentAtomicWritesNeverMix() throws {
        let directory = TemporaryDirectory("storekit-atomic")
        defer { directory.remove() }
        let path = directory.path
        let file = path + "/receipt"
        // Four writers, each its own contents (large enough that a write takes a while).
        let contents = (0..<4).map { writer in [UInt8](repeating: UInt8(ascii: "a") + UInt8(writer), count: 256 * 1024) }
        let failures = Mutex<[String]>([])
        let finished = Condition()
        let running = Mutex(contents.count)
        for (writer, bytes) in contents.enumerated() {
            NamedThread.start("storekit-write\(writer)") {
                for _ in 0..<40 {
                    do { try FileSystem.writeAtomically(bytes, to: file, permissions: 0o600) } catch {
                        failures.withLock { $0.append("writer \(writer): \(error)") }
                    }
                    if let read = try? FileSystem.readContents(of: file), !contents.contains(read) {
                        failures.withLock { $0.append("writer \(writer) read \(read.count) mixed or partial bytes") }
                    }
                }
                finished.withLock {
                    running.withLock { $0 -= 1 }
                    finished.signal()
                }
            }
        }
        let deadline = Monotonic.seconds() + 60
        finished.withLock {
            while running.withLock({ $0 }) > 0, Monotonic.seconds() < deadline { _ = finished.wait(untilMonotonic: deadline) }
        }
        #expect(running.withLock { $0 } == 0, "the writers did not finish")
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 }.prefix(5))")
        #expect(contents.contains(try FileSystem.readContents(of: file)))
        #expect(try FileSystem.names(inDirectory: path) == ["receipt"], "no temporary file is left behind")
    }

    @Test("a write whose rename fails (a directory is in the way) throws and leaves no temporary file")
    func failedAtomicWriteLeavesNothing() throws {
        let directory = TemporaryDirectory("storekit-atomic")
        defer { directory.remove() }
        let path = directory.path
        #expect(mkdir(path + "/receipt", 0o700) == 0)
        #expect(FileManager.default.createFile(atPath: path + "/receipt/inside", contents: nil))
        #expect(throws: Errno.self) { try FileSystem.writeAtomically([1, 2, 3], to: path + "/receipt", permissions: 0o600) }
        #expect(try FileSystem.names(inDirectory: path) == ["receipt"])
    }

    @Test("a write removes the temporary files a crash left behind once they are old, and nothing else")
    func atomicWriteRemovesOldLeftovers() throws {
        let directory = TemporaryDirectory("storekit-leftovers")
        defer { directory.remove() }
        let path = directory.path
        let hourAgo = time(nil) - 3600
        func create(_ name: String, changed: time_t? = nil) {
            #expect(FileManager.default.createFile(atPath: path + "/" + name, contents: Data("partial".utf8)))
            if let changed {
                var times = [timespec(tv_sec: changed, tv_nsec: 0), timespec(tv_sec: changed, tv_nsec: 0)]
                #expect(utimensat(AT_FDCWD, path + "/" + name, &times, 0) == 0)
            }
        }
        create("receipt.tmp-3fa9c0d12e4b5a67", changed: hourAgo)   // a crash's leftover: removed
        create("receipt.tmp-0", changed: hourAgo)                  // the shortest random suffix: removed
        create("receipt.tmp-77aa01", changed: nil)                 // a writer busy now: kept
        create("receipt.tmp-notes", changed: hourAgo)              // not hex: someone's file, kept
        create("receipt.tmp-3FA9", changed: hourAgo)               // upper case is never drawn: kept
        create("receipt.tmp-11112222333344445", changed: hourAgo)  // 17 digits: kept
        create("other.tmp-3fa9c0d12e4b5a67", changed: hourAgo)     // another file's: kept
        #expect(symlink("/etc/hostname", path + "/receipt.tmp-abcdef") == 0)   // not a regular file: kept
        #expect(mkdir(path + "/receipt.tmp-abc", 0o700) == 0)                  // a directory: kept

        try FileSystem.writeAtomically(Array("whole".utf8), to: path + "/receipt", permissions: 0o600)
        #expect(try FileSystem.readContents(of: path + "/receipt") == Array("whole".utf8))
        #expect(Set(try FileSystem.names(inDirectory: path)) == [
            "receipt", "receipt.tmp-77aa01", "receipt.tmp-notes", "receipt.tmp-3FA9", "receipt.tmp-11112222333344445",
            "other.tmp-3fa9c0d12e4b5a67", "receipt.tmp-abcdef", "receipt.tmp-abc",
        ])
    }

    @Test("a directory's names are listed without . and ..; a missing one is ENOENT")
    func directoryNames() throws {
        let directory = TemporaryDirectory("storekit-names")
        defer { directory.remove() }
        let path = directory.path
        for name in ["b.conf", "a.conf", ".hidden"] { #expect(FileManager.default.createFile(atPath: path + "/" + name, contents: nil)) }
        #expect(Set(try FileSystem.names(inDirectory: path)) == ["a.conf", "b.conf", ".hidden"])
        #expect(throws: Errno.notFound) { try FileSystem.names(inDirectory: path + "/absent") }
    }
}
