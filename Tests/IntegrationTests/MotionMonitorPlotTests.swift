import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing

// `motion-monitor plot` end to end: a ride logged with --csv inside iio-sim, plotted by the real
// CLI, the SVG read back with XMLParser against the log's own rows, and rendered to PNG by
// librsvg's rsvg-convert (scripts/install-deps installs librsvg2-bin).

@Suite("motion-monitor plot of a simulated ride", .serialized, .timeLimit(.minutes(10)),
       .enabled(if: SimHarness.monitorReady("motion-monitor plot tests"), Comment(rawValue: SimHarness.monitorNotReadyReason)))
struct MotionMonitorPlotTests {
    /// The panels of an SVG: their scale and their lines.
    private final class Panels: NSObject, XMLParserDelegate {
        var panels: [(attributes: [String: String], lines: [(axis: String, ys: [Double])])] = []
        var size: (width: Int, height: Int) = (0, 0)

        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                    attributes: [String: String] = [:]) {
            if name == "svg" { size = (Int(attributes["width"] ?? "") ?? 0, Int(attributes["height"] ?? "") ?? 0) }
            if name == "g", attributes["class"] == "panel" { panels.append((attributes, [])) }
            if name == "polyline", !panels.isEmpty {
                let ys = (attributes["points"] ?? "").split(separator: " ").compactMap { $0.split(separator: ",").last.flatMap { Double($0) } }
                panels[panels.count - 1].lines.append((attributes["class"] ?? "", ys))
            }
        }
    }

    @Test("A ride logged under iio-sim: one panel per sensor, each axis's line reaching the log's extremes; rsvg-convert renders it with the axes' colours")
    func rideToSVGAndPNG() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try SimHarness.sim(["--fixture", "bmi160", "--motion", "walking:seed=3"],
                                   script: #"motion-monitor --csv "\#(dir)/ride.csv" --rate 100 --duration 2 --quiet && motion-monitor plot "\#(dir)/ride.csv" -o "\#(dir)/ride.svg" && motion-monitor plot "\#(dir)/ride.csv" -o "\#(dir)/ride-cli.png" && motion-monitor plot "\#(dir)/ride.csv" -o "\#(dir)/ride-cli.png""#)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.contains("motion-monitor plot: \(dir)/ride.svg: 2 panels"), "\(r.stderr)")
        // The log's own extremes, per sensor and axis.
        let rows = try String(contentsOfFile: dir + "/ride.csv", encoding: .utf8).split(separator: "\n").dropFirst().map { $0.split(separator: ",") }
        #expect(rows.count >= 300, "\(rows.count) rows")
        let svgData = try Data(contentsOf: URL(fileURLWithPath: dir + "/ride.svg"))
        let contents = Panels()
        let parser = XMLParser(data: svgData)
        parser.delegate = contents
        #expect(parser.parse(), "not well-formed: \(String(describing: parser.parserError)) at line \(parser.lineNumber)")
        #expect(contents.panels.map { $0.attributes["data-title"] ?? "" } == ["Accelerometer · iio:device0", "Gyroscope · iio:device0"])
        #expect(contents.panels.map { $0.attributes["data-units"] ?? "" } == ["g", "rad/s"])
        for (panel, sensor) in zip(contents.panels, ["accelerometer", "gyroscope"]) {
            let a = panel.attributes
            let (y0, y1) = (Double(a["data-y-top"]!)!, Double(a["data-y-bottom"]!)!)
            let (v0, v1) = (Double(a["data-value-top"]!)!, Double(a["data-value-bottom"]!)!)
            func value(_ y: Double) -> Double { v0 + (y - y0) / (y1 - y0) * (v1 - v0) }
            // Two decimals of a pixel: the value to within 0.006 px of the scale.
            let tolerance = 0.006 * abs(v0 - v1) / abs(y1 - y0)
            let mine = rows.filter { $0[1] == sensor }
            #expect(a["data-rows"] == "\(mine.count)")
            for (i, axis) in ["x", "y", "z"].enumerated() {
                let values = mine.compactMap { Double($0[3 + i]) }
                let ys = panel.lines.filter { $0.axis == axis }.flatMap(\.ys)
                guard let top = ys.min(), let bottom = ys.max(), let low = values.min(), let high = values.max() else {
                    Issue.record("\(sensor) \(axis): no line or no values")
                    continue
                }
                #expect(abs(value(bottom) - low) <= tolerance && abs(value(top) - high) <= tolerance,
                        "\(sensor) \(axis): drawn \(value(bottom))…\(value(top)), logged \(low)…\(high)")
            }
        }
        // A real renderer: librsvg draws it to a PNG of the SVG's size, with each axis's colour.
        let rsvg = ["/usr/bin/rsvg-convert", "/usr/local/bin/rsvg-convert"].first { FileManager.default.isExecutableFile(atPath: $0) }
        let converter = try #require(rsvg, "rsvg-convert is not installed (scripts/install-deps installs librsvg2-bin)")
        let png = try SimHarness.run(converter, [dir + "/ride.svg", "-o", dir + "/ride.png"], timeout: 30)
        #expect(png.status == 0 && png.stderr.isEmpty, "\(png)")
        let count = try SimHarness.run("/usr/bin/env", ["python3", "-c", Self.countColours, dir + "/ride.png"], timeout: 30)
        #expect(count.status == 0, "\(count)")
        let fields = count.out.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        #expect(fields.count == 5 && fields[0] == contents.size.width && fields[1] == contents.size.height, "\(count.out) vs \(contents.size)")
        // Each axis's colour is on hundreds of pixels (its lines over two panels).
        #expect(fields.count == 5 && fields[2...].allSatisfy { $0 > 300 }, "pixels of x, y, z colours: \(count.out)")
        // -o FILE.png: the same picture through the CLI (rsvg-convert under it); the second run
        // replaced the first's file whole and said so, leaving nothing beside it.
        #expect(r.stderr.contains("motion-monitor plot: \(dir)/ride-cli.png: 2 panels") && r.stderr.contains("motion-monitor plot: \(dir)/ride-cli.png (replaced): 2 panels"), "\(r.stderr)")
        let cli = try SimHarness.run("/usr/bin/env", ["python3", "-c", Self.countColours, dir + "/ride-cli.png"], timeout: 30)
        #expect(cli.status == 0 && cli.out == count.out, "CLI's PNG \(cli) vs rsvg-convert's \(count.out)")
        let left = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        #expect(left == ["ride-cli.png", "ride.csv", "ride.png", "ride.svg"], "\(left)")
    }

    /// Python (standard library only): decodes an 8-bit RGB/RGBA PNG and prints its width, height
    /// and how many pixels are close to each axis's colour.
    static let countColours = #"""
    import sys, struct, zlib
    data = open(sys.argv[1], 'rb').read()
    assert data[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
    pos, idat = 8, b''
    while pos < len(data):
        n, kind = struct.unpack('>I4s', data[pos:pos + 8]); body = data[pos + 8:pos + 8 + n]; pos += 12 + n
        if kind == b'IHDR': w, h, depth, ctype = struct.unpack('>IIBB', body[:10])
        elif kind == b'IDAT': idat += body
    assert depth == 8 and ctype in (2, 6), (depth, ctype)
    bpp = 3 if ctype == 2 else 4
    raw, stride, prev, out = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0; b = prev[i]; c = prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.append(bytes(line)); prev = line
    colours = [(0xd6, 0x27, 0x28), (0x2c, 0xa0, 0x2c), (0x1f, 0x77, 0xb4)]
    counts = [0, 0, 0]
    for line in out:
        for x in range(w):
            r, g, b = line[x * bpp:x * bpp + 3]
            for k, (cr, cg, cb) in enumerate(colours):
                if abs(r - cr) + abs(g - cg) + abs(b - cb) < 40: counts[k] += 1
    print(w, h, *counts)
    """#
}
