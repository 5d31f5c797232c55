/// The last seconds of one sensor's samples for the live view's history chart: a ring of time
/// bins of 1/50 s (20 s in all) keeping, per axis, the smallest and largest value of every
/// sample that fell in the bin. Adding a sample writes a few doubles into memory allocated once:
/// no allocation, no system call, no wake-up; the chart is made from the bins when a frame is
/// drawn (``chart(seconds:columns:)``).
struct HistoryRing: Sendable {
    /// Bins per second, and how many the ring keeps.
    static let binsPerSecond = 50.0
    static let capacity = 1000
    /// Per bin and axis (`bin * 3 + axis`): ±infinity while empty.
    private var low: [Double]
    private var high: [Double]
    /// The absolute index (timestamp × ``binsPerSecond``) of the newest bin, nil before any sample.
    private(set) var newest: Int?

    init() {
        low = Array(repeating: .infinity, count: Self.capacity * 3)
        high = Array(repeating: -.infinity, count: Self.capacity * 3)
    }

    /// Forgets every sample (a device that came back: its timestamps may start anew).
    mutating func clear() {
        for i in low.indices {
            low[i] = .infinity
            high[i] = -.infinity
        }
        newest = nil
    }

    /// Adds one sample; a sample older than the ring (or not finite) is left out.
    @inline(__always)
    mutating func add(_ t: Double, _ v: AxisTriple) {
        guard t.isFinite, abs(t) < 1e12 else { return }
        let bin = Int((t * Self.binsPerSecond).rounded(.down))
        if let n = newest {
            if bin > n {
                // Empty the bins between the newest and this one (at most the whole ring).
                var k = max(n + 1, bin - Self.capacity + 1)
                while k <= bin {
                    let i = Self.slot(k) * 3
                    low[i] = .infinity; low[i + 1] = .infinity; low[i + 2] = .infinity
                    high[i] = -.infinity; high[i + 1] = -.infinity; high[i + 2] = -.infinity
                    k += 1
                }
                newest = bin
            } else if bin <= n - Self.capacity {
                return
            }
        } else {
            newest = bin
        }
        let i = Self.slot(bin) * 3
        put(i, v.x)
        put(i + 1, v.y)
        put(i + 2, v.z)
    }

    @inline(__always)
    private mutating func put(_ i: Int, _ v: Double) {
        guard v.isFinite else { return }
        if v < low[i] { low[i] = v }
        if v > high[i] { high[i] = v }
    }

    private static func slot(_ bin: Int) -> Int {
        let r = bin % capacity
        return r < 0 ? r + capacity : r
    }

    /// The last `seconds` (up to the newest sample) in `columns` columns: per column and axis the
    /// smallest and largest value of the bins it covers.
    func chart(seconds: Double, columns: Int) -> HistoryChart {
        let columns = max(columns, 1)
        var chart = HistoryChart(seconds: seconds, columns: columns)
        guard let n = newest else { return chart }
        let bins = min(Self.capacity, max(1, Int(seconds * Self.binsPerSecond)))
        let first = n - bins + 1
        for k in first...n {
            let c = (k - first) * columns / bins
            let i = Self.slot(k) * 3
            for axis in 0..<3 where low[i + axis] <= high[i + axis] {
                chart.put(column: c, axis: axis, low: low[i + axis], high: high[i + axis])
            }
        }
        return chart
    }
}

/// The three values of a sample, as the ring takes them.
struct AxisTriple: Sendable {
    var x: Double, y: Double, z: Double
}

/// What the history chart of a panel shows: per column (oldest first) and axis the smallest and
/// largest value, over the last ``seconds``.
struct HistoryChart: Equatable, Sendable {
    var seconds: Double
    var columns: Int
    /// `column * 3 + axis`; ±infinity for a column without samples.
    var low: [Double]
    var high: [Double]
    /// The smallest and largest value of any axis in the chart.
    var extremes: (low: Double, high: Double) = (.infinity, -.infinity)

    init(seconds: Double, columns: Int) {
        self.seconds = seconds
        self.columns = columns
        low = Array(repeating: .infinity, count: columns * 3)
        high = Array(repeating: -.infinity, count: columns * 3)
    }

    mutating func put(column c: Int, axis: Int, low l: Double, high h: Double) {
        let i = c * 3 + axis
        low[i] = min(low[i], l)
        high[i] = max(high[i], h)
        extremes = (min(extremes.low, l), max(extremes.high, h))
    }

    var isEmpty: Bool { extremes.low > extremes.high }

    static func == (a: HistoryChart, b: HistoryChart) -> Bool {
        a.seconds == b.seconds && a.columns == b.columns && a.low == b.low && a.high == b.high
    }
}

extension LiveScreen {
    /// How many seconds the history chart shows.
    static let historySeconds = 10.0
    /// The columns left of the chart: its scale.
    static let historyLabelWidth = 12

    /// A value of the chart's scale: four decimals, fewer for large values (at most 9 columns).
    static func scaleLabel(_ v: Double) -> String {
        Format.fixed(v, abs(v) < 1000 ? 4 : abs(v) < 100_000 ? 2 : 0, sign: true)
    }

    /// The history chart of a panel, `rows` lines high and `width` columns wide (the scale on
    /// the left), then its time axis. In colour with Unicode: braille dots (2 × 4 per character,
    /// U+2800), each character in the colour of the axis with most dots in it; otherwise the
    /// letters x, y and z on a grid of characters (`*` where two meet).
    static func historyLines(_ chart: HistoryChart, rows: Int, width: Int, style: ScreenStyle) -> [StyledLine] {
        let cells = max(1, width - historyLabelWidth)
        let braille = style.unicode && style.color
        let (dotsX, dotsY) = braille ? (2, 4) : (1, 1)
        let columns = cells * dotsX, dotRows = rows * dotsY
        var lo = chart.extremes.low, hi = chart.extremes.high
        if chart.isEmpty { (lo, hi) = (-1, 1) }
        if hi - lo < 1e-9 { (lo, hi) = (lo - 0.5, hi + 0.5) }
        func dotRow(_ v: Double) -> Int { min(dotRows - 1, max(0, Int(((hi - v) / (hi - lo) * Double(dotRows - 1)).rounded()))) }
        // Dots per cell and axis.
        var counts = [Int](repeating: 0, count: cells * rows * 3)
        var bits = [UInt8](repeating: 0, count: cells * rows)
        let brailleBit: [[UInt8]] = [[0x01, 0x02, 0x04, 0x40], [0x08, 0x10, 0x20, 0x80]]
        for axis in 0..<3 {
            var previous: (top: Int, bottom: Int)?
            for c in 0..<columns {
                // The chart's columns onto the screen's dot columns.
                let from = c * chart.columns / columns, to = max(from + 1, (c + 1) * chart.columns / columns)
                var l = Double.infinity, h = -Double.infinity
                for k in from..<min(to, chart.columns) {
                    l = min(l, chart.low[k * 3 + axis])
                    h = max(h, chart.high[k * 3 + axis])
                }
                guard l <= h else { continue } // no samples: the line goes on from the last column that had some
                var top = dotRow(h), bottom = dotRow(l)
                // Join the column before: the line does not break between neighbouring columns.
                if let p = previous {
                    if p.bottom < top { top = p.bottom }
                    if p.top > bottom { bottom = p.top }
                }
                previous = (dotRow(h), dotRow(l))
                for r in top...bottom {
                    let cell = (r / dotsY) * cells + c / dotsX
                    counts[cell * 3 + axis] += 1
                    if braille { bits[cell] |= brailleBit[c % 2][r % 4] }
                }
            }
        }
        var lines: [StyledLine] = []
        for row in 0..<rows {
            let label = row == 0 ? scaleLabel(hi) : row == rows - 1 ? scaleLabel(lo) : ""
            var line = StyledLine("  " + String(repeating: " ", count: max(0, historyLabelWidth - 3 - label.count)) + label, dim)
            line.add(style.unicode ? "┤" : "|", dim)
            var run = "", runStyle: String?
            for cell in 0..<cells {
                let i = row * cells + cell
                let n = (counts[i * 3], counts[i * 3 + 1], counts[i * 3 + 2])
                let axes = (n.0 > 0 ? 1 : 0) + (n.1 > 0 ? 1 : 0) + (n.2 > 0 ? 1 : 0)
                let strongest = n.0 >= n.1 && n.0 >= n.2 ? 0 : n.1 >= n.2 ? 1 : 2
                var ch: Character = " "
                var s: String? = nil
                if axes > 0 {
                    if braille {
                        ch = Character(Unicode.Scalar(0x2800 + UInt32(bits[i]))!)
                    } else {
                        ch = axes > 1 ? "*" : Character(["x", "y", "z"][strongest])
                    }
                    s = style.color ? axisColors[strongest] : nil
                }
                if s != runStyle && !run.isEmpty {
                    line.add(run, runStyle)
                    run = ""
                }
                runStyle = s
                run.append(ch)
            }
            line.add(run, runStyle)
            lines.append(line)
        }
        // The time axis: seconds before the newest sample.
        var axis = String(repeating: " ", count: historyLabelWidth - 1) + (style.unicode ? "└" : "+")
        let marks = [(0.0, "-\(Format.shortest(chart.seconds)) s"), (0.5, "-\(Format.shortest(chart.seconds / 2)) s"), (1.0, "now")]
        var ruler = Array(String(repeating: style.unicode ? "─" : "-", count: cells))
        for (at, text) in marks {
            let start = min(max(0, Int(at * Double(cells - 1)) - (at == 0 ? 0 : at == 1 ? text.count - 1 : text.count / 2)), max(0, cells - text.count))
            for (k, ch) in text.enumerated() where start + k < ruler.count { ruler[start + k] = ch }
        }
        axis += String(ruler)
        lines.append(StyledLine(axis, dim))
        return lines
    }
}
