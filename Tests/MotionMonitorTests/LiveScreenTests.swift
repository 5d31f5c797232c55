import Testing
@testable import IIOMotion
@testable import IIOMotionCore
@testable import motion_monitor

private func panel(_ kind: SensorKind = .accelerometer, latest: AxisValues? = AxisValues(x: 0.5, y: -0.25, z: -1),
                   error: String? = nil) -> PanelModel {
    var p = PanelModel(kind: kind, device: "iio:device0 (bmi160)", mode: .buffered, frequency: 100, requestedRate: nil,
                       interval: 0.1, range: 2, unit: kind == .accelerometer ? "g" : "rad/s", latest: latest,
                       latestTimestamp: latest == nil ? nil : 1)
    p.samples = 120
    p.shown = 20
    p.lost = 0
    p.measuredRate = 99.96
    p.measuredUpdates = 10
    p.error = error
    return p
}

private let plain = ScreenStyle(color: false, unicode: true)

@Suite("The live view's screen", .timeLimit(.minutes(3)))
struct LiveScreenTests {
    @Test("A panel: device, mode, range, signed fixed values, a bar per axis, rates and counts")
    func panelLines() {
        let screen = ScreenModel(uri: "local:", elapsed: 83, log: ("ride.csv", 240, nil), panels: [panel()])
        let lines = LiveScreen.lines(screen, width: 80, height: 24, style: plain)
        #expect(lines[0] == "motion-monitor  local:  00:01:23  Ctrl-C stops")
        #expect(lines[1] == "log ride.csv: 240 rows")
        #expect(lines[3] == "Accelerometer  iio:device0 (bmi160)  buffered  ±2.00 g")
        #expect(lines[4].hasPrefix("  x   +0.5000 g     ") && lines[4].hasSuffix("│███████──────────────────────"))
        #expect(lines[5].hasPrefix("  y   -0.2500 g     ") && lines[5].contains("─▐███│─"))
        #expect(lines[6].hasPrefix("  z   -1.0000 g     ") && lines[6].contains("─▐██████████████│─"))
        #expect(lines[7] == "  sampling 100 Hz, measured 100.0 Hz; view every 0.1 s, measured 10.0/s")
        #expect(lines[8] == "  120 samples, 100 coalesced, 0 lost")
        #expect(lines.allSatisfy { $0.count <= 79 }, "the last column is never written")
        #expect(!lines.joined().contains("\u{1B}"), "no escapes without colour")
    }

    @Test("Colour: SGR escapes around styled spans, reset after each")
    func color() {
        let screen = ScreenModel(uri: "local:", elapsed: 0, log: nil, panels: [panel()])
        let lines = LiveScreen.lines(screen, width: 80, height: 24, style: ScreenStyle(color: true, unicode: true))
        #expect(lines[0].hasPrefix("\u{1B}[1mmotion-monitor\u{1B}[0m"))
        #expect(lines[3].contains("\u{1B}[31m"), "the x bar is red: \(lines[3])")
    }

    @Test("The width decides: bars shrink, then go; every line fits")
    func widths() {
        let screen = ScreenModel(uri: "local:", elapsed: 0, log: nil, panels: [panel(), panel(.gyroscope)])
        for width in [20, 30, 40, 60, 100, 200] {
            let lines = LiveScreen.lines(screen, width: width, height: 50, style: plain)
            #expect(lines.allSatisfy { $0.count <= max(20, width) - 1 }, "width \(width)")
        }
        let narrow = LiveScreen.lines(screen, width: 25, height: 50, style: plain)
        #expect(!narrow.joined().contains("│"), "no room for a bar at 25 columns")
        let wide = LiveScreen.lines(screen, width: 200, height: 50, style: plain)
        #expect(wide[3].count > 150, "the bar grows with the terminal")
    }

    @Test("The height decides: what does not fit is counted on the last line")
    func heights() {
        let screen = ScreenModel(uri: "local:", elapsed: 0, log: nil, panels: [panel(), panel(.gyroscope)])
        let lines = LiveScreen.lines(screen, width: 80, height: 8, style: plain)
        #expect(lines.count == 8)
        #expect(lines[7].hasPrefix("… ") && lines[7].hasSuffix("more lines: make the terminal taller"))
    }

    @Test("A missing sensor's panel is its availability message; a failed one shows the error")
    func missingAndFailed() {
        var missing = panel(.gyroscope)
        missing.device = nil
        let failed = panel(error: "Accelerometer encountered error: iio:device0 (bmi160) delivered no data in time")
        let lines = LiveScreen.lines(ScreenModel(uri: "local:", elapsed: 0, log: nil, panels: [failed, missing]),
                                     width: 80, height: 40, style: plain)
        #expect(lines.contains("This device has no gyroscope."))
        #expect(lines.contains { $0.contains("Accelerometer encountered error: iio:device0 (bmi160)") })
    }

    @Test("Bars: centred, filled towards the value in half cells, an arrow beyond the range, ASCII without UTF-8")
    func bars() {
        func text(_ v: Double?, unicode: Bool = true) -> String {
            LiveScreen.bar(v, range: 1, width: 11, unicode: unicode, color: "31").map(\.0).joined()
        }
        #expect(text(0) == "─────│─────")
        #expect(text(0.5) == "─────│██▌──")
        #expect(text(-1) == "█████│─────")
        #expect(text(3) == "─────│████▶")
        #expect(text(-3) == "◀████│─────")
        #expect(text(nil) == "─────│─────")
        #expect(text(0.5, unicode: false) == "-----|##+--")
    }

    @Test("Ranges: scale × 2¹⁵ when plausible, else ±2 g / ±2000 °/s")
    func ranges() {
        func info(_ kind: SensorKind, scale: Double?) -> SensorInfo {
            SensorInfo(kind: kind, deviceID: "iio:device0", deviceName: "x", label: nil, location: nil,
                       scale: scale.map { AxisValues(all: $0) }, scaleFile: nil, offset: AxisValues(all: 0), offsetFile: nil,
                       mountMatrix: .identity, mountMatrixSource: .identity, samplingFrequency: nil, samplingFrequencyFile: nil,
                       availableSamplingFrequencies: nil, isPollable: true, problem: nil, canBuffer: true, triggerName: nil,
                       hasTimestampChannel: true)
        }
        #expect(abs(LiveScreen.range(of: info(.accelerometer, scale: 0.000598), units: .coreMotion) - 1.998) < 0.001)
        #expect(abs(LiveScreen.range(of: info(.accelerometer, scale: 0.000598), units: .si) - 19.595) < 0.001)
        #expect(LiveScreen.range(of: info(.accelerometer, scale: 0.0980665), units: .coreMotion) == 2, "HID: 32-bit values")
        #expect(LiveScreen.range(of: info(.accelerometer, scale: nil), units: .coreMotion) == 2)
        #expect(abs(LiveScreen.range(of: info(.gyroscope, scale: 0.001065), units: .coreMotion) - 34.9) < 0.01)
        #expect(abs(LiveScreen.range(of: info(.gyroscope, scale: 1), units: .coreMotion) - 34.906585) < 1e-6)
    }

    @Test("Clock and wrapping")
    func helpers() {
        #expect(LiveScreen.clock(0) == "00:00:00" && LiveScreen.clock(3723.9) == "01:02:03")
        #expect(LiveScreen.wrap("one two three four", width: 9) == ["one two", "three", "four"])
        #expect(LiveScreen.wrap("abcdefghijkl", width: 5) == ["abcde"])
    }
}
