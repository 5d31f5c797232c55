import Dispatch
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Glibc
import Testing
@testable import motion_monitor

/// A folder of its own under /tmp, removed by ``remove()``.
private struct Scratch {
    let path: String
    init() throws {
        var template = Array("/tmp/plot-test-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw PlotTestError("mkdtemp: \(errno)") }
        path = String(cString: made)
    }
    func file(_ name: String) -> String { path + "/" + name }
    func write(_ name: String, _ text: String) throws {
        try text.write(toFile: file(name), atomically: false, encoding: .utf8)
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

private struct PlotTestError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// An SVG read back with XMLParser: every panel's scale and every polyline's points.
private final class SVGContents: NSObject, XMLParserDelegate {
    struct Panel {
        var attributes: [String: String]
        var lines: [(axis: String, points: [(x: Double, y: Double)])] = []
        var gaps = 0
        /// The value at a y of this panel (its scale, from its data- attributes).
        func value(_ y: Double) -> Double {
            let (y0, y1) = (Double(attributes["data-y-top"]!)!, Double(attributes["data-y-bottom"]!)!)
            let (v0, v1) = (Double(attributes["data-value-top"]!)!, Double(attributes["data-value-bottom"]!)!)
            return v0 + (y - y0) / (y1 - y0) * (v1 - v0)
        }
        /// The smallest and largest value an axis's lines reach.
        func extremes(_ axis: String) -> (low: Double, high: Double)? {
            let ys = lines.filter { $0.axis == axis }.flatMap { $0.points.map(\.y) }
            guard let top = ys.min(), let bottom = ys.max() else { return nil }
            return (value(bottom), value(top))
        }
    }
    var panels: [Panel] = []
    var rootSize: (Int, Int)?
    var failure: String?

    static func parse(_ data: Data) -> SVGContents {
        let c = SVGContents()
        let p = XMLParser(data: data)
        p.delegate = c
        if !p.parse() { c.failure = "not well-formed: \(p.parserError.map { "\($0)" } ?? "?") at line \(p.lineNumber)" }
        return c
    }

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]) {
        switch name {
        case "svg": rootSize = (Int(attributes["width"] ?? "") ?? 0, Int(attributes["height"] ?? "") ?? 0)
        case "g" where attributes["class"] == "panel": panels.append(Panel(attributes: attributes))
        case "rect" where attributes["class"] == "gap": panels[panels.count - 1].gaps += 1
        case "polyline":
            let points = (attributes["points"] ?? "").split(separator: " ").map { pair -> (x: Double, y: Double) in
                let xy = pair.split(separator: ",")
                return (Double(xy[0]) ?? .nan, Double(xy[1]) ?? .nan)
            }
            panels[panels.count - 1].lines.append((attributes["class"] ?? "?", points))
        default: break
        }
    }
}

@Suite("motion-monitor plot", .timeLimit(.minutes(5)))
struct PlotTests {
    /// Runs `plot` in-process; returns its status.
    private func plot(_ args: [String]) -> Int32 { Plot.main(arguments: args) }

    /// The error `plot` gives for these arguments (nil when it draws).
    private func failure(_ args: [String]) -> PlotError? {
        do throws(PlotError) {
            let o = try Plot.parse(args)
            _ = try Plot.figure(o)
            return nil
        } catch {
            return error
        }
    }

    /// A log of a known signal: x a sine, y a ramp, z constant but for one spike (one row
    /// between two others that the pixel columns must keep), at 100 Hz for `seconds`.
    private func log(seconds: Double, start: Double = 1000, spikeAt: Double = 2.005, sensor: String = "accelerometer", device: String = "iio:device0") -> (text: String, rows: [(t: Double, x: Double, y: Double, z: Double)]) {
        var text = CSVFormat.header + "\n"
        var rows: [(Double, Double, Double, Double)] = []
        let n = Int(seconds * 100)
        for i in 0..<n {
            let t = start + Double(i) / 100
            let x = sin(Double(i) / 50)
            let y = Double(i) / Double(n) - 0.5
            let z = abs(Double(i) / 100 - spikeAt) < 0.001 ? 3.25 : -1.0
            rows.append((t, x, y, z))
            text += "\(CSVFormat.timestamp(t)),\(sensor),\(device),\(x),\(y),\(z)\n"
        }
        return (text, rows)
    }

    @Test("The SVG is well-formed XML; each line's extremes are the log's, a one-row spike included")
    func extremesEqualLog() throws {
        let dir = try Scratch()
        defer { dir.remove() }
        let (text, rows) = log(seconds: 30)
        try dir.write("ride.csv", text)
        #expect(plot([dir.file("ride.csv")]) == 0)
        let svg = SVGContents.parse(try Data(contentsOf: URL(fileURLWithPath: dir.file("ride.svg"))))
        #expect(svg.failure == nil, "\(svg.failure ?? "")")
        let panel = try #require(svg.panels.first)
        #expect(svg.panels.count == 1 && panel.attributes["data-units"] == "g" && panel.attributes["data-rows"] == "\(rows.count)")
        // Coordinates have two decimals: a value is recovered to within 0.005 px of the scale.
        let tolerance = 0.006 * abs(Double(panel.attributes["data-value-top"]!)! - Double(panel.attributes["data-value-bottom"]!)!)
            / abs(Double(panel.attributes["data-y-bottom"]!)! - Double(panel.attributes["data-y-top"]!)!)
        for (axis, values) in [("x", rows.map(\.x)), ("y", rows.map(\.y)), ("z", rows.map(\.z))] {
            let drawn = try #require(panel.extremes(axis), "no \(axis) line")
            #expect(abs(drawn.low - values.min()!) <= tolerance && abs(drawn.high - values.max()!) <= tolerance,
                    "\(axis): drawn \(drawn), log \(values.min()!)…\(values.max()!)")
            #expect(panel.lines.filter { $0.axis == axis }.count == 1, "\(axis): one unbroken line")
        }
        // One point or two (min, max) per pixel column, never more: decimated.
        let columns = 1200 - Int(PlotFigure.marginLeft + PlotFigure.marginRight)
        #expect(panel.lines.allSatisfy { $0.points.count <= 2 * columns })
        // The time axis: 0 at the left of the plotting area, the span (29.99 s) near its right.
        let xs = panel.lines.flatMap { $0.points.map(\.x) }
        #expect(xs.min()! >= PlotFigure.marginLeft && xs.max()! <= 1200 - PlotFigure.marginRight)
    }

    @Test("A calibrated run's log, with the comment line motion-monitor writes under its header, plots every row")
    func calibrationComment() throws {
        let dir = try Scratch()
        defer { dir.remove() }
        let (text, rows) = log(seconds: 3)
        let comment = "# accelerometer calibrated 2026-12-06 05:12:40 UTC; gyroscope uncalibrated\n"
        try dir.write("calibrated.csv", text.replacingOccurrences(of: CSVFormat.header + "\n", with: CSVFormat.header + "\n" + comment))
        #expect(failure([dir.file("calibrated.csv")]) == nil)
        #expect(plot([dir.file("calibrated.csv")]) == 0)
        let svg = SVGContents.parse(try Data(contentsOf: URL(fileURLWithPath: dir.file("calibrated.svg"))))
        #expect(svg.panels.count == 1 && svg.panels.first?.attributes["data-rows"] == "\(rows.count)")
    }

    @Test("A device that went away (a 5 s pause in the rows) and came back under another index is a gap in one panel: the lines break and it is shaded")
    func gapIsAGap() throws {
        let dir = try Scratch()
        defer { dir.remove() }
        let before = log(seconds: 3)
        let after = log(seconds: 3, start: 1008, device: "iio:device1")
        try dir.write("ride.csv", before.text + after.text.dropFirst(CSVFormat.header.count + 1))
        #expect(plot([dir.file("ride.csv"), "-o", dir.file("out.svg")]) == 0)
        let svg = SVGContents.parse(try Data(contentsOf: URL(fileURLWithPath: dir.file("out.svg"))))
        let panel = try #require(svg.panels.first)
        #expect(svg.panels.count == 1 && panel.gaps == 1)
        #expect(panel.attributes["data-title"] == "Accelerometer · iio:device0, iio:device1")
        for axis in ["x", "y", "z"] {
            let lines = panel.lines.filter { $0.axis == axis }
            #expect(lines.count == 2, "\(axis): \(lines.count) lines")
            // The break is where the pause is: 3 s of 11 s along the time axis.
            if lines.count == 2 {
                let area = 1200 - PlotFigure.marginLeft - PlotFigure.marginRight
                let end = (lines[0].points.last!.x - PlotFigure.marginLeft) / area * 11
                let resume = (lines[1].points.first!.x - PlotFigure.marginLeft) / area * 11
                #expect(abs(end - 3) < 0.05 && abs(resume - 8) < 0.05, "\(end) \(resume)")
            }
        }
    }

    @Test("The files of a --csv-rotate series plot as one; a motion-collect log gets a panel per board; sensors get panels and units")
    func seriesAndPanels() throws {
        let dir = try Scratch()
        defer { dir.remove() }
        let first = log(seconds: 2)
        let second = log(seconds: 2, start: 1002)
        try dir.write("ride-20261201T134501.csv", first.text)
        try dir.write("ride-20261201T134501_002.csv", second.text)
        try dir.write("ride-20261201T134500.csv", log(seconds: 1, start: 999, sensor: "gyroscope").text)
        try dir.write("other-20261201T134500.csv", log(seconds: 1, start: 0).text)
        let o = try Plot.parse([dir.file("ride.csv")])
        let files = try Plot.files(for: dir.file("ride.csv"))
        #expect(files == ["ride-20261201T134500.csv", "ride-20261201T134501.csv", "ride-20261201T134501_002.csv"].map(dir.file))
        let (figure, _, rows) = try Plot.figure(o)
        #expect(rows == 100 + 200 + 200)
        #expect(figure.panels.map(\.title) == ["Gyroscope · iio:device0", "Accelerometer · iio:device0"])
        #expect(figure.panels.map(\.units) == ["rad/s", "g"])
        #expect(abs(figure.span - 4.99) < 1e-6 && figure.panels[1].runs.count == 3, "one unbroken line per axis across the files")
        // A motion-collect log: the board is a column of its own.
        let collected = "board," + CSVFormat.header + "\nkitchen,5.0,accelerometer,iio:device0,0,0,9.8\nhall,5.0,accelerometer,iio:device0,0,0,9.81\nkitchen,5.01,accelerometer,iio:device0,0,0,9.79\n"
        try dir.write("fleet.csv", collected)
        let fleet = try Plot.figure(Plot.parse([dir.file("fleet.csv")])).figure
        #expect(fleet.panels.map(\.title) == ["kitchen · Accelerometer · iio:device0", "hall · Accelerometer · iio:device0"])
        #expect(fleet.panels.map(\.units) == ["m/s²", "m/s²"], "m/s² told apart from g by the length of gravity")
    }

    @Test("An empty, header-only or malformed log: a clear error naming the file and the line, exit 65; a missing one 66; bad options 64")
    func errors() throws {
        let dir = try Scratch()
        defer { dir.remove() }
        try dir.write("empty.csv", "")
        try dir.write("header.csv", CSVFormat.header + "\n")
        try dir.write("json.csv", "{\"sensor\":\"accelerometer\"}\n")
        let good = "1.0,accelerometer,iio:device0,0,0,1\n"
        try dir.write("fields.csv", CSVFormat.header + "\n" + good + "1.01,accelerometer,iio:device0,0,0\n")
        try dir.write("number.csv", CSVFormat.header + "\n" + good + good + "1.02,accelerometer,iio:device0,0,zero,1\n")
        try dir.write("time.csv", CSVFormat.header + "\n" + "nan,accelerometer,iio:device0,0,0,1\n")
        try dir.write("nosensor.csv", CSVFormat.header + "\n" + "1.0,,iio:device0,0,0,1\n")
        let cases: [(String, String)] = [
            ("empty.csv", "empty.csv is empty: a motion-monitor log begins with the header timestamp,sensor,device,x,y,z"),
            ("header.csv", "header.csv has a header but no rows"),
            ("json.csv", "json.csv:1: expected the header timestamp,sensor,device,x,y,z"),
            ("fields.csv", "fields.csv:3: expected 6 fields (timestamp,sensor,device,x,y,z), found 5"),
            ("number.csv", "number.csv:4: the y 'zero' is not a number (or null)"),
            ("time.csv", "time.csv:2: the timestamp 'nan' is not a number"),
            ("nosensor.csv", "nosensor.csv:2: the sensor field is empty"),
        ]
        for (file, message) in cases {
            let e = try #require(failure([dir.file(file)]), "\(file) plotted")
            #expect(e.status == ExitStatus.dataError && e.message.contains(dir.file(message.prefix { $0 != " " }.description)) && e.message.contains(message), "\(file): \(e.message)")
        }
        let missing = try #require(failure([dir.file("nothing.csv")]))
        #expect(missing.status == ExitStatus.noInput && missing.message.contains("cannot open \(dir.file("nothing.csv")): no such file"), "\(missing.message)")
        for args in [[], ["--width", "5", "a.csv"], ["a.csv", "-o", "a.jpg"], ["--bogus", "a.csv"]] {
            #expect(failure(args)?.status == ExitStatus.usage, "\(args)")
        }
        // null values (a non-finite reading) are not an error: the axis's line breaks there.
        try dir.write("null.csv", CSVFormat.header + "\n" + good + "1.01,accelerometer,iio:device0,null,0,1\n" + "1.02,accelerometer,iio:device0,0,0,1\n")
        #expect(failure([dir.file("null.csv")]) == nil)
        // The exit status of the whole command.
        #expect(plot([dir.file("number.csv")]) == ExitStatus.dataError)
    }

    /// Writes all of `bytes` to `fd`.
    private static func writeAll(_ fd: Int32, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var done = 0
        while done < bytes.count {
            let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
            if n <= 0 { return false }
            done += n
        }
        return true
    }

    /// 10 million rows streamed through a FIFO (no 600 MB file on disk): written by a thread of
    /// this test from a template of 1000 rows whose whole seconds are patched per block.
    /// Under ThreadSanitizer (`scripts/test --tsan` sets IIOMOTION_TSAN) instrumented code is
    /// several times slower: the same log, cut to a tenth, without the bound on the time.
    private static let underThreadSanitizer = ProcessInfo.processInfo.environment["IIOMOTION_TSAN"] == "1"

    @Test("A log of 10 million rows plots in one pass within the time limit, its extremes kept", .timeLimit(.minutes(4)))
    func tenMillionRows() throws {
        let dir = try Scratch()
        defer { dir.remove() }
        let fifo = dir.file("big.csv")
        #expect(mkfifo(fifo, 0o600) == 0)
        let blocks = Self.underThreadSanitizer ? 1_000 : 10_000, perBlock = 1000
        // Row i of a block: "SSSSSSSS.xx0000000,accelerometer,iio:device0,X,Y,Z" at 100 Hz, so a
        // block is 10 s; one row of one block holds the spike.
        var template: [UInt8] = []
        var secondsAt: [Int] = []
        for i in 0..<perBlock {
            secondsAt.append(template.count)
            let fraction = i % 100
            template += Array("0000000\(i / 100).\(fraction < 10 ? "0" : "")\(fraction)0000000,accelerometer,iio:device0,".utf8)
            template += Array("\(["0.125", "-0.25", "0.5"][i % 3]),\(["1", "-1"][i % 2]),0.98\n".utf8)
        }
        let spikeBlock = blocks * 7 / 9, spikeRow = 501
        let (rowTemplate, rowSeconds) = (template, secondsAt)
        let writer = Thread {
            let fd = open(fifo, O_WRONLY)
            guard fd >= 0 else { return }
            defer { close(fd) }
            var block = rowTemplate
            block.withUnsafeMutableBufferPointer { b in
                var digits = [UInt8](repeating: 0, count: 7)
                for k in 0..<blocks {
                    // The whole seconds are k * 10 + i / 100: the first seven digits are k's, the
                    // last one is the template's.
                    var n = k
                    for d in (0..<7).reversed() {
                        digits[d] = UInt8(ascii: "0") + UInt8(n % 10)
                        n /= 10
                    }
                    digits.withUnsafeBufferPointer { d in
                        for i in 0..<perBlock { (b.baseAddress! + rowSeconds[i]).update(from: d.baseAddress!, count: 7) }
                    }
                    var chunk: [UInt8] = k == 0 ? Array((CSVFormat.header + "\n").utf8) : []
                    if k == spikeBlock {
                        // -7.5 in place of 0.98 on one row: a spike one sample wide.
                        var lines = String(decoding: b, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
                        lines[spikeRow] = lines[spikeRow].replacingOccurrences(of: ",0.98", with: ",-7.5")
                        chunk = Array(lines.joined(separator: "\n").utf8)
                    }
                    if !chunk.isEmpty && !chunk.withUnsafeBufferPointer({ Self.writeAll(fd, $0) }) { return }
                    if k != spikeBlock && !Self.writeAll(fd, UnsafeBufferPointer(b)) { return }
                }
            }
        }
        writer.start()
        // The bound is on this thread's processor time (the reading and drawing), which the load
        // of a shared machine does not stretch; the wall time is printed beside it.
        func cpu() -> Double {
            var ts = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
            return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
        }
        let clock = ContinuousClock()
        let started = clock.now, cpuStarted = cpu()
        let (figure, _, rows) = try Plot.figure(Plot.parse([fifo]))
        let svg = PlotSVG.document(figure)
        let elapsed = clock.now - started, cpuUsed = cpu() - cpuStarted
        #expect(rows == blocks * perBlock)
        let panel = try #require(figure.panels.first)
        #expect(panel.extremes[0].low == -0.25 && panel.extremes[0].high == 0.5)
        #expect(panel.extremes[2].low == -7.5 && panel.extremes[2].high == 0.98, "the one-row spike is kept")
        #expect(abs(figure.span - (Double(blocks) * 10 - 0.01)) < 1e-6)
        // The spike reaches the bottom of the z line.
        let zs = panel.runs.filter { $0.axis == 2 }.flatMap { $0.points.map(\.y) }
        #expect(abs(zs.max()! - panel.y(-7.5)) < 1e-9 && svg.hasSuffix("</svg>\n"))
        print("plot: \(rows) rows (\(blocks * template.count / 1_000_000) MB) read and drawn in \(elapsed), \(cpuUsed) s of processor time")
        // The debug build under test takes about 11 s of processor time (about 50 MB/s).
        if !Self.underThreadSanitizer { #expect(cpuUsed < 30, "\(cpuUsed) s") }
    }
}
