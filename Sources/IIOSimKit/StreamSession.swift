#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CSimSupport
import Foundation
import Synchronization

/// What a stream session wrote, saved next to its bytes when `--stream-log` is given, so that a
/// test can decode what a reader received and compare it with what was sent.
public struct SessionRecord: Codable, Sendable {
    /// One enabled element.
    public struct Element: Codable, Sendable {
        public var channel: String
        public var index: Int
        public var type: String
        public var offset: Int
    }
    public var device: String
    public var name: String
    public var session: Int
    public var elements: [Element]
    public var scanSize: Int
    public var rate: Double
    public var fast: Bool
    public var clock: String
    public var bufferLength: Int
    public var watermark: Int
    public var scansWritten: Int64
    public var scansDropped: Int64
    /// Scans still in the device node when the session ended (never read by anyone).
    public var scansUnreadAtClose: Int64
}

/// One buffer session: from `buffer/enable` = 1 until it is disabled, the reader closes the node,
/// the device is unplugged or the simulator stops. It writes whole scans, in index order, per the
/// kernel's layout, into the FIFO standing in for `/dev/iio:deviceN`.
///
/// Like the kernel: a reader is woken once `buffer/watermark` scans are queued; at most
/// `buffer/length` scans wait in the buffer and newer ones are dropped when it is full (kfifo);
/// every write is at most `PIPE_BUF` bytes so a `read()` only ever sees whole scans.
final class StreamSession: Sendable {
    let device: DeviceSim
    let simulator: Simulator
    let layout: ScanLayout
    let channelMap: [Int]
    let number: Int
    /// The buffer configuration the session was started with (see `DeviceSim.evaluateBuffer`).
    let configuration: [String]
    /// `buffer/enable`'s modification time when the session was decided: a later write of it ends
    /// the session for the reader at once (see `DeviceSim.enableStamp`).
    let enableStamp: timespec
    /// `current_timestamp_clock` while the buffer was enabled. The kernel refuses to change the
    /// clock of an enabled buffer (EBUSY), so it is the session's clock even when the reader has
    /// put the file back by the time this session's thread runs.
    let clockName: String
    let wakeFD: Int32
    let stopping = Atomic<Bool>(false)
    let finished = Atomic<Bool>(false)

    init(device: DeviceSim, simulator: Simulator, layout: ScanLayout, channelMap: [Int], number: Int,
         configuration: [String], enableStamp: timespec, clockName: String) {
        self.configuration = configuration
        self.enableStamp = enableStamp
        self.clockName = clockName
        self.device = device
        self.simulator = simulator
        self.layout = layout
        self.channelMap = channelMap
        self.number = number
        wakeFD = simsupport_eventfd()
    }

    deinit { if wakeFD >= 0 { close(wakeFD) } }

    func start() {
        let t = Thread { [self] in
            run()
            finished.store(true, ordering: .releasing)
        }
        t.name = "iio-sim stream \(device.id)"
        t.start()
    }

    func stop(wait: Bool) {
        stopping.store(true, ordering: .releasing)
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
        guard wait else { return }
        let deadline = SimClock.now() + 5_000_000_000
        while !finished.load(ordering: .acquiring) && SimClock.now() < deadline { usleep(200) }
    }

    var shouldStop: Bool { stopping.load(ordering: .acquiring) || simulator.isStopping }

    /// Counters of this session.
    struct Counts {
        var written: Int64 = 0
        var dropped: Int64 = 0
        var unread: Int64 = 0
    }

    /// Where the session's scans go: the FUSE node's kfifo, or the FIFO's write end.
    enum Sink {
        case fuse(FuseNodes)
        case pipe(Int32)
    }

    func run() {
        let scanSize = layout.scanSize
        let length = max(1, Int(device.read("buffer/length") ?? "") ?? 1)
        let watermark = min(max(1, Int(device.read("buffer/watermark") ?? "") ?? 1), length)
        let sink: Sink
        if let nodes = simulator.fuseNodes {
            guard nodes.sessionBegin(device: device.number, session: number, scanSize: scanSize, length: length,
                                     watermark: watermark, enableAttribute: device.attributeIndex("buffer/enable") ?? -1,
                                     mtime: enableStamp) else {
                saveRecord(counts: Counts(), rate: 0, clockName: "", length: 0, watermark: 0)
                return
            }
            sink = .fuse(nodes)
        } else {
            // libiio opens the node before it enables the buffer; a shell user may open it after.
            var wfd: Int32 = -1
            while !shouldStop {
                wfd = open(device.devNode, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
                if wfd >= 0 || errno != ENXIO { break }
                if sleepOrStop(nanoseconds: 1_000_000) { break }
            }
            guard wfd >= 0 else {
                saveRecord(counts: Counts(), rate: 0, clockName: "", length: 0, watermark: 0)
                return
            }
            _ = simsupport_set_pipe_size(wfd, Int32(clamping: max(4096, length * scanSize)))
            drainStale(scanSize: scanSize)
            sink = .pipe(wfd)
        }
        defer { if case .pipe(let fd) = sink { close(fd) } }

        let clock = SimClock.clock(named: clockName) ?? CLOCK_REALTIME
        let clockOffset = SimClock.now(clock) - SimClock.now()
        // One data-ready interrupt (or FIFO) serves every sensor of the device: the fastest rate
        // configured drives the stream, whichever channels are in the scan.
        let types = device.motionTypes
        let rate = device.rate(types: types, simulator: simulator)

        var logFD: Int32 = -1
        if let dir = simulator.options.streamLog {
            logFD = open("\(dir)/\(device.id)-session\(number).bin", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        }
        defer { if logFD >= 0 { close(logFD) } }
        simulator.log("\(device.id) (\(device.spec.name)): stream session \(number): \(layout.elements.map(\.channel)), "
            + "\(scanSize) bytes/scan, \(simulator.options.fast ? "fast" : "\(rate) Hz"), length \(length), watermark \(watermark)")

        var counts = Counts()
        if !device.isSilent {
            if simulator.options.fast {
                runFast(sink, logFD: logFD, rate: rate, clockOffset: clockOffset, counts: &counts)
            } else {
                runPaced(sink, logFD: logFD, types: types, length: length, watermark: watermark,
                         clockOffset: clockOffset, counts: &counts)
            }
        } else {
            while !sleepOrStop(nanoseconds: 1_000_000_000) {}
        }
        switch sink {
        case .fuse(let nodes):
            counts.unread = Int64(nodes.sessionEnd(device: device.number, session: number))
        case .pipe:
            // The kernel empties the kfifo when the buffer is enabled again; a FIFO keeps what the
            // reader left for as long as anyone holds it open. Throw it away now, so a reader that
            // opens the node next never reads scans of this session (in another layout).
            counts.unread = Int64(drain() / scanSize)
        }
        device.record(written: counts.written, dropped: counts.dropped, unread: counts.unread)
        simulator.log("\(device.id): session \(number) ended: \(counts.written) scans written, \(counts.dropped) dropped, \(counts.unread) unread")

        saveRecord(counts: counts, rate: rate, clockName: clockName, length: length, watermark: watermark)
    }

    /// Writes the session's summary next to its bytes (with `--stream-log`).
    func saveRecord(counts: Counts, rate: Double, clockName: String, length: Int, watermark: Int) {
        guard let dir = simulator.options.streamLog else { return }
        let rec = SessionRecord(
            device: device.id, name: device.spec.name, session: number,
            elements: layout.elements.map { .init(channel: $0.channel, index: $0.index, type: $0.type.description, offset: $0.offset) },
            scanSize: layout.scanSize, rate: rate, fast: simulator.options.fast, clock: clockName,
            bufferLength: length, watermark: watermark,
            scansWritten: counts.written, scansDropped: counts.dropped, scansUnreadAtClose: counts.unread)
        let enc = JSONEncoder()
        enc.outputFormatting = [.prettyPrinted, .sortedKeys]
        if let data = try? enc.encode(rec) {
            _ = FileManager.default.createFile(atPath: "\(dir)/\(device.id)-session\(number).json", contents: data)
        }
    }

    /// Throws away scans a previous session left in the pipe (possible only when the reader re-opened
    /// the node before the previous session drained it), so a new layout never follows bytes of an
    /// old one.
    func drainStale(scanSize: Int) {
        let n = drain()
        if n > 0 {
            device.record(unread: Int64(n / scanSize))
            simulator.log("\(device.id): discarded \(n / scanSize) scans left from a previous session")
        }
    }

    /// Reads and discards whatever is queued in the device node; returns the byte count.
    func drain() -> Int {
        let rfd = open(device.devNode, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard rfd >= 0 else { return 0 }
        defer { close(rfd) }
        var total = 0
        var sink = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = sink.withUnsafeMutableBytes { read(rfd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            total += n
        }
        return total
    }

    /// Sleeps up to `nanoseconds`; true when the session must stop.
    func sleepOrStop(nanoseconds: Int64) -> Bool {
        var p = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
        _ = simsupport_poll_ns(&p, 1, nanoseconds)
        return shouldStop
    }

    /// True once `buffer/enable` has been written since the session was decided: the kernel would
    /// have ended this session (and emptied its kfifo) synchronously.
    var enableRewritten: Bool {
        guard let now = device.enableStamp() else { return true }
        return !DeviceSim.same(now, enableStamp)
    }

    /// Waits until `deadline` (monotonic ns) or an event: for a FIFO, the reader closing it (POLLERR
    /// on the write end) or space (when `wantSpace`); for a FUSE node, the reader taking scans.
    /// Returns false when the session must end.
    func wait(_ sink: Sink, until deadline: Int64?, wantSpace: Bool) -> Bool {
        let timeout = deadline.map { max(0, $0 - SimClock.now()) } ?? -1
        switch sink {
        case .pipe(let wfd):
            var fds = [pollfd(fd: wfd, events: Int16(wantSpace ? POLLOUT : 0), revents: 0),
                       pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
            let r = simsupport_poll_ns(&fds, 2, timeout)
            if shouldStop { return false }
            if r > 0 && fds[0].revents & Int16(POLLERR | POLLHUP) != 0 { return false }
            return true
        case .fuse(let nodes):
            let efd = nodes.eventFD(device: device.number)
            var fds = [pollfd(fd: wantSpace ? efd : -1, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
            let r = simsupport_poll_ns(&fds, 2, timeout)
            if r > 0 && fds[0].revents != 0 {
                var sink: UInt64 = 0
                _ = read(efd, &sink, 8)
            }
            return !shouldStop
        }
    }

    /// Encodes the scan for `monotonicNs` into `buffer` at `at`.
    func encodeScan(into buffer: inout [UInt8], at base: Int, monotonicNs: Int64, clockOffset: Int64, rate: Double) {
        let values = device.rawValues(motionTime: simulator.motionTime(monotonicNs), noisy: true, rate: rate)
        for (e, ci) in zip(layout.elements, channelMap) {
            let ch = device.channels[ci]
            let v: Int64
            if case .timestamp = ch.source { v = monotonicNs + clockOffset } else { v = values[ci] }
            let upper = ch.spec.upperBits ?? .sign
            var next: Int64 = 0
            if upper == .nextField, let axis = ch.axis,
               let n = device.channels.firstIndex(where: { $0.typeName == ch.typeName && $0.axis == axis + 1 }) {
                next = values[n]
            }
            let step = e.type.storageBits / 8
            for r in 0..<e.type.repeat {
                e.type.encode(v, into: &buffer, at: base + e.offset + r * step, upperBits: upper, next: next)
            }
        }
    }

    /// Queues `bytes[from ..< from + count]` (whole scans): into the FUSE node's kfifo, or written to
    /// the FIFO in atomic pieces. Returns the number of whole scans queued (the rest found the
    /// buffer full) and whether the session is over (buffer disabled or re-enabled, FIFO reader gone).
    func put(_ sink: Sink, _ bytes: [UInt8], from: Int = 0, count: Int, logFD: Int32) -> (scans: Int, over: Bool) {
        let scanSize = layout.scanSize
        switch sink {
        case .fuse(let nodes):
            let fitted = bytes.withUnsafeBytes {
                nodes.push(device: device.number, session: number, $0.baseAddress! + from, scans: count / scanSize)
            }
            guard let fitted else { return (0, true) }
            if logFD >= 0 && fitted > 0 {
                _ = bytes.withUnsafeBytes { Glibc.write(logFD, $0.baseAddress! + from, fitted * scanSize) }
            }
            return (fitted, false)
        case .pipe(let wfd):
            if enableRewritten { return (0, true) }
            let piece = max(1, Int(PIPE_BUF) / scanSize) * scanSize
            var done = 0
            while done < count {
                let n = min(piece, count - done)
                let w = bytes.withUnsafeBytes { Glibc.write(wfd, $0.baseAddress! + from + done, n) }
                if w < 0 {
                    if errno == EINTR { continue }
                    return (done / scanSize, errno == EPIPE)
                }
                if logFD >= 0 { _ = bytes.withUnsafeBytes { Glibc.write(logFD, $0.baseAddress! + from + done, w) } }
                done += w
            }
            return (done / scanSize, false)
        }
    }

    /// Scans waiting in the buffer.
    func queuedScans(_ sink: Sink) -> Int {
        switch sink {
        case .fuse(let nodes): nodes.queued(device: device.number)
        case .pipe(let wfd): Int(max(0, simsupport_pipe_queued(wfd))) / layout.scanSize
        }
    }

    /// Streams at the sampling frequency in force, re-read every wake-up (a driver changes rate live).
    func runPaced(_ sink: Sink, logFD: Int32, types: Set<String>, length: Int, watermark: Int,
                  clockOffset: Int64, counts: inout Counts) {
        let scanSize = layout.scanSize
        var pending = [UInt8](repeating: 0, count: watermark * scanSize)
        var pendingScans = 0
        var next = SimClock.now()
        var rate = device.rate(types: types, simulator: simulator)
        var lastRateCheck = next
        // `--stall`: from this long after the buffer was enabled, for this long (or for good),
        // the device delivers nothing, as a sensor hub that stalls; then it goes on from then.
        var stall = device.stall.map { s in
            (start: next + Int64(s.after * 1e9), end: s.duration.map { next + Int64((s.after + $0) * 1e9) })
        }
        while !shouldStop {
            if let window = stall, SimClock.now() >= window.start {
                stall = nil
                simulator.log("\(device.id): stalled")
                guard let end = window.end else {
                    while !sleepOrStop(nanoseconds: 1_000_000_000) {}
                    return
                }
                while SimClock.now() < end { if !wait(sink, until: end, wantSpace: false) { return } }
                simulator.log("\(device.id): goes on after the stall")
                next = SimClock.now()
                pendingScans = 0
                continue
            }
            if rate <= 0 {  // a driver at 0 Hz produces nothing (cros-ec until sampling_frequency is set)
                if !wait(sink, until: SimClock.now() + 100_000_000, wantSpace: false) { return }
                rate = device.rate(types: types, simulator: simulator)
                next = SimClock.now()
                continue
            }
            let period = Int64(1e9 / rate)
            let due = next + Int64(max(0, watermark - pendingScans - 1)) * period
            if !wait(sink, until: due, wantSpace: false) { return }
            let now = SimClock.now()
            var generated = 0
            while next <= now && generated < 100_000 {
                let queued = queuedScans(sink) + pendingScans
                if queued >= length {
                    counts.dropped += 1
                } else {
                    if pendingScans == watermark {  // flush early: the reader is owed these
                        let r = put(sink, pending, count: pendingScans * scanSize, logFD: logFD)
                        if r.over { return }
                        counts.written += Int64(r.scans)
                        counts.dropped += Int64(pendingScans - r.scans)
                        pendingScans = 0
                    }
                    encodeScan(into: &pending, at: pendingScans * scanSize, monotonicNs: next, clockOffset: clockOffset, rate: rate)
                    pendingScans += 1
                }
                next += period
                generated += 1
            }
            if generated == 100_000 { next = now }  // fell far behind (suspended): skip ahead
            if pendingScans >= watermark {
                let r = put(sink, pending, count: pendingScans * scanSize, logFD: logFD)
                if r.over { return }
                counts.written += Int64(r.scans)
                counts.dropped += Int64(pendingScans - r.scans)
                pendingScans = 0
            }
            if now - lastRateCheck > 50_000_000 {
                rate = device.rate(types: types, simulator: simulator)
                lastRateCheck = now
            }
        }
    }

    /// Streams as fast as the reader drains: a block of scans one second of motion long (at the
    /// nominal rate, 64…8192 scans) is encoded once and replayed with fresh timestamps on a virtual
    /// clock advancing one period per scan.
    func runFast(_ sink: Sink, logFD: Int32, rate: Double, clockOffset: Int64, counts: inout Counts) {
        let scanSize = layout.scanSize
        let nominal = rate > 0 ? rate : 1000
        let period = Int64(1e9 / nominal)
        let blockScans = min(max(Int(nominal.rounded()), 64), 8192)
        let t0 = SimClock.now()
        var block = [UInt8](repeating: 0, count: blockScans * scanSize)
        for k in 0..<blockScans {
            encodeScan(into: &block, at: k * scanSize, monotonicNs: t0 + Int64(k) * period, clockOffset: clockOffset, rate: nominal)
        }
        let tsElement = zip(layout.elements, channelMap).first { device.channels[$0.1].typeName == "timestamp" }?.0
        let chunkScans = max(1, Int(PIPE_BUF) / scanSize)
        var chunk = [UInt8](repeating: 0, count: chunkScans * scanSize)
        var seq = 0
        while !shouldStop {
            chunk.withUnsafeMutableBytes { dst in
                block.withUnsafeBytes { src in
                    for j in 0..<chunkScans {
                        let k = (seq + j) % blockScans
                        (dst.baseAddress! + j * scanSize).copyMemory(from: src.baseAddress! + k * scanSize, byteCount: scanSize)
                    }
                }
            }
            if let ts = tsElement {
                for j in 0..<chunkScans {
                    let v = t0 + Int64(seq + j) * period + clockOffset
                    ts.type.encode(v, into: &chunk, at: j * scanSize + ts.offset)
                }
            }
            var done = 0
            while done < chunkScans {
                let r = put(sink, chunk, from: done * scanSize, count: (chunkScans - done) * scanSize, logFD: logFD)
                if r.over { return }
                done += r.scans
                counts.written += Int64(r.scans)
                if done < chunkScans && !wait(sink, until: nil, wantSpace: true) { return }
            }
            seq += chunkScans
        }
    }
}
