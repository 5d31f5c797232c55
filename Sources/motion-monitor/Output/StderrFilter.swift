import Dispatch
import SystemSupport
@preconcurrency import Glibc // write, poll, pipe2, dup2
import Synchronization

/// libiio 0.2x prints `WARNING: High-speed mode not enabled` on stderr each time a buffer is
/// created on a mainline kernel (it only goes away at libiio's build time). This routes fd 2
/// through a pipe and a small forwarding thread that drops exactly that line (unless `-v`) and
/// hands every other line to the stderr channel, so that libiio's other messages still reach
/// the user, in order.
///
/// The forwarder never writes itself: it hands lines to the channel (which never blocks), so a
/// stalled stderr cannot fill the pipe and block a libiio call (and with it the capture and the
/// log). ``finish(until:)`` puts the real stderr back on fd 2, forwards what the pipe still holds,
/// and waits at most until a deadline.
final class StderrFilter: Sendable {
    /// The line hidden (without its newline).
    static let noise = "WARNING: High-speed mode not enabled"

    private let readEnd: Int32
    /// The descriptor routed through the pipe: fd 2 (another one in the tests).
    private let target: Int32
    /// A descriptor of the real stderr (what the channel writes to).
    private let original: Int32
    private let channel: OutputChannel
    private let hide: Bool
    private let done = DispatchSemaphore(value: 0)
    private let hiddenCount = Atomic<Int>(0)
    private let finished = Atomic<Bool>(false)

    /// Routes fd 2 through the filter.
    /// - Parameters:
    ///   - target: the descriptor to route (fd 2; another one in the tests).
    ///   - original: a duplicate of the real stderr, which `channel` writes to.
    ///   - channel: where the other lines go.
    ///   - hide: drop the noise line (false with `-v`).
    /// - Returns: nil when fd 2 cannot be redirected (then nothing changed).
    init?(target: Int32 = STDERR_FILENO, original: Int32, channel: OutputChannel, hide: Bool) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return nil }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        guard dup2(ends[1], target) >= 0 else {
            Glibc.close(ends[0])
            Glibc.close(ends[1])
            return nil
        }
        Glibc.close(ends[1])
        // Non-blocking, so the crash handler can take what is left without waiting.
        _ = fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK)
        readEnd = ends[0]
        self.target = target
        self.original = original
        self.channel = channel
        self.hide = hide
        if target == STDERR_FILENO { crashStderr = (original, ends[0]) }
        startThread("mm-stderr-in") { [self] in forward() }
    }

    /// How many noise lines were dropped.
    var hidden: Int { hiddenCount.load(ordering: .relaxed) }

    /// Puts the real stderr back on fd 2 and waits (until `deadline`) for the forwarder to pass on
    /// what the pipe still holds.
    func finish(until deadline: Double) {
        guard !finished.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if target == STDERR_FILENO { crashStderr.pipe = -1 }
        // The pipe's write end was only on the target: the forwarder now reads to the end of it.
        _ = dup2(original, target)
        _ = done.wait(timeout: .now() + max(0, deadline - monotonicSeconds()))
    }

    private func forward() {
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        loop: while true {
            var pfd = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
            // A line without its newline yet is passed on after 100 ms of silence.
            let ready = poll(&pfd, 1, pending.isEmpty ? -1 : 100)
            if ready == 0 {
                pass(pending[...])
                pending.removeAll()
                continue
            }
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            let n = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress!, $0.count) }
            if n > 0 {
                pending += buffer[0..<n]
                var start = 0
                while let nl = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                    pass(pending[start...nl])
                    start = nl + 1
                }
                pending.removeFirst(start)
            } else if n == 0 {
                break loop
            } else if errno != EINTR && errno != EAGAIN {
                break loop
            }
        }
        if !pending.isEmpty { pass(pending[...]) }
        done.signal()
    }

    /// One line (with its newline, if it has one).
    private func pass(_ line: ArraySlice<UInt8>) {
        guard !line.isEmpty else { return }
        if hide, Self.isNoise(line) {
            hiddenCount.add(1, ordering: .relaxed)
            return
        }
        channel.control(Array(line))
    }

    /// Whether a line is exactly the noise (trailing CR or spaces allowed).
    static func isNoise(_ line: ArraySlice<UInt8>) -> Bool {
        var end = line.endIndex
        while end > line.startIndex, [UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: " ")].contains(line[end - 1]) { end -= 1 }
        return line[line.startIndex..<end].elementsEqual(noise.utf8)
    }
}

/// What the crash handler needs to put stderr back (a trap's message, Swift's backtrace): set
/// before the filter starts, read only by the handler (async-signal-safe calls only).
nonisolated(unsafe) var crashStderr: (original: Int32, pipe: Int32) = (-1, -1) // written before the crash handler is installed or on the main thread; read in a signal handler
