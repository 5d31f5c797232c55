import Glibc
import Testing
@testable import IIOMotion
@testable import IIOMotionCore
@testable import motion_monitor

@Suite("The live view's history chart", .timeLimit(.minutes(3)))
struct HistoryTests {
    /// 100 Hz for `seconds`: x a slow sine, y 0, z −1 but for one sample of +1.75 at `spike`.
    private func ring(seconds: Double, spike: Double) -> HistoryRing {
        var r = HistoryRing()
        for i in 0..<Int(seconds * 100) {
            let t = 5000 + Double(i) / 100
            let z = abs(Double(i) / 100 - spike) < 0.001 ? 1.75 : -1
            r.add(t, AxisTriple(x: 0.5 * sin(Double(i) / 30), y: 0, z: z))
        }
        return r
    }

    @Test("Every sample is in the chart: a one-sample spike and the extremes of the last 10 s, none older")
    func everySample() {
        let r = ring(seconds: 30, spike: 27.37)
        let chart = r.chart(seconds: 10, columns: 100)
        #expect(chart.extremes.high == 1.75 && chart.extremes.low == -1)
        #expect(chart.high.enumerated().filter { $0.offset % 3 == 2 && $0.element == 1.75 }.count == 1, "the spike in one column")
        // x over the last 10 s (samples 2000...2999) against the chart's.
        let xs = (2000..<3000).map { 0.5 * sin(Double($0) / 30) }
        let columnsX = stride(from: 0, to: chart.low.count, by: 3)
        #expect(columnsX.map { chart.low[$0] }.min() == xs.min() && columnsX.map { chart.high[$0] }.max() == xs.max())
        // A spike older than the window is not shown.
        let old = ring(seconds: 30, spike: 5).chart(seconds: 10, columns: 100)
        #expect(old.extremes.high < 1)
        // A ring that jumps forward (a device away for a minute) holds only what came after.
        var jumped = ring(seconds: 3, spike: 1)
        jumped.add(6000, AxisTriple(x: 0.25, y: 0.25, z: 0.25))
        let after = jumped.chart(seconds: 10, columns: 50)
        #expect(after.extremes.low == 0.25 && after.extremes.high == 0.25)
    }

    private func screen(history: Bool) -> ScreenModel {
        var panels: [PanelModel] = []
        for kind in [SensorKind.accelerometer, .gyroscope] {
            var p = PanelModel(kind: kind, device: "iio:device0 (bmi160)", mode: .buffered, frequency: 100, requestedRate: nil,
                               interval: 0.1, range: 2, unit: kind == .accelerometer ? "g" : "rad/s",
                               latest: AxisValues(x: 0.5, y: 0, z: -1), latestTimestamp: 5029.99)
            p.history = history ? ring(seconds: 30, spike: 27.37).chart(seconds: 10, columns: 2 * (79 - LiveScreen.historyLabelWidth)) : nil
            panels.append(p)
        }
        var s = ScreenModel(uri: "local:", elapsed: 30, log: ("ride.csv", 6000, nil), panels: panels,
                            motion: MotionPanelModel(frame: .arbitrary, interval: 0.1))
        s.keys = true
        s.showHistory = history
        return s
    }

    @Test("In 80×24 with two sensors and device motion: braille charts in colour with a scale and a time axis, every line fits")
    func fitsAndDraws() {
        let lines = LiveScreen.lines(screen(history: true), width: 80, height: 24, style: ScreenStyle(color: true, unicode: true))
        #expect(lines.count <= 24)
        #expect(lines[0].contains("h: bars") && lines[0].contains("space: pause"))
        let text = lines.joined(separator: "\n")
        #expect(text.unicodeScalars.contains { $0.value > 0x2800 && $0.value <= 0x28FF }, "braille dots")
        #expect(text.contains("\u{1B}[31m") && text.contains("\u{1B}[32m") && text.contains("\u{1B}[94m"), "a colour per axis")
        #expect(text.contains("+1.7500") && text.contains("-1.0000"), "the scale: the chart's extremes")
        #expect(text.contains("└-10 s") && text.contains("now"))
        let plain = LiveScreen.lines(screen(history: true), width: 80, height: 24, style: ScreenStyle(color: false, unicode: true))
        #expect(plain.allSatisfy { $0.count <= 79 })
        // Bars take the same screen without charts.
        let bars = LiveScreen.lines(screen(history: false), width: 80, height: 24, style: ScreenStyle(color: true, unicode: true))
        #expect(bars[0].contains("h: history") && !bars.joined().contains("└-10 s"))
    }

    @Test("Without colour (NO_COLOR) or Unicode: letters x, y, z on a character grid, no escapes, no braille")
    func plainText() {
        for style in [ScreenStyle(color: false, unicode: true), ScreenStyle(color: false, unicode: false)] {
            let lines = LiveScreen.lines(screen(history: true), width: 80, height: 24, style: style)
            let text = lines.joined(separator: "\n")
            #expect(!text.contains("\u{1B}"))
            #expect(!text.unicodeScalars.contains { $0.value >= 0x2800 && $0.value <= 0x28FF })
            #expect(text.contains("z") && text.contains("x"))
            #expect(lines.allSatisfy { $0.count <= 79 } && lines.count <= 24)
            if !style.unicode {
                let chart = lines.filter { $0.contains("|") && !$0.contains("-|-") || $0.contains("-10 s") }
                #expect(chart.count >= 6 && chart.allSatisfy { $0.unicodeScalars.allSatisfy(\.isASCII) }, "\(chart)")
            }
        }
    }
}
