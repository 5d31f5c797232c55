import Dispatch
import Foundation
import Glibc
import SystemSupport
import Testing
@testable import motion_monitor

// stdout's and stderr's writers, against real pipes: a reader that never reads, one that starts
// late, one that goes away. Each test is bounded: a writer that blocked its caller would fail by
// its time limit, with its name.

/// A pipe with both ends open; `close()` what is left.
private final class TestPipe: @unchecked Sendable { // a reader thread only reads `read`, which is closed after it is done
    var read: Int32
    var write: Int32

    init() {
        var ends: [Int32] = [-1, -1]
        precondition(pipe(&ends) == 0)
        (read, write) = (ends[0], ends[1])
        // Writes to a pipe whose reader closed must fail with EPIPE, not end the test process.
        signal(SIGPIPE, SIG_IGN)
    }

    /// Everything in the pipe until its write end is closed everywhere, or `seconds`.
    func readAll(seconds: Double = 10) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = monotonicSeconds() + seconds
        while monotonicSeconds() < deadline {
            var pfd = pollfd(fd: read, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 100) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { Glibc.read(read, $0.baseAddress!, $0.count) }
            if n <= 0 { break }
            out += buffer[0..<n]
        }
        return out
    }

    /// What the pipe holds now (without waiting).
    func readAvailable() -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            var pfd = pollfd(fd: read, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 0) > 0 else { break }
            let n = buffer.withUnsafeMutableBytes { Glibc.read(read, $0.baseAddress!, $0.count) }
            if n <= 0 { break }
            out += buffer[0..<n]
        }
        return out
    }

    func closeRead() { if read >= 0 { Glibc.close(read); read = -1 } }
    func closeWrite() { if write >= 0 { Glibc.close(write); write = -1 } }
    func close() { closeRead(); closeWrite() }
}

/// `n` numbered lines, `line 000017\n` and so on (12 bytes each).
private func lines(_ range: Range<Int>) -> [UInt8] {
    Array(range.map { "line " + String(repeating: "0", count: 6 - String($0).count) + String($0) + "\n" }.joined().utf8)
}

@Suite("stdout's and stderr's writers (OutputChannel, StderrFilter)", .timeLimit(.minutes(1)))
struct OutputChannelTests {
    @Test("A reader that never reads: appending never blocks; past the backlog lines are dropped and counted; the end comes on time")
    func neverDrained() {
        let p = TestPipe()
        defer { p.close() }
        let channel = OutputChannel(fd: p.write, name: "test", limit: 256 << 10)
        let start = monotonicSeconds()
        var accepted = 0, refused = 0
        for i in 0..<100 { // 100 × 1000 lines × 12 bytes = 1.2 MB: the 64 KiB pipe and the 256 KiB backlog overflow
            if channel.append(lines(i * 1000..<(i + 1) * 1000), tag: 7, items: 1000) { accepted += 1000 } else { refused += 1000 }
        }
        #expect(monotonicSeconds() - start < 1, "appending waited for the reader")
        #expect(refused > 0 && accepted > 0)
        let stats = channel.finish(until: monotonicSeconds() + 0.3)
        #expect(monotonicSeconds() - start < 2, "finish waited past its deadline")
        #expect(stats.dropped[7] == refused)
        let written = stats.written[7] ?? 0
        #expect(written + (stats.unwritten[7] ?? 0) == accepted, "every accepted line is written or counted unwritten: \(stats)")
        #expect(stats.lost == refused + accepted - written)
        // What reached the pipe is whole lines, in order, at least as many as counted (once the
        // pipe is read, the writer, still blocked in write(2), goes on: the process's exit would end it).
        let got = String(decoding: p.readAvailable(), as: UTF8.self)
        #expect(got.hasSuffix("\n"), "a pipe piece ends at a newline")
        let received = got.split(separator: "\n")
        #expect(received.count >= written)
        #expect(received.enumerated().allSatisfy { $1 == "line " + String(repeating: "0", count: 6 - String($0).count) + String($0) })
    }

    @Test("A reader that starts 0.5 s late: everything arrives, in order")
    func stalledThenDrained() {
        let p = TestPipe()
        defer { p.close() }
        let channel = OutputChannel(fd: p.write, name: "test", limit: 16 << 20)
        let all = lines(0..<50_000) // 600 kB: ten pipes' worth
        for chunk in stride(from: 0, to: 50_000, by: 500) {
            #expect(channel.append(Array(all[(chunk * 12)..<((chunk + 500) * 12)]), tag: 1, items: 500))
        }
        usleep(500_000)
        let reader = DispatchQueue(label: "reader")
        let received = Locked<[UInt8]>([])
        let done = DispatchSemaphore(value: 0)
        reader.async {
            let bytes = p.readAll(seconds: 10)
            received.withLock { $0 = bytes }
            done.signal()
        }
        let stats = channel.finish(until: monotonicSeconds() + 10)
        #expect(stats.written[1] == 50_000 && stats.lost == 0, "\(stats)")
        p.closeWrite()
        _ = done.wait(timeout: .now() + 10)
        #expect(received.withLock { $0 } == all)
    }

    @Test("Display entries: the newest replaces the one waiting; a waiting frame is never queued behind another")
    func newestWins() {
        let p = TestPipe()
        defer { p.close() }
        // Fill the pipe so the writer blocks on the first frame.
        var filler = [UInt8](repeating: UInt8(ascii: "."), count: 1 << 16)
        _ = fcntl(p.write, F_SETFL, O_NONBLOCK)
        while filler.withUnsafeMutableBytes({ Glibc.write(p.write, $0.baseAddress!, $0.count) }) > 0 {}
        _ = fcntl(p.write, F_SETFL, 0)
        filler.removeAll()
        let channel = OutputChannel(fd: p.write, name: "test", limit: 1 << 20)
        for i in 0..<1000 {
            channel.offer(Array("frame \(i)|".utf8), slot: 0)
            channel.offer(Array("other \(i)|".utf8), slot: 1)
        }
        let stats = channel.statistics
        #expect(stats.offered[0] == 1000 && stats.offered[1] == 1000)
        // At most the frame being written and one waiting per slot: the rest were replaced.
        #expect((stats.replaced[0] ?? 0) >= 998 && (stats.replaced[1] ?? 0) >= 998, "\(stats)")
        // Drain: the last frame of each slot is what arrives last.
        let reader = DispatchQueue(label: "reader")
        let received = Locked<String>("")
        let done = DispatchSemaphore(value: 0)
        reader.async {
            let bytes = p.readAll(seconds: 5)
            received.withLock { $0 = String(decoding: bytes, as: UTF8.self) }
            done.signal()
        }
        let final = channel.finish(until: monotonicSeconds() + 5)
        p.closeWrite()
        _ = done.wait(timeout: .now() + 10)
        // The frame being written when the offers began, then one per slot, the newest (in the
        // order the slots first queued).
        let text = received.withLock { $0 }.replacingOccurrences(of: ".", with: "")
        let entries = text.split(separator: "|").map(String.init)
        #expect(entries.count <= 3, "\(entries)")
        #expect(Set(entries.suffix(2)) == ["frame 999", "other 999"], "\(entries)")
        #expect((final.drawn[0] ?? 0) <= 2 && (final.drawn[1] ?? 0) <= 2, "\(final)")
    }

    @Test("Control entries keep their place: a frame offered after one is not merged into a frame before it")
    func controlOrder() {
        let p = TestPipe()
        defer { p.close() }
        var filler = [UInt8](repeating: UInt8(ascii: "."), count: 1 << 16)
        _ = fcntl(p.write, F_SETFL, O_NONBLOCK)
        while filler.withUnsafeMutableBytes({ Glibc.write(p.write, $0.baseAddress!, $0.count) }) > 0 {}
        _ = fcntl(p.write, F_SETFL, 0)
        filler.removeAll()
        let channel = OutputChannel(fd: p.write, name: "test", limit: 1 << 20)
        channel.control("<start>")
        channel.offer(Array("A".utf8), slot: 0)
        channel.offer(Array("B".utf8), slot: 0)
        channel.control("<clear>")
        channel.offer(Array("C".utf8), slot: 0)
        channel.offer(Array("D".utf8), slot: 0)
        channel.control("<restore>", force: true)
        let reader = DispatchQueue(label: "reader")
        let received = Locked<String>("")
        let done = DispatchSemaphore(value: 0)
        reader.async {
            let bytes = p.readAll(seconds: 5)
            received.withLock { $0 = String(decoding: bytes, as: UTF8.self) }
            done.signal()
        }
        channel.finish(until: monotonicSeconds() + 5)
        p.closeWrite()
        _ = done.wait(timeout: .now() + 10)
        #expect(received.withLock { $0 }.replacingOccurrences(of: ".", with: "") == "<start>B<clear>D<restore>")
    }

    @Test("A reader that goes away: EPIPE, not SIGPIPE; the handler hears it once; later lines are unwritten")
    func closedReader() {
        let p = TestPipe()
        defer { p.close() }
        let channel = OutputChannel(fd: p.write, name: "test", limit: 1 << 20)
        let heard = Locked<[OutputChannel.Outcome]>([])
        let ended = DispatchSemaphore(value: 0)
        channel.onEnd { outcome in
            heard.withLock { $0.append(outcome) }
            ended.signal()
        }
        #expect(channel.append(lines(0..<10), tag: 0, items: 10))
        _ = channel.drain(until: monotonicSeconds() + 5)
        p.closeRead()
        channel.append(lines(10..<20), tag: 0, items: 10)
        #expect(ended.wait(timeout: .now() + 5) == .success)
        #expect(channel.outcome == .closed)
        #expect(!channel.append(lines(20..<30), tag: 0, items: 10))
        channel.offer([1, 2, 3], slot: 0)
        let stats = channel.finish(until: monotonicSeconds() + 1)
        #expect(heard.withLock { $0 } == [.closed])
        #expect(stats.written[0] == 10 && stats.unwritten[0] == 20, "\(stats)")
    }

    @Test("Another write error (/dev/full): failed with its errno")
    func writeError() throws {
        let fd = open("/dev/full", O_WRONLY | O_CLOEXEC)
        try #require(fd >= 0)
        defer { Glibc.close(fd) }
        let channel = OutputChannel(fd: fd, name: "full", limit: 1 << 20)
        channel.append(lines(0..<3), tag: 2, items: 3)
        let stats = channel.finish(until: monotonicSeconds() + 2)
        #expect(stats.outcome == .failed(ENOSPC) && stats.unwritten[2] == 3, "\(stats)")
    }

    @Test("The stderr filter drops exactly libiio's high-speed warning, passes everything else in order, and with -v shows it")
    func stderrFilter() throws {
        for hide in [true, false] {
            let fake = TestPipe()      // plays fd 2: what libiio writes to
            let real = TestPipe()      // plays the real stderr
            defer { fake.close(); real.close() }
            let channel = OutputChannel(fd: real.write, name: "stderr", limit: 1 << 20)
            let filter = try #require(StderrFilter(target: fake.write, original: real.write, channel: channel, hide: hide))
            let text = [
                "first\n", "WARNING: High-speed mode not enabled\n", "WARNING: High-speed mode not enabled, but more\n",
                "ERROR: something else\n", "WARNING: High-speed mode not enabled\r\n", "a line ", "in two writes\n", "no newline at the end",
            ]
            for piece in text {
                _ = piece.withCString { Glibc.write(fake.write, $0, strlen($0)) }
                usleep(1000)
            }
            filter.finish(until: monotonicSeconds() + 2)
            channel.finish(until: monotonicSeconds() + 2)
            fake.closeWrite() // now a duplicate of the real stderr's write end
            real.closeWrite()
            let got = String(decoding: real.readAll(seconds: 5), as: UTF8.self)
            if hide {
                #expect(got == "first\nWARNING: High-speed mode not enabled, but more\nERROR: something else\na line in two writes\nno newline at the end")
                #expect(filter.hidden == 2)
            } else {
                #expect(got == text.joined())
                #expect(filter.hidden == 0)
            }
        }
    }

    @Test("The stderr filter never blocks the writer of fd 2, even when the real stderr is stalled")
    func stderrFilterStalled() throws {
        let fake = TestPipe()
        let real = TestPipe()
        defer { fake.close(); real.close() }
        let channel = OutputChannel(fd: real.write, name: "stderr", limit: 64 << 10)
        let filter = try #require(StderrFilter(target: fake.write, original: real.write, channel: channel, hide: true))
        let start = monotonicSeconds()
        // 4 MB through a 64 KiB pipe into a 64 KiB backlog and a 64 KiB pipe nobody reads.
        let line = Array("libiio says something that is not the warning\n".utf8)
        for _ in 0..<(4 << 20) / line.count {
            _ = line.withUnsafeBufferPointer { Glibc.write(fake.write, $0.baseAddress!, $0.count) }
        }
        #expect(monotonicSeconds() - start < 10, "writes to fd 2 waited for the stalled stderr")
        filter.finish(until: monotonicSeconds() + 0.5)
        channel.finish(until: monotonicSeconds() + 0.5)
        #expect(monotonicSeconds() - start < 12)
    }
}
