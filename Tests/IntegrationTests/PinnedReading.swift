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

/// One device motion JSON line of motion-monitor, matched against the pinned form (issue H) exactly:
/// `{"sensor":"deviceMotion","timestamp":S,"attitude":{"roll":R,"pitch":P,"yaw":Y,"quaternion":{"x":..,"y":..,"z":..,"w":..}},`
/// `"gravity":{"x":..,"y":..,"z":..},"userAcceleration":{"x":..,"y":..,"z":..},"rotationRate":{"x":..,"y":..,"z":..}}`
/// (angles in radians, every number in its shortest round-trip form).
struct JSONDeviceMotion: CustomStringConvertible {
    var timestamp: Double
    var roll: Double, pitch: Double, yaw: Double
    var quaternion: (x: Double, y: Double, z: Double, w: Double)
    var gravity: (x: Double, y: Double, z: Double)
    var userAcceleration: (x: Double, y: Double, z: Double)
    var rotationRate: (x: Double, y: Double, z: Double)
    var description: String { "deviceMotion t=\(timestamp) rpy=(\(roll), \(pitch), \(yaw)) g=\(gravity) user=\(userAcceleration) rate=\(rotationRate)" }

    private static let n = #"(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"#
    private static func xyz(_ key: String) -> String { #""\#(key)":\{"x":"# + n + #","y":"# + n + #","z":"# + n + #"\}"# }
    // A constant pattern: failing to compile it is a bug in this file, so `try!` is right.
    private static var pattern: Regex<AnyRegexOutput> { try! Regex(
        #"^\{"sensor":"deviceMotion","timestamp":"# + n
            + #","attitude":\{"roll":"# + n + #","pitch":"# + n + #","yaw":"# + n
            + #","quaternion":\{"x":"# + n + #","y":"# + n + #","z":"# + n + #","w":"# + n + #"\}\},"#
            + xyz("gravity") + "," + xyz("userAcceleration") + "," + xyz("rotationRate") + #"\}$"#) }

    /// Parses a line; nil unless it is exactly the pinned form with shortest round-trip numbers.
    init?(line: String) {
        guard let m = try? Self.pattern.wholeMatch(in: line) else { return nil }
        let texts = (1...17).compactMap { m.output[$0].substring.map(String.init) }
        let v = texts.compactMap(Double.init)
        guard v.count == 17, zip(texts, v).allSatisfy({ $0 == $1.description }) else { return nil }
        timestamp = v[0]
        (roll, pitch, yaw) = (v[1], v[2], v[3])
        quaternion = (v[4], v[5], v[6], v[7])
        gravity = (v[8], v[9], v[10])
        userAcceleration = (v[11], v[12], v[13])
        rotationRate = (v[14], v[15], v[16])
    }
}
