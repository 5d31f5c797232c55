@preconcurrency import Glibc // read, strtod, errno
import SystemSupport

extension ExitStatus {
    /// EX_DATAERR: a file given to `plot` is not a log it can read (empty, a bad header, a bad row).
    static let dataError: Int32 = 65
    /// EX_NOINPUT: a file given to `plot` does not exist or cannot be opened.
    static let noInput: Int32 = 66
}

/// Why a log cannot be plotted: the message names the file (and the line), the status is the
/// exit status to end with.
struct PlotError: Error, Equatable {
    var message: String
    var status: Int32
}

/// One sensor (of one board, in a `motion-collect` log), decimated as its rows
/// stream past: the samples fall into a fixed number of time buckets that keep, per axis, the
/// smallest and largest value. When a sample lands past the last bucket, neighbouring buckets are
/// merged pairwise and their width doubles, so a series of any length takes the same memory and
/// every sample (a spike between two others included) is in some bucket's extremes.
struct PlotSeries {
    /// The buckets a series keeps: at least twice the columns of any plot drawn from it.
    static let bucketCount = 8192

    /// The `board` column (empty in a motion-monitor log) and `sensor`.
    var board: String
    var sensor: String
    /// The devices the rows came from, in order (more than one when a device went away and came
    /// back under another index).
    var devices: [String]
    /// The bytes of `sensor` and `board` as the rows have them (to match rows without making
    /// strings).
    var key: [UInt8] = []
    var boardKey: [UInt8] = []
    /// The timestamp of the first row: bucket 0 starts there.
    private(set) var origin: Double
    /// Seconds per bucket.
    private(set) var width: Double
    /// Per bucket and axis (index `bucket * 3 + axis`): the smallest and largest value (NaN-free:
    /// ±infinity while empty).
    private(set) var low: [Double]
    private(set) var high: [Double]
    /// Samples per bucket.
    private(set) var counts: [Int32]
    /// Whether a gap (see ``isGap(_:period:)``) lies before the bucket's first sample.
    private(set) var gapBefore: [Bool]
    /// The first and last timestamp seen.
    private(set) var first: Double
    private(set) var last: Double
    /// Rows read.
    private(set) var rows = 0
    /// Gaps found.
    private(set) var gaps = 0
    /// The smallest and largest value over the whole series, per axis.
    private(set) var extremes: [(low: Double, high: Double)] = Array(repeating: (.infinity, -.infinity), count: 3)
    /// The sum of the vectors' lengths (with ``rows``, their mean: which units an accelerometer
    /// log is in).
    private(set) var normSum = 0.0
    private(set) var normCount = 0
    /// A running estimate of the sampling period (seconds between rows).
    private var period: Double?

    init(board: String, sensor: String, device: String, first t: Double) {
        self.board = board
        self.sensor = sensor
        devices = [device]
        origin = t
        first = t
        last = t
        width = 1.0 / 1024
        low = Array(repeating: .infinity, count: Self.bucketCount * 3)
        high = Array(repeating: -.infinity, count: Self.bucketCount * 3)
        counts = Array(repeating: 0, count: Self.bucketCount)
        gapBefore = Array(repeating: false, count: Self.bucketCount)
    }

    /// Whether a step between two rows is a gap (a device that went away, a logger that was
    /// stopped): more than half a second and more than 20 sampling periods.
    static func isGap(_ step: Double, period: Double?) -> Bool {
        step > 0.5 && step > 20 * (period ?? 0)
    }

    /// Adds one row. A non-finite value (`null` in the log) leaves its axis out of the bucket.
    @inline(__always)
    mutating func add(_ t: Double, _ x: Double, _ y: Double, _ z: Double) {
        let step = t - last
        var gap = false
        if rows > 0 {
            if Self.isGap(step, period: period) {
                gap = true
                gaps += 1
            } else if step > 0 {
                period = period.map { 0.9 * $0 + 0.1 * step } ?? step
            }
        }
        if t > last { last = t }
        rows += 1
        var offset = (t - origin) / width
        if offset >= Double(Self.bucketCount) {
            while offset >= Double(Self.bucketCount) {
                halve()
                offset = (t - origin) / width
            }
        }
        // A timestamp before the first row's (a clock that went back) goes into the first bucket.
        let b = offset > 0 ? Int(offset) : 0
        if counts[b] == 0 && gap { gapBefore[b] = true }
        counts[b] &+= 1
        put(b * 3, x, 0)
        put(b * 3 + 1, y, 1)
        put(b * 3 + 2, z, 2)
        if x.isFinite && y.isFinite && z.isFinite {
            normSum += (x * x + y * y + z * z).squareRoot()
            normCount += 1
        }
    }

    @inline(__always)
    private mutating func put(_ i: Int, _ v: Double, _ axis: Int) {
        guard v.isFinite else { return }
        if v < low[i] { low[i] = v }
        if v > high[i] { high[i] = v }
        if v < extremes[axis].low { extremes[axis].low = v }
        if v > extremes[axis].high { extremes[axis].high = v }
    }

    /// Merges buckets pairwise: twice the width, the same extremes.
    private mutating func halve() {
        let n = Self.bucketCount
        for b in 0..<(n / 2) {
            let (a, c) = (2 * b, 2 * b + 1)
            for axis in 0..<3 {
                low[b * 3 + axis] = min(low[a * 3 + axis], low[c * 3 + axis])
                high[b * 3 + axis] = max(high[a * 3 + axis], high[c * 3 + axis])
            }
            gapBefore[b] = counts[a] > 0 ? gapBefore[a] : gapBefore[c]
            counts[b] = counts[a] &+ counts[c]
        }
        for b in (n / 2)..<n {
            for axis in 0..<3 {
                low[b * 3 + axis] = .infinity
                high[b * 3 + axis] = -.infinity
            }
            counts[b] = 0
            gapBefore[b] = false
        }
        width *= 2
    }

    /// The start time of bucket `b`.
    func bucketStart(_ b: Int) -> Double { origin + Double(b) * width }
}

/// Reads logs written by `motion-monitor --csv` (or `motion-collect --csv`, with its `board`
/// column) in one pass, a chunk at a time, never holding more than a chunk and the series'
/// buckets: a log of any length plots in the memory of a short one.
struct PlotReader {
    /// The series found, in the order their first rows came.
    private(set) var series: [PlotSeries] = []
    /// Rows read over all files.
    private(set) var rows = 0
    /// Which series the last row belonged to (rows come in batches of one sensor), and its labels.
    private var lastSeries = -1
    private var lastSensor: [UInt8] = []
    private var lastBoard: [UInt8] = []
    private var lastDevice: [UInt8] = []

    /// The header of a motion-monitor log, and of a motion-collect log.
    static let header = Array(CSVFormat.header.utf8)
    static let boardHeader = Array(("board," + CSVFormat.header).utf8)

    /// The size of a read.
    static let chunk = 1 << 20

    init() {}

    /// Reads one file (or FIFO) to its end.
    /// - Parameter path: the file; named in every error.
    /// Lines that begin with `#` are comments and are skipped.
    /// - Throws: ``PlotError``: the file cannot be opened or read (66, 74), is empty, does not
    ///   begin with the header, or has a row that is not `timestamp,sensor,device,x,y,z` (65).
    mutating func read(path: String) throws(PlotError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw PlotError(message: "\(MonitorOptions.commandName) plot: cannot open \(path): \(errnoDescription(errno)).", status: ExitStatus.noInput)
        }
        defer { _ = close(fd) }
        let capacity = Self.chunk + 4096
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity + 1)
        defer { buffer.deallocate() }
        var filled = 0
        var line = 0
        var boardColumn: Bool? = nil
        let cuts = UnsafeMutablePointer<Int>.allocate(capacity: 8)
        defer { cuts.deallocate() }
        var atEnd = false
        while !atEnd {
            if filled == capacity {
                throw PlotError(message: "\(MonitorOptions.commandName) plot: \(path):\(line + 1): a line longer than \(capacity) bytes; not a motion-monitor log.", status: ExitStatus.dataError)
            }
            let n = Glibc.read(fd, buffer + filled, min(Self.chunk, capacity - filled))
            if n < 0 {
                if errno == EINTR { continue }
                throw PlotError(message: "\(MonitorOptions.commandName) plot: reading \(path) failed: \(errnoDescription(errno)).", status: ExitStatus.ioError)
            }
            if n == 0 {
                atEnd = true
                // The last line may lack its newline (a log cut short): it is still a line.
                if filled > 0 && buffer[filled - 1] != UInt8(ascii: "\n") {
                    buffer[filled] = UInt8(ascii: "\n")
                    filled += 1
                }
            } else {
                filled += n
            }
            var start = 0
            while start < filled {
                guard let nl = memchr(buffer + start, Int32(UInt8(ascii: "\n")), filled - start) else { break }
                let end = UnsafeMutablePointer<UInt8>(nl.assumingMemoryBound(to: UInt8.self)) - buffer
                line += 1
                var lineEnd = end
                if lineEnd > start && buffer[lineEnd - 1] == UInt8(ascii: "\r") { lineEnd -= 1 }
                if lineEnd > start && buffer[start] == UInt8(ascii: "#") {
                    // A comment: motion-monitor writes one under the header saying which readings are calibrated.
                } else if let hasBoard = boardColumn {
                    try row(buffer + start, count: lineEnd - start, board: hasBoard, cuts: cuts, path: path, line: line)
                } else {
                    let text = UnsafeBufferPointer(start: buffer + start, count: lineEnd - start)
                    if text.elementsEqual(Self.header) {
                        boardColumn = false
                    } else if text.elementsEqual(Self.boardHeader) {
                        boardColumn = true
                    } else {
                        throw PlotError(message: "\(MonitorOptions.commandName) plot: \(path):\(line): expected the header \(CSVFormat.header) of a motion-monitor log, found \(Self.quote(text)).", status: ExitStatus.dataError)
                    }
                }
                start = end + 1
            }
            if start > 0 {
                (buffer).update(from: buffer + start, count: filled - start)
                filled -= start
            }
        }
        if boardColumn == nil {
            throw PlotError(message: "\(MonitorOptions.commandName) plot: \(path) is empty: a motion-monitor log begins with the header \(CSVFormat.header).", status: ExitStatus.dataError)
        }
    }

    /// A line as it was, shortened, for an error message.
    static func quote(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        let text = String(decoding: bytes.prefix(80), as: UTF8.self)
        return "'" + text + (bytes.count > 80 ? "…" : "") + "'"
    }

    /// Parses one row into its series.
    /// - Parameter cuts: room for 8 field starts.
    @inline(__always)
    private mutating func row(_ p: UnsafeMutablePointer<UInt8>, count: Int, board: Bool, cuts: UnsafeMutablePointer<Int>,
                              path: String, line: Int) throws(PlotError) {
        if count == 0 { return } // a blank line (at the end of a log cut short)
        if p[0] == UInt8(ascii: "#") { return } // a comment (whether the rows under it are calibrated)
        // Field k runs from cuts[k] to cuts[k + 1] - 1 (its comma, or the line's end).
        let wanted = board ? 7 : 6
        cuts[0] = 0
        var found = 1
        var i = 0
        while i < count {
            if p[i] == 0x2C { // ,
                if found < 7 { cuts[found] = i + 1 }
                found += 1
            }
            i += 1
        }
        guard found == wanted else {
            throw PlotError(message: "\(MonitorOptions.commandName) plot: \(path):\(line): expected \(wanted) fields (\(board ? "board," : "")\(CSVFormat.header)), found \(found): \(Self.quote(UnsafeBufferPointer(start: p, count: count))).", status: ExitStatus.dataError)
        }
        cuts[wanted] = count + 1
        let f0 = board ? 1 : 0
        if cuts[f0 + 2] - 1 <= cuts[f0 + 1] || cuts[f0 + 3] - 1 <= cuts[f0 + 2] || (board && cuts[1] - 1 <= 0) {
            let name = cuts[f0 + 2] - 1 <= cuts[f0 + 1] ? "sensor" : cuts[f0 + 3] - 1 <= cuts[f0 + 2] ? "device" : "board"
            throw PlotError(message: "\(MonitorOptions.commandName) plot: \(path):\(line): the \(name) field is empty: \(Self.quote(UnsafeBufferPointer(start: p, count: count))).", status: ExitStatus.dataError)
        }
        let t = try number(p, cuts[f0], cuts[f0 + 1] - 1, "timestamp", nullable: false, count: count, path: path, line: line)
        let x = try number(p, cuts[f0 + 3], cuts[f0 + 4] - 1, "x", nullable: true, count: count, path: path, line: line)
        let y = try number(p, cuts[f0 + 4], cuts[f0 + 5] - 1, "y", nullable: true, count: count, path: path, line: line)
        let z = try number(p, cuts[f0 + 5], cuts[f0 + 6] - 1, "z", nullable: true, count: count, path: path, line: line)
        let s = seriesIndex(sensor: UnsafeBufferPointer(start: p + cuts[f0 + 1], count: cuts[f0 + 2] - 1 - cuts[f0 + 1]),
                            device: UnsafeBufferPointer(start: p + cuts[f0 + 2], count: cuts[f0 + 3] - 1 - cuts[f0 + 2]),
                            board: UnsafeBufferPointer(start: p, count: board ? cuts[1] - 1 : 0), t: t)
        series[s].add(t, x, y, z)
        rows += 1
    }

    /// The number in `p[a..<b]` (cut off in place by a NUL where its comma or the line's end was,
    /// put back after), NaN for `null` when `nullable`.
    @inline(__always)
    private func number(_ p: UnsafeMutablePointer<UInt8>, _ a: Int, _ b: Int, _ name: String, nullable: Bool,
                        count: Int, path: String, line: Int) throws(PlotError) -> Double {
        if nullable && b - a == 4 && p[a] == UInt8(ascii: "n") && p[a + 1] == UInt8(ascii: "u") && p[a + 2] == UInt8(ascii: "l") && p[a + 3] == UInt8(ascii: "l") {
            return .nan
        }
        let saved = p[b]
        p[b] = 0
        var end: UnsafeMutablePointer<CChar>? = nil
        let start = UnsafeMutableRawPointer(p + a).assumingMemoryBound(to: CChar.self)
        let v = strtod(start, &end)
        p[b] = saved
        guard b > a, end == start + (b - a), v.isFinite, p[a] > 0x20 else {
            let text = String(decoding: UnsafeBufferPointer(start: p + a, count: b - a), as: UTF8.self)
            throw PlotError(message: "\(MonitorOptions.commandName) plot: \(path):\(line): the \(name) '\(text)' is not a number\(nullable ? " (or null)" : ""): \(Self.quote(UnsafeBufferPointer(start: p, count: count))).", status: ExitStatus.dataError)
        }
        return v
    }

    /// The series of a row's labels: the last row's when they match (the common case: rows come
    /// in batches), else found or made. A series is a sensor (of a board): motion-monitor reads
    /// one device per sensor, and a device that came back under another index
    /// (`--wait-for-device`) goes on in the same series.
    @inline(__always)
    private mutating func seriesIndex(sensor: UnsafeBufferPointer<UInt8>, device: UnsafeBufferPointer<UInt8>, board: UnsafeBufferPointer<UInt8>, t: Double) -> Int {
        func same(_ a: [UInt8], _ b: UnsafeBufferPointer<UInt8>) -> Bool {
            a.count == b.count && (b.isEmpty || a.withUnsafeBufferPointer { memcmp($0.baseAddress!, b.baseAddress!, b.count) == 0 })
        }
        if lastSeries >= 0 && same(lastSensor, sensor) && same(lastBoard, board) && same(lastDevice, device) { return lastSeries }
        var index = -1
        for (i, s) in series.enumerated() where same(s.key, sensor) && same(s.boardKey, board) {
            index = i
            break
        }
        if index < 0 {
            series.append(PlotSeries(board: String(decoding: board, as: UTF8.self), sensor: String(decoding: sensor, as: UTF8.self),
                                     device: String(decoding: device, as: UTF8.self), first: t))
            series[series.count - 1].key = Array(sensor)
            series[series.count - 1].boardKey = Array(board)
            index = series.count - 1
        }
        let name = String(decoding: device, as: UTF8.self)
        if !series[index].devices.contains(name) { series[index].devices.append(name) }
        (lastSeries, lastSensor, lastBoard, lastDevice) = (index, Array(sensor), Array(board), Array(device))
        return index
    }
}
