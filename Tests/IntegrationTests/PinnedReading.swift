import Foundation

/// One JSON reading line of motion-monitor (`--once --json` or a streamed line), matched against
/// the pinned form exactly:
/// `{"sensor":"accelerometer","device":"iio:device0","timestamp":S,"x":X,"y":Y,"z":Z}`.
struct JSONReading: CustomStringConvertible {
    var sensor: String
    var device: String
    var timestamp: Double
    var x: Double
    var y: Double
    var z: Double
    var description: String { "\(sensor) \(device) t=\(timestamp) (\(x), \(y), \(z))" }

    private static let number = #"(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"#
    // A constant pattern: failing to compile it is a bug in this file, so `try!` is right. Built per
    // use because `Regex` is not `Sendable`.
    private static var pattern: Regex<AnyRegexOutput> { try! Regex(
        #"^\{"sensor":"(accelerometer|gyroscope|magnetometer)","device":"(iio:device[0-9]+)","timestamp":"#
            + number + #","x":"# + number + #","y":"# + number + #","z":"# + number + #"\}$"#) }

    /// Parses a line; nil if it is not exactly the pinned form, or a number is not printed in its
    /// shortest round-trip form (which rules out `%.3f`-style rounding).
    init?(line: String) {
        guard let m = try? Self.pattern.wholeMatch(in: line) else { return nil }
        let texts = (3...6).compactMap { m.output[$0].substring.map(String.init) }
        let values = texts.compactMap(Double.init)
        guard values.count == 4, zip(texts, values).allSatisfy({ $0 == $1.description }),
              let sensor = m.output[1].substring, let device = m.output[2].substring
        else { return nil }
        self.sensor = String(sensor)
        self.device = String(device)
        (timestamp, x, y, z) = (values[0], values[1], values[2], values[3])
    }
}

extension SimHarness {
    /// Device id → file name → contents, from a dump of `path=contents` lines of
    /// `/sys/bus/iio/devices/<id>/<file>` (what the tests print with `cat` inside iio-sim).
    static func sysfsFiles(dump: String) -> [String: [String: String]] {
        var files: [String: [String: String]] = [:]
        let prefix = "/sys/bus/iio/devices/"
        for line in dump.split(separator: "\n") where line.hasPrefix(prefix) {
            guard let eq = line.firstIndex(of: "=") else { continue }
            let path = line[line.index(line.startIndex, offsetBy: prefix.count)..<eq].split(separator: "/")
            guard path.count == 2 else { continue }
            files[String(path[0]), default: [:]][String(path[1])] = String(line[line.index(after: eq)...])
        }
        return files
    }
}
