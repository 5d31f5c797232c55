import Dispatch
import SystemSupport
@preconcurrency import Glibc // write, poll, pipe2, dup2
import Synchronization

/// One output file descriptor (stdout, stderr) with a thread of its own that does every `write(2)`
/// to it, so that nothing else in the program ever waits for a reader: a stalled pipe, a pager,
/// Ctrl-S or a slow serial console holds this thread only.
///
/// Two kinds of output go through it, in the order given:
/// - **Display** entries (``offer(_:slot:)``): the live view's frames, interval-capped lines. The
///   newest wins: an entry still waiting is replaced by a newer one of the same slot, never queued
///   behind it, so the display costs bounded memory and shows the newest data whenever the reader
///   takes some.
/// - **Log** entries (``append(_:tag:items:)``): lines that must all arrive (`--csv -`, lines with
///   `--interval 0`), and control sequences and messages (``control(_:)``). They wait in a backlog
///   bounded by ``limit`` bytes; what does not fit is dropped and counted per tag, never silently.
///
/// A log entry to a pipe is written in pieces of at most `PIPE_BUF` bytes ending at a newline, so
/// each piece is atomic: a run that ends while the pipe is full leaves whole lines in it.
///
/// Writes that cannot wait are made at once, by the caller: when nothing is queued or being
/// written, an entry goes out on the caller's thread through a file description of its own
/// opened with `O_NONBLOCK` (``direct``), and only what the reader does not take at once is
/// queued for the thread. So a reader that keeps up costs one `write(2)` per entry and no
/// wake-up of the thread; one that stalls costs the caller nothing more than a failed write.
///
/// Ending: ``finish(until:)`` waits for the backlog to drain until a deadline and counts what is
/// left; the thread itself may stay blocked in `write(2)` (the process's exit ends it).
final class OutputChannel: @unchecked Sendable { // every mutable field is guarded by `cond`'s mutex
    /// How the descriptor is doing.
    enum Outcome: Equatable, Sendable {
        case open
        /// The reader went away (`EPIPE`): a pipe into `head`, a pager quit early.
        case closed
        /// Another write error, with its errno (e.g. `ENOSPC`, `EIO` of a terminal that hung up).
        case failed(Int32)
    }

    /// Counts per tag (log entries: items are lines) and per slot (display entries).
    struct Stats: Equatable, Sendable {
        /// Lines written, per tag.
        var written: [Int: Int] = [:]
        /// Lines dropped because the backlog was full, per tag.
        var dropped: [Int: Int] = [:]
        /// Lines never written: waiting when ``OutputChannel/finish(until:)``'s deadline passed,
        /// or given after the descriptor closed or failed, per tag.
        var unwritten: [Int: Int] = [:]
        /// Display entries offered, replaced by a newer one before they were written, and written, per slot.
        var offered: [Int: Int] = [:]
        var replaced: [Int: Int] = [:]
        var drawn: [Int: Int] = [:]
        var outcome: Outcome = .open

        /// Lines of every tag not written (dropped or unwritten).
        var lost: Int { dropped.values.reduce(0, +) + unwritten.values.reduce(0, +) }
    }

    /// The descriptor written.
    let fd: Int32
    /// What it is called in messages (`stdout`).
    let name: String
    /// The most bytes of log entries that may wait.
    let limit: Int
    /// The longest piece of a log entry written at once: `PIPE_BUF` for pipes, sockets and
    /// terminals, so that every piece is atomic or at least short.
    private let piece: Int
    /// Whether the descriptor is a terminal (display entries are then paced, see ``pace()``).
    private let isTerminal: Bool
    /// The same pipe, terminal or device as `fd` on a file description of its own with
    /// `O_NONBLOCK` (so the shell's description of it stays as it was), for the caller's writes;
    /// -1 when there is none: regular files (where a write may wait for the disk, and a second
    /// description would have an offset of its own) and sockets, which the thread writes. Closed
    /// by ``finish(until:)``, so that the reader then sees the end of a pipe as soon as `fd` closes.
    private var direct: Int32

    private struct Entry {
        var bytes: [UInt8]
        /// Display entries: replaced by newer ones of the same slot while waiting.
        var slot: Int?
        /// Log entries: counted under this tag, one item per line.
        var tag: Int?
        var items: Int
    }

    private let cond = Condition()
    private var entries: [Entry] = []
    private var head = 0
    private var queuedBytes = 0
    /// The entry being written, if any: its tag and the lines of it not written yet.
    private var inFlight: (tag: Int?, left: Int)?
    private var accepting = true
    private var stats = Stats()
    /// Set once ``finish(until:)`` has counted what is left: later counts would disagree with it.
    private var final = false
    private var onEnd: (@Sendable (Outcome) -> Void)?

    /// Starts the writer thread.
    /// - Parameters:
    ///   - fd: the descriptor (not closed by the channel).
    ///   - name: e.g. `stdout`.
    ///   - limit: the bound of the backlog of log entries, in bytes.
    init(fd: Int32, name: String, limit: Int) {
        self.fd = fd
        self.name = name
        self.limit = limit
        var info = stat()
        let type = fstat(fd, &info) == 0 ? info.st_mode & S_IFMT : 0
        isTerminal = isatty(fd) == 1
        piece = type == S_IFIFO || type == S_IFSOCK || isTerminal ? Int(PIPE_BUF) : 1 << 20
        direct = type == S_IFIFO || type == S_IFCHR ? open("/proc/self/fd/\(fd)", O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC) : -1
        startThread("mm-\(name)") { [self] in run() }
    }

    deinit {
        if direct >= 0 { Glibc.close(direct) }
    }

    /// Called once, on the writer thread, when the descriptor closes or fails.
    func onEnd(_ handler: @escaping @Sendable (Outcome) -> Void) {
        cond.lock()
        onEnd = handler
        let outcome = stats.outcome
        cond.unlock()
        if outcome != .open { handler(outcome) }
    }

    /// The outcome so far.
    var outcome: Outcome {
        cond.lock()
        defer { cond.unlock() }
        return stats.outcome
    }

    /// The counts so far (final once ``finish(until:)`` has returned).
    var statistics: Stats {
        cond.lock()
        defer { cond.unlock() }
        return stats
    }

    /// Queues lines that must all arrive.
    /// - Parameters:
    ///   - bytes: whole lines.
    ///   - tag: what they are counted under (e.g. a sensor).
    ///   - items: how many lines.
    /// - Returns: false when they were not queued: the backlog is full (counted as dropped) or the
    ///   descriptor has closed or failed (counted as unwritten).
    @discardableResult
    func append(_ bytes: [UInt8], tag: Int, items: Int) -> Bool {
        cond.lock()
        defer { cond.unlock() }
        guard accepting, stats.outcome == .open else {
            stats.unwritten[tag, default: 0] += items
            return false
        }
        let sent = writeNow(bytes, display: false)
        if sent == bytes.count {
            stats.written[tag, default: 0] += items
            return true
        }
        let lines = sent > 0 ? bytes[..<sent].count(where: { $0 == UInt8(ascii: "\n") }) : 0
        guard sent > 0 || queuedBytes + bytes.count <= limit else {
            stats.dropped[tag, default: 0] += items
            return false
        }
        // What the reader did not take at once waits (begun, it is finished even over the bound).
        stats.written[tag, default: 0] += lines
        enqueue(Entry(bytes: sent > 0 ? Array(bytes[sent...]) : bytes, slot: nil, tag: tag, items: items - lines))
        return true
    }

    /// Queues bytes that are neither counted nor replaced (escape sequences, messages), in order
    /// with everything else; they count against the backlog's bound.
    /// - Parameter force: queue them even over the bound (a few bytes that restore the terminal).
    /// - Returns: false when they were not queued.
    @discardableResult
    func control(_ bytes: [UInt8], force: Bool = false) -> Bool {
        cond.lock()
        defer { cond.unlock() }
        guard accepting, stats.outcome == .open else { return false }
        let sent = writeNow(bytes, display: false)
        if sent == bytes.count { return true }
        guard sent > 0 || force || queuedBytes + bytes.count <= limit else { return false }
        enqueue(Entry(bytes: sent > 0 ? Array(bytes[sent...]) : bytes, slot: nil, tag: nil, items: 0))
        return true
    }

    /// ``control(_:force:)`` of text.
    @discardableResult
    func control(_ text: String, force: Bool = false) -> Bool { control(Array(text.utf8), force: force) }

    /// Offers a display entry: it replaces the one of the same slot still waiting (unless
    /// something that must not be reordered was queued after that one), else it waits, one per slot.
    func offer(_ bytes: [UInt8], slot: Int) {
        cond.lock()
        defer { cond.unlock() }
        guard accepting, stats.outcome == .open else { return }
        stats.offered[slot, default: 0] += 1
        let sent = writeNow(bytes, display: true)
        if sent == bytes.count {
            stats.drawn[slot, default: 0] += 1
            return
        }
        if sent > 0 {
            // Begun: the rest must follow before anything else, and no newer entry replaces it.
            stats.drawn[slot, default: 0] += 1
            enqueue(Entry(bytes: Array(bytes[sent...]), slot: nil, tag: nil, items: 0))
            return
        }
        var i = entries.count - 1
        while i >= head {
            if entries[i].slot == slot {
                queuedBytes += bytes.count - entries[i].bytes.count
                entries[i].bytes = bytes
                stats.replaced[slot, default: 0] += 1
                return
            }
            if entries[i].slot == nil { break }
            i -= 1
        }
        enqueue(Entry(bytes: bytes, slot: slot, tag: nil, items: 1))
    }

    /// Waits until everything queued so far is written, the descriptor fails, or `deadline`.
    /// - Returns: true when nothing is left.
    @discardableResult
    func drain(until deadline: Double) -> Bool {
        cond.lock()
        defer { cond.unlock() }
        while head < entries.count || inFlight != nil, stats.outcome == .open {
            if !cond.wait(until: deadline) { break }
        }
        return head == entries.count && inFlight == nil
    }

    /// Accepts nothing more, waits for what is queued until `deadline`, then counts the lines left
    /// as unwritten.
    /// - Returns: the final counts.
    @discardableResult
    func finish(until deadline: Double) -> Stats {
        cond.lock()
        defer { cond.unlock() }
        accepting = false
        cond.broadcast()
        while head < entries.count || inFlight != nil, stats.outcome == .open {
            if !cond.wait(until: deadline) { break }
        }
        if direct >= 0 {
            Glibc.close(direct)
            direct = -1
        }
        if !final {
            final = true
            for e in entries[head...] {
                if let tag = e.tag { stats.unwritten[tag, default: 0] += e.items }
            }
            entries.removeAll()
            head = 0
            queuedBytes = 0
            if let (tag, left) = inFlight, let tag, left > 0 { stats.unwritten[tag, default: 0] += left }
        }
        return stats
    }

    // MARK: Writing at once

    /// Under the lock: writes as much of `bytes` as the reader takes without waiting, when the
    /// channel is idle (nothing queued or being written, so order is kept), through ``direct``.
    /// Pieces are cut as the thread cuts them (at most ``piece`` bytes, ending at a newline), so
    /// what is written ends at a piece's end: on a pipe, whole lines. A display entry for a
    /// terminal still holding more than ``paceBytes`` is left to the thread, which paces it.
    /// - Returns: how many bytes were written (0 when none could be, or the channel is busy).
    private func writeNow(_ bytes: [UInt8], display: Bool) -> Int {
        guard direct >= 0, head == entries.count, inFlight == nil, !bytes.isEmpty else { return 0 }
        if display && isTerminal {
            var queued: Int32 = 0
            if ioctl(fd, UInt(TIOCOUTQ), &queued) == 0, queued > Self.paceBytes { return 0 }
        }
        return bytes.withUnsafeBufferPointer { all -> Int in
            var offset = 0
            while offset < all.count {
                let end = pieceEnd(all, from: offset, lines: !display)
                let n = Glibc.write(direct, all.baseAddress! + offset, end - offset)
                if n <= 0 { break }  // EAGAIN, or an error the thread meets and reports
                offset += n
                if offset < end { break }  // the reader took part of it: the thread writes the rest
            }
            return offset
        }
    }

    /// Where the piece starting at `offset` ends: at most ``piece`` bytes, cut after a newline
    /// for `lines`.
    private func pieceEnd(_ all: UnsafeBufferPointer<UInt8>, from offset: Int, lines: Bool) -> Int {
        guard lines, all.count - offset > piece else { return all.count }
        let window = UnsafeBufferPointer(rebasing: all[offset..<(offset + piece)])
        return window.lastIndex(of: UInt8(ascii: "\n")).map { offset + $0 + 1 } ?? offset + piece
    }

    // MARK: The writer thread

    /// Under the lock.
    private func enqueue(_ entry: Entry) {
        entries.append(entry)
        queuedBytes += entry.bytes.count
        cond.broadcast()
    }

    private func run() {
        cond.lock()
        var paced = false
        while true {
            while head == entries.count && accepting { cond.wait() }
            if head == entries.count { break }
            if isTerminal, !paced, entries[head].slot != nil, accepting {
                // Let the terminal take what it holds first: the frame written after the wait is
                // the newest one offered meanwhile.
                cond.unlock()
                pace()
                cond.lock()
                paced = true
                continue
            }
            paced = false
            let entry = entries[head]
            entries[head].bytes = []
            head += 1
            if head > 64 && head * 2 > entries.count {
                entries.removeFirst(head)
                head = 0
            }
            queuedBytes -= entry.bytes.count
            inFlight = (entry.tag, entry.items)
            cond.unlock()
            let error = write(entry)
            cond.lock()
            if let error {
                // The lines of this entry that did not make it are unwritten too.
                if !final, let (tag, left) = inFlight, let tag, left > 0 { stats.unwritten[tag, default: 0] += left }
                inFlight = nil
                end(error == EPIPE ? .closed : .failed(error))
                return
            }
            inFlight = nil
            if let slot = entry.slot, !final { stats.drawn[slot, default: 0] += 1 }
            cond.broadcast()
        }
        cond.broadcast()
        cond.unlock()
    }

    /// What a terminal's driver may hold not yet sent before a frame waits for it.
    private static let paceBytes: Int32 = 1024

    /// Waits (at most 0.2 s) until the terminal's driver holds less than 1 KiB not yet sent
    /// (`TIOCOUTQ`). On a serial line a frame then goes out within one frame's time, instead of
    /// queuing behind the several kilobytes the driver buffers (seconds at 115200 baud): the view
    /// stays current and the last frame and the terminal's restore get out quickly at the end.
    /// A pty reports 0: no wait.
    private func pace() {
        let deadline = monotonicSeconds() + 0.2
        var queued: Int32 = 0
        while ioctl(fd, UInt(TIOCOUTQ), &queued) == 0, queued > Self.paceBytes, monotonicSeconds() < deadline {
            usleep(5000)
        }
    }

    /// Under the lock, on a write error: everything waiting is unwritten; the handler is called
    /// (after the lock is released).
    private func end(_ outcome: Outcome) {
        stats.outcome = outcome
        if !final {
            for e in entries[head...] {
                if let tag = e.tag { stats.unwritten[tag, default: 0] += e.items }
            }
        }
        entries.removeAll()
        head = 0
        queuedBytes = 0
        accepting = false
        let handler = onEnd
        cond.broadcast()
        cond.unlock()
        handler?(outcome)
    }

    /// Writes one entry; returns the errno that stopped it, or nil.
    private func write(_ entry: Entry) -> Int32? {
        entry.bytes.withUnsafeBufferPointer { all -> Int32? in
            guard let base = all.baseAddress else { return nil }
            var offset = 0
            while offset < all.count {
                let end = pieceEnd(all, from: offset, lines: entry.tag != nil)
                var p = offset
                while p < end {
                    let n = Glibc.write(fd, base + p, end - p)
                    if n > 0 {
                        p += n
                    } else if n < 0 && errno == EINTR {
                        continue
                    } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                        // A descriptor someone made non-blocking: wait until it takes more.
                        var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                        _ = poll(&pfd, 1, 1000)
                    } else {
                        return n == 0 ? EIO : errno
                    }
                }
                if let tag = entry.tag {
                    let lines = UnsafeBufferPointer(rebasing: all[offset..<end]).count(where: { $0 == UInt8(ascii: "\n") })
                    cond.lock()
                    if !final { stats.written[tag, default: 0] += lines }
                    if let left = inFlight?.left { inFlight?.left = left - lines }
                    cond.unlock()
                }
                offset = end
            }
            return nil
        }
    }
}
