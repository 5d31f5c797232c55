import IIOMotion

/// What one panel of the live view shows: a sensor's device, mode, rates, newest sample and
/// counts, or why there is no panel (a missing sensor) or no more data (an error).
struct PanelModel: Equatable, Sendable {
    var kind: SensorKind
    /// `iio:device0 (bmi160)`; nil for a sensor this machine does not have.
    var device: String?
    /// Buffered or polled, once started.
    var mode: SensorMode?
    /// The sampling frequency in force, in Hz, as read back from the device.
    var frequency: Double?
    /// `--rate`, in Hz.
    var requestedRate: Double?
    /// `--interval`, in seconds: how often the view is asked to update.
    var interval: Double
    /// The full scale of the bars, ± this, in the units shown.
    var range: Double
    /// `g`, `m/s²`, `rad/s`.
    var unit: String
    /// The newest sample's axes, and its timestamp.
    var latest: AxisValues?
    var latestTimestamp: Double?
    /// Samples received.
    var samples = 0
    /// Samples the view has drawn (the others were coalesced: newer ones replaced them first).
    var shown = 0
    /// Samples missing from the stream (gaps in the timestamps); nil when that cannot be told.
    var lost: Int?
    /// Samples per second, from the samples' own timestamps.
    var measuredRate: Double?
    /// View updates with a new sample per second.
    var measuredUpdates: Double?
    /// `Accelerometer encountered error: …`, once the sensor has stopped.
    var error: String?
    /// The last seconds of every axis, when the view shows history instead of bars.
    var history: HistoryChart?

    /// Samples received but never drawn.
    var coalesced: Int { max(0, samples - shown) }
}

/// What the device motion panel shows: the reference frame, the sensors fused, the newest
/// estimate (angles in degrees on screen), and how often estimates arrive.
struct MotionPanelModel: Equatable, Sendable {
    /// `--reference-frame`.
    var frame: MonitorOptions.ReferenceFrameChoice
    /// `--interval`, in seconds (0: every estimate).
    var interval: Double
    /// The sensors fused, once started.
    var sources: [SensorKind]?
    /// The newest estimate.
    var latest: DeviceMotion?
    /// Estimates received.
    var estimates = 0
    /// Estimates per second, from their own timestamps.
    var measuredRate: Double?
    /// `Device motion encountered error: …`, once it has stopped.
    var error: String?
}

/// The whole screen of the live view.
struct ScreenModel: Equatable, Sendable {
    /// The libiio context, e.g. `local:`.
    var uri: String
    /// Seconds since the view started.
    var elapsed: Double
    /// `--csv`: the log's name, its rows, and why it stopped if it did.
    var log: (name: String, rows: Int, failure: String?)?
    var panels: [PanelModel]
    /// The device motion panel, after the sensors' panels; nil when device motion is not shown.
    var motion: MotionPanelModel?
    /// Notices of the library (a polled fallback and why).
    var notes: [String] = []
    /// Whether keys are read (stdin is the terminal): the title names them.
    var keys = false
    /// The sensors' panels show the history chart (key `h`) instead of bars.
    var showHistory = false
    /// The view is paused (space or `p`): the frame stays as it was.
    var paused = false

    static func == (a: ScreenModel, b: ScreenModel) -> Bool {
        a.uri == b.uri && a.elapsed == b.elapsed && a.panels == b.panels && a.motion == b.motion && a.notes == b.notes
            && a.keys == b.keys && a.showHistory == b.showHistory && a.paused == b.paused
            && a.log?.name == b.log?.name && a.log?.rows == b.log?.rows && a.log?.failure == b.log?.failure
    }
}

/// The look of the live view: colour (SGR escapes) and Unicode (block bars, rules) or not.
struct ScreenStyle: Equatable, Sendable {
    var color: Bool
    var unicode: Bool
}

/// Text with styles, clipped to a width: one line of the live view.
struct StyledLine: Equatable, Sendable {
    /// SGR parameters, e.g. `"1"` bold, `"31"` red, `"2"` dim.
    typealias Style = String
    private(set) var spans: [(text: String, style: Style?)] = []

    init() {}

    init(_ text: String, _ style: Style? = nil) { add(text, style) }

    static func == (a: StyledLine, b: StyledLine) -> Bool { a.plain == b.plain }

    /// Appends text.
    mutating func add(_ text: String, _ style: Style? = nil) {
        if !text.isEmpty { spans.append((text, style)) }
    }

    /// The text without styles.
    var plain: String { spans.map(\.text).joined() }

    /// Display columns (every character the view uses is one column wide).
    var width: Int { spans.reduce(0) { $0 + $1.text.count } }

    /// The line for the terminal: at most `width` columns, styles as SGR escapes when `color`.
    func render(width: Int, color: Bool) -> String {
        var out = ""
        var left = width
        for (text, style) in spans where left > 0 {
            let piece = text.count <= left ? text : String(text.prefix(left))
            left -= piece.count
            if color, let style {
                out += "\u{1B}[\(style)m\(piece)\u{1B}[0m"
            } else {
                out += piece
            }
        }
        return out
    }
}

/// Draws the live view's lines from a ``ScreenModel``. Pure: the tests render screens directly.
enum LiveScreen {
    static let bold = "1", dim = "2", red = "31", green = "32", yellow = "33", blue = "94", boldRed = "1;31"

    /// The colour of each axis's bar: x red, y green, z blue (the usual axis colours).
    static let axisColors = [red, green, blue]

    /// The screen's lines, at most `height`, each at most `width − 1` columns (the last column
    /// is left alone so no terminal wraps early).
    static func lines(_ screen: ScreenModel, width: Int, height: Int, style: ScreenStyle) -> [String] {
        let w = max(20, width) - 1
        var out: [StyledLine] = []
        var title = StyledLine("motion-monitor", bold)
        title.add("  \(screen.uri)  \(clock(screen.elapsed))  Ctrl-C stops", dim)
        if screen.keys { title.add(screen.showHistory ? "  h: bars" : "  h: history", dim); title.add("  space: pause", dim) }
        if screen.paused { title.add("  PAUSED", style.color ? "7" : nil) }
        out.append(title)
        if let log = screen.log {
            var line = StyledLine("log ")
            line.add(log.name, bold)
            line.add(": \(log.rows) rows")
            if let failure = log.failure { line.add("  stopped: \(failure)", boldRed) }
            out.append(line)
        }
        // History charts share what height the rest leaves: 2 to 10 rows each.
        var chartRows = 0
        if screen.showHistory {
            let charts = screen.panels.filter { $0.history != nil && $0.device != nil }.count
            if charts > 0 {
                var others = out.count + (screen.notes.isEmpty ? 0 : 1 + screen.notes.count)
                for panel in screen.panels { others += 1 + self.panel(panel, width: w, style: style, chartRows: 0).count }
                if let motion = screen.motion { others += 1 + motionPanel(motion, width: w, style: style).count }
                chartRows = min(10, max(2, (height - others) / charts))
            }
        }
        for panel in screen.panels {
            out.append(StyledLine())
            out += self.panel(panel, width: w, style: style, chartRows: chartRows)
        }
        if let motion = screen.motion {
            out.append(StyledLine())
            out += self.motionPanel(motion, width: w, style: style)
        }
        if !screen.notes.isEmpty { out.append(StyledLine()) }
        for note in screen.notes {
            out += wrap("note: \(note)", width: w).map { StyledLine($0, yellow) }
        }
        if out.count > height, height >= 2 {
            let hidden = out.count - (height - 1)
            out = Array(out.prefix(height - 1))
            out.append(StyledLine("… \(hidden) more lines: make the terminal taller", dim))
        }
        return out.map { $0.render(width: w, color: style.color) }
    }

    /// One sensor's lines.
    /// - Parameter chartRows: with a ``PanelModel/history``, the history chart's height in lines
    ///   (0: the history view's lines without the chart, to measure them); nil: bars.
    static func panel(_ p: PanelModel, width: Int, style: ScreenStyle, chartRows: Int? = nil) -> [StyledLine] {
        let name = p.kind.rawValue.prefix(1).uppercased() + p.kind.rawValue.dropFirst()
        guard let device = p.device else {
            return [StyledLine(Report.missingMessage(p.kind), yellow)]
        }
        var header = StyledLine(name, bold)
        header.add("  \(device)")
        if let mode = p.mode { header.add("  \(mode)", dim) } else if p.error == nil { header.add("  starting…", dim) }
        header.add("  ±\(rangeText(p.range)) \(p.unit)", dim)
        var lines = [header]
        if let error = p.error {
            lines += wrap(error, width: width - 2).map { StyledLine("  " + $0, boldRed) }
        }
        let values = p.latest.map { [$0.x, $0.y, $0.z] }
        if let chartRows, let history = p.history {
            // The newest values on one line, then the chart and its time axis.
            var line = StyledLine(" ")
            for (i, axis) in ["x", "y", "z"].enumerated() {
                line.add(" \(axis) ", style.color ? axisColors[i] : nil)
                line.add(values.map { Format.fixed($0[i], 4, sign: true) } ?? "—", p.error == nil ? bold : dim)
            }
            line.add(" " + p.unit)
            lines.append(line)
            if chartRows > 0 { lines += historyLines(history, rows: chartRows, width: width, style: style) }
            lines.append(rates(p, width: width))
            var counts = StyledLine("  \(p.samples) samples, \(p.coalesced) coalesced, ")
            counts.add("\(p.lost.map(String.init) ?? "?") lost", (p.lost ?? 0) > 0 ? boldRed : nil)
            lines.append(counts)
            return lines
        }
        for (i, axis) in ["x", "y", "z"].enumerated() {
            var line = StyledLine("  \(axis) ")
            let value = values.map { Format.fixed($0[i], 4, sign: true) } ?? "—"
            let text = String(repeating: " ", count: max(0, 9 - value.count)) + value
            line.add(text, p.error == nil ? bold : dim)
            line.add(" " + p.unit.padding(to: 5) + " ")
            let barWidth = width - line.width
            if barWidth >= 9 {
                for (text, s) in bar(values?[i], range: p.range, width: barWidth, unicode: style.unicode, color: axisColors[i]) {
                    line.add(text, s)
                }
            }
            lines.append(line)
        }
        lines.append(rates(p, width: width))
        var counts = StyledLine("  \(p.samples) samples, \(p.coalesced) coalesced, ")
        counts.add("\(p.lost.map(String.init) ?? "?") lost", (p.lost ?? 0) > 0 ? boldRed : nil)
        lines.append(counts)
        return lines
    }

    /// The device motion panel: roll, pitch and yaw in degrees with bars (±180°, pitch ±90°),
    /// gravity, user acceleration and rotation rate, the heading in a north-referenced frame.
    static func motionPanel(_ p: MotionPanelModel, width: Int, style: ScreenStyle) -> [StyledLine] {
        var header = StyledLine("Device motion", bold)
        header.add("  \(p.frame.frameName)")
        if let sources = p.sources {
            header.add("  from \(sources.map(\.rawValue).joined(separator: ", "))", dim)
        } else if p.error == nil {
            header.add("  starting…", dim)
        }
        var lines = [header]
        if let error = p.error {
            lines += wrap(error, width: width - 2).map { StyledLine("  " + $0, boldRed) }
        }
        let valueStyle = p.error == nil ? bold : dim
        let m = p.latest
        let angles: [(String, Double?, Double)] = [
            ("roll", m?.attitude.roll, 180), ("pitch", m?.attitude.pitch, 90), ("yaw", m?.attitude.yaw, 180),
        ]
        for (i, (name, radians, range)) in angles.enumerated() {
            var line = StyledLine("  " + name.padding(to: 6))
            let value = radians.map { Format.fixed($0 * 180 / .pi, 2, sign: true) } ?? "—"
            line.add(String(repeating: " ", count: max(0, 8 - value.count)) + value, valueStyle)
            line.add("° ±\(Int(range))".padding(to: 8))
            let barWidth = width - line.width
            if barWidth >= 9 {
                for (text, s) in bar(radians.map { $0 * 180 / .pi }, range: range, width: barWidth, unicode: style.unicode, color: axisColors[i]) {
                    line.add(text, s)
                }
            }
            lines.append(line)
        }
        let vectors: [(String, [Double]?, String)] = [
            ("gravity", m.map { [$0.gravity.x, $0.gravity.y, $0.gravity.z] }, "g"),
            ("user", m.map { [$0.userAcceleration.x, $0.userAcceleration.y, $0.userAcceleration.z] }, "g"),
            ("rotation", m.map { [$0.rotationRate.x, $0.rotationRate.y, $0.rotationRate.z] }, "rad/s"),
        ]
        for (name, values, unit) in vectors {
            var line = StyledLine("  " + name.padding(to: 9))
            for (i, axis) in ["x", "y", "z"].enumerated() {
                let value = values.map { Format.fixed($0[i], 4, sign: true) } ?? "—"
                line.add(" \(axis) ")
                line.add(String(repeating: " ", count: max(0, 7 - value.count)) + value, valueStyle)
            }
            line.add(" " + unit)
            lines.append(line)
        }
        if p.frame.frame.isNorthReferenced {
            var line = StyledLine("  heading  ")
            if let heading = m?.heading, heading >= 0 {
                line.add(Format.fixed(heading, 1) + "°", valueStyle)
                line.add(" from magnetic north (\(compassPoint(heading)))")
            } else {
                line.add("—", dim)
            }
            lines.append(line)
        }
        let view = p.interval > 0 ? "every \(Format.shortest(p.interval)) s" : "every estimate"
        let measured = p.measuredRate.map { Format.fixed($0, 1) + "/s" } ?? "–"
        lines.append(StyledLine("  \(p.estimates) estimates, view \(view), measured \(measured)"))
        return lines
    }

    /// `N`, `NE`, … for a heading in degrees.
    static func compassPoint(_ degrees: Double) -> String {
        let points = ["N", "NE", "E", "SE", "S", "SW", "W", "NW"]
        let i = Int(((degrees.truncatingRemainder(dividingBy: 360) + 360 + 22.5) / 45).rounded(.down)) % 8
        return points[i]
    }

    /// `  100 Hz (asked 100 Hz), measured 99.9 Hz; view every 0.1 s, 10.0/s`, shortened to fit.
    static func rates(_ p: PanelModel, width: Int) -> StyledLine {
        let inForce = p.frequency.map { "\(Format.shortest($0)) Hz" } ?? "? Hz"
        let asked = p.requestedRate.map { " (asked \(Format.shortest($0)) Hz)" } ?? ""
        let measured = p.measuredRate.map { Format.fixed($0, 1) + " Hz" } ?? "–"
        let view = p.interval > 0 ? "every \(Format.shortest(p.interval)) s" : "every sample"
        let updates = p.measuredUpdates.map { Format.fixed($0, 1) + "/s" } ?? "–"
        let long = "  sampling \(inForce)\(asked), measured \(measured); view \(view), measured \(updates)"
        if long.count <= width { return StyledLine(long) }
        return StyledLine("  \(inForce), \(measured) measured; \(updates)")
    }

    /// A bar from −range to +range around a centre mark, filled from the centre to the value;
    /// a value beyond the range ends in an arrow.
    static func bar(_ value: Double?, range: Double, width: Int, unicode: Bool, color: String) -> [(String, String?)] {
        let half = max(1, (width - 1) / 2)
        let track = unicode ? "─" : "-", full = unicode ? "█" : "#", centre = unicode ? "│" : "|"
        guard let value, value.isFinite, range > 0 else {
            let side = String(repeating: track, count: half)
            return [(side + centre + side, dim)]
        }
        let fraction = min(abs(value) / range, 1)
        let cells = fraction * Double(half)
        var filled = Int(cells)
        var partial = cells - Double(filled) >= 0.5
        let overflow = abs(value) > range
        if filled >= half { filled = half; partial = false }
        var fill = String(repeating: full, count: overflow ? max(0, filled - 1) : filled)
        let empty = half - filled - (partial ? 1 : 0)
        let trackText = String(repeating: track, count: max(0, empty))
        if value >= 0 {
            if partial { fill += unicode ? "▌" : "+" }
            if overflow { fill += unicode ? "▶" : ">" }
            return [(String(repeating: track, count: half), dim), (centre, nil), (fill, color), (trackText, dim)]
        } else {
            if partial { fill = (unicode ? "▐" : "+") + fill }
            if overflow { fill = (unicode ? "◀" : "<") + fill }
            return [(trackText, dim), (fill, color), (centre, nil), (String(repeating: track, count: half), dim)]
        }
    }

    /// `2.00`, `34.9`, `156`: three significant digits, for the range.
    static func rangeText(_ r: Double) -> String {
        r < 10 ? Format.fixed(r, 2) : r < 100 ? Format.fixed(r, 1) : Format.fixed(r, 0)
    }

    /// `00:01:23`.
    static func clock(_ seconds: Double) -> String {
        let s = max(0, Int(seconds))
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(two(s / 3600)):\(two(s / 60 % 60)):\(two(s % 60))"
    }

    /// Words wrapped to `width` columns (a word longer than that is cut).
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var current = ""
        for word in text.split(separator: " ") {
            if current.isEmpty {
                current = String(word)
            } else if current.count + 1 + word.count <= width {
                current += " " + word
            } else {
                lines.append(current)
                current = String(word)
            }
        }
        if !current.isEmpty { lines.append(current) }
        return lines.map { $0.count > width ? String($0.prefix(width)) : $0 }
    }

    /// The ± full scale of a sensor's bars, in the units shown.
    ///
    /// IIOMotion does not publish a sensor's range, so it is estimated as the kernel does for
    /// 16-bit sensors (bmi160, lsm6dsx, inv_mpu6050, cros-ec): `scale × 2¹⁵`. When that is not a
    /// plausible motion-sensor range (HID sensor hubs report 32-bit values in 0.01 g steps), the
    /// usual ±2 g or ±2000 °/s is used instead.
    static func range(of sensor: SensorInfo, units: MotionUnits) -> Double {
        let scale = sensor.scale.map { max(abs($0.x), abs($0.y), abs($0.z)) } ?? 0
        let estimate = scale * 32768
        switch sensor.kind {
        case .accelerometer:
            let si = (estimate >= 0.5 * standardGravity && estimate <= 64 * standardGravity) ? estimate : 2 * standardGravity
            return units == .si ? si : si / standardGravity
        case .gyroscope:
            return (estimate >= 0.5 && estimate <= 80) ? estimate : 2000 * Double.pi / 180
        case .magnetometer:
            // A magnetometer's full scale (LSM9DS1: ±400 µT and more) would leave the Earth's field
            // (25–65 µT) a sliver of the bar: ±100 µT shows it, and an arrow marks anything beyond.
            return 100
        }
    }
}
