import Glibc // pow, log10

/// The picture of a log, laid out in pixels, that the SVG and PNG writers draw: one panel per
/// series (sensor of a device), all on one time axis, each axis a line through the smallest and
/// largest value of every pixel column, broken where the series has a gap.
struct PlotFigure {
    /// A point in pixels (y down).
    struct Point: Equatable {
        var x: Double
        var y: Double
    }

    /// One unbroken stretch of one axis's line.
    struct Run {
        /// 0, 1, 2 for x, y, z.
        var axis: Int
        var points: [Point]
    }

    /// A label at a position along an axis (pixels).
    struct Tick {
        var at: Double
        var label: String
    }

    struct Panel {
        /// `Accelerometer  iio:device0` (with the board first in a motion-collect log).
        var title: String
        /// `g`, `m/s²`, `rad/s`, `µT`, or empty for a sensor this does not know.
        var units: String
        /// The plotting area.
        var left: Double
        var top: Double
        var width: Double
        var height: Double
        /// The values at the top and bottom edges of the area.
        var valueTop: Double
        var valueBottom: Double
        var valueTicks: [Tick]
        var timeTicks: [Tick]
        var runs: [Run]
        /// Where the series has gaps: from the last column before to the first after (pixels).
        var gaps: [(from: Double, to: Double)]
        /// Rows plotted, and the extremes per axis.
        var rows: Int
        var extremes: [(low: Double, high: Double)]

        /// The y of a value.
        func y(_ v: Double) -> Double { top + (valueTop - v) / (valueTop - valueBottom) * height }
    }

    var width: Int
    var height: Int
    var panels: [Panel]
    /// The time of x = the plotting area's left edge (the log's first timestamp) and the seconds it spans.
    var start: Double
    var span: Double

    /// The colours of the axes (as in the live view: x red, y green, z blue), RGB.
    static let axisColors: [(UInt8, UInt8, UInt8)] = [(0xd6, 0x27, 0x28), (0x2c, 0xa0, 0x2c), (0x1f, 0x77, 0xb4)]
    static let axisNames = ["x", "y", "z"]

    /// Margins around each panel's plotting area, in pixels.
    static let marginLeft = 86.0, marginRight = 24.0, marginTop = 34.0, marginBottom = 40.0

    /// Lays out the series.
    /// - Parameters:
    ///   - width: of the picture, in pixels (the plotting area is this less the margins: one
    ///     column of min/max per pixel).
    ///   - panelHeight: of each panel's plotting area.
    init(series: [PlotSeries], width: Int, panelHeight: Int) {
        self.width = width
        let plotted = series.filter { $0.rows > 0 }
        let panelTotal = Double(panelHeight) + Self.marginTop + Self.marginBottom
        height = Int(panelTotal) * max(plotted.count, 1)
        let start = plotted.map(\.first).min() ?? 0
        let end = plotted.map(\.last).max() ?? 0
        let span = end > start ? end - start : 1
        self.start = start
        self.span = span
        let areaWidth = Double(width) - Self.marginLeft - Self.marginRight
        let columns = max(Int(areaWidth), 2)
        let timeTicks = Self.ticks(from: 0, to: span, count: max(2, columns / 110)).map { t in
            Tick(at: Self.marginLeft + t.value / span * areaWidth, label: t.label)
        }
        panels = plotted.enumerated().map { i, s in
            let top = Double(i) * panelTotal + Self.marginTop
            return Self.panel(s, left: Self.marginLeft, top: top, width: areaWidth, height: Double(panelHeight),
                              columns: columns, start: start, span: span, timeTicks: timeTicks)
        }
    }

    /// The units a series' values are in, as motion-monitor writes them: an accelerometer log is
    /// in g unless `--si` made it m/s² (told apart by the mean length of the vectors: about 1 g
    /// or 9.8 m/s² under gravity).
    static func units(_ s: PlotSeries) -> String {
        switch s.sensor {
        case "accelerometer": s.normCount > 0 && s.normSum / Double(s.normCount) > 4 ? "m/s²" : "g"
        case "gyroscope": "rad/s"
        case "magnetometer": "µT"
        default: ""
        }
    }

    static func panel(_ s: PlotSeries, left: Double, top: Double, width: Double, height: Double, columns: Int,
                      start: Double, span: Double, timeTicks: [Tick]) -> Panel {
        // Buckets into columns: a bucket goes to the column of its middle.
        var low = [Double](repeating: .infinity, count: columns * 3)
        var high = [Double](repeating: -.infinity, count: columns * 3)
        var used = [Bool](repeating: false, count: columns)
        var gapBefore = [Bool](repeating: false, count: columns)
        for b in 0..<PlotSeries.bucketCount where s.counts[b] > 0 {
            let middle = s.bucketStart(b) + s.width / 2
            let c = min(max(Int((min(middle, s.last) - start) / span * Double(columns)), 0), columns - 1)
            if !used[c] && s.gapBefore[b] { gapBefore[c] = true }
            used[c] = true
            for axis in 0..<3 {
                low[c * 3 + axis] = min(low[c * 3 + axis], s.low[b * 3 + axis])
                high[c * 3 + axis] = max(high[c * 3 + axis], s.high[b * 3 + axis])
            }
        }
        // The value scale: round ticks around every axis's extremes.
        var lo = s.extremes.map(\.low).min() ?? 0
        var hi = s.extremes.map(\.high).max() ?? 0
        if !lo.isFinite || !hi.isFinite { (lo, hi) = (-1, 1) }
        if hi - lo < 1e-9 * max(1, abs(hi)) { (lo, hi) = (lo - max(0.5, abs(lo) * 0.1), hi + max(0.5, abs(hi) * 0.1)) }
        let step = niceStep((hi - lo) / 4)
        let valueBottom = (lo / step).rounded(.down) * step
        let valueTop = (hi / step).rounded(.up) * step
        let title = (s.board.isEmpty ? "" : s.board + " · ") + s.sensor.prefix(1).uppercased() + s.sensor.dropFirst() + " · " + s.devices.joined(separator: ", ")
        var panel = Panel(title: title, units: units(s), left: left, top: top, width: width, height: height,
                          valueTop: valueTop, valueBottom: valueBottom, valueTicks: [], timeTicks: timeTicks, runs: [],
                          gaps: [], rows: s.rows, extremes: s.extremes)
        panel.valueTicks = ticks(from: valueBottom, to: valueTop, count: 4).map { Tick(at: panel.y($0.value), label: $0.label) }
        // The lines: per column the smallest and largest value, in the order that continues the
        // line from the column before; broken at gaps.
        for axis in 0..<3 {
            var runs: [Run] = []
            var points: [Point] = []
            var lastX: Double?
            for c in 0..<columns where used[c] {
                let x = left + (Double(c) + 0.5) / Double(columns) * width
                if gapBefore[c] {
                    if axis == 0, let lastX { panel.gaps.append((lastX, x)) }
                    if !points.isEmpty { runs.append(Run(axis: axis, points: points)) }
                    points = []
                }
                lastX = x
                let (l, h) = (low[c * 3 + axis], high[c * 3 + axis])
                guard l.isFinite && h.isFinite else {
                    // Every value of the axis in this column was null: the line breaks.
                    if !points.isEmpty { runs.append(Run(axis: axis, points: points)) }
                    points = []
                    continue
                }
                let (yl, yh) = (panel.y(l), panel.y(h))
                if l == h {
                    points.append(Point(x: x, y: yl))
                } else if let previous = points.last, abs(previous.y - yh) < abs(previous.y - yl) {
                    points.append(Point(x: x, y: yh))
                    points.append(Point(x: x, y: yl))
                } else {
                    points.append(Point(x: x, y: yl))
                    points.append(Point(x: x, y: yh))
                }
            }
            if !points.isEmpty { runs.append(Run(axis: axis, points: points)) }
            panel.runs += runs
        }
        return panel
    }

    /// 1, 2 or 5 × a power of ten, at least `raw`.
    static func niceStep(_ raw: Double) -> Double {
        guard raw > 0, raw.isFinite else { return 1 }
        let magnitude = pow(10, (log10(raw)).rounded(.down))
        let n = raw / magnitude
        return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * magnitude
    }

    /// Round values from `a` to `b` about `count` steps apart, with their labels.
    static func ticks(from a: Double, to b: Double, count: Int) -> [(value: Double, label: String)] {
        let step = niceStep((b - a) / Double(max(count, 1)))
        let decimals = max(0, -Int((log10(step)).rounded(.down)))
        var out: [(Double, String)] = []
        var k = (a / step).rounded(.up)
        while k * step <= b + step * 1e-9 {
            out.append((k * step, fixed(k * step, decimals: decimals)))
            k += 1
        }
        return out
    }

    /// `v` with exactly `decimals` decimals (no Foundation), `-` only for a value that is not 0.
    static func fixed(_ v: Double, decimals: Int) -> String {
        guard v.isFinite else { return "\(v)" }
        let scale = pow(10, Double(decimals))
        let n = Int64((abs(v) * scale).rounded())
        let whole = n / Int64(scale)
        var text = "\(whole)"
        if decimals > 0 {
            let fraction = String(n % Int64(scale))
            text += "." + String(repeating: "0", count: decimals - fraction.count) + fraction
        }
        return (v < 0 && n != 0 ? "-" : "") + text
    }
}
