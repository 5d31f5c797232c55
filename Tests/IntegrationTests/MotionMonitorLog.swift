import Foundation
import Glibc
import IIOScanFormat
import IIOSimKit
import Testing

// What the motion-monitor suites that check a `--csv` log share: the strict parse of the log, and
// its comparison with what the simulator recorded with `--stream-log` (every scan it wrote, minus
// what was never read), decoded with IIOScanFormat's `ScanFormat` and converted by hand from the sysfs
// files, without the IIOMotion library.

/// Comparing a log with the stream.
enum LogCheck {
    /// Printed between the sysfs dump and motion-monitor's output.
    static let marker = "@@@ motion-monitor"

    /// `sh -c` text that dumps the device files (to stdout, or to `dump` when given), prints
    /// ``marker`` and execs `args`.
    static func script(_ args: [String], dump: String? = nil) -> String {
        let quoted = args.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let target = dump.map { " > '\($0)'" } ?? ""
        return #"""
            for f in /sys/bus/iio/devices/*/*; do
                [ -f "$f" ] && [ -r "$f" ] && printf '%s=%s\n' "$f" "$(cat "$f" 2>/dev/null)"
            done
            """# + "\(target)\n" + (dump == nil ? "echo '\(marker)'\n" : "") + "exec \(quoted.joined(separator: " "))\n"
    }

    /// Row i of `rows` is streamed sample i: the same nanosecond timestamp (on CLOCK_MONOTONIC) and
    /// the values the hand conversion gives, to the last bit the shortest text carries; and every
    /// streamed sample (written minus unread) has its row; with `exact` false, the rows are the
    /// first samples streamed (a run that ended at once).
    /// - Parameters:
    ///   - streamLog: iio-sim's `--stream-log` folder.
    ///   - sysfs: the device files, from ``SimHarness/sysfsFiles(dump:)``.
    ///   - tail: the rows are the last samples streamed (what `--keep` left), not the first.
    static func compare(_ rows: [CSVRow], streamLog: String, sysfs: [String: [String: String]], sensor: String,
                        exact: Bool = true, tail: Bool = false) throws {
        guard let device = rows.first?.device else { return }
        let type = sensor == "accelerometer" ? "accel" : "anglvel"
        var stream: [(raw: [Int64], ns: Int64?, clock: String)] = []
        for (record, bytes) in try SimHarness.sessions(in: streamLog, device: device) {
            let find = { (name: String) in record.elements.first { $0.channel == name } }
            guard let ex = find("\(type)_x"), let ey = find("\(type)_y"), let ez = find("\(type)_z") else { continue }
            let axes = try [ex, ey, ez].map { (offset: $0.offset, type: try ScanFormat(parsing: $0.type)) }
            let ts = try find("timestamp").map { (offset: $0.offset, type: try ScanFormat(parsing: $0.type)) }
            let raw = Array(bytes)
            for i in 0..<(raw.count / record.scanSize) {
                let base = i * record.scanSize
                stream.append((axes.map { $0.type.decode(raw, at: base + $0.offset) }, ts.map { $0.type.decode(raw, at: base + $0.offset) },
                              record.clock))
            }
        }
        if tail {
            #expect(rows.count <= stream.count, "\(sensor): \(rows.count) rows, only \(stream.count) samples streamed")
            stream = Array(stream.suffix(rows.count))
        } else if exact {
            #expect(rows.count == stream.count, "\(sensor): \(rows.count) rows, \(stream.count) samples streamed (written minus unread)")
        } else {
            #expect(rows.count <= stream.count, "\(sensor): \(rows.count) rows, only \(stream.count) samples streamed")
        }
        var mismatches = 0
        let files = sysfs[device] ?? [:]
        for (i, (row, sample)) in zip(rows, stream).enumerated() {
            let want = try #require(convert(sample.raw, sensor: sensor, files: files), "no conversion for \(device)")
            let valuesOK = zip([row.x, row.y, row.z], want).allSatisfy { abs($0 - $1) <= 1e-9 * abs($1) + 1e-12 }
            let timeOK = sample.clock != "monotonic" || sample.ns == nil || row.nanoseconds == sample.ns
            if !valuesOK || !timeOK {
                mismatches += 1
                if mismatches <= 3 { Issue.record("\(sensor) row \(i): \(row) but sample \(i) is \(want) at \(sample.ns ?? -1) ns") }
            }
        }
        #expect(mismatches == 0, "\(sensor): \(mismatches) rows differ from the stream")
    }

    /// (raw + offset) · scale, the mount matrix, then Core Motion's −v/g for acceleration.
    static func convert(_ raw: [Int64], sensor: String, files f: [String: String]) -> [Double]? {
        let t = sensor == "accelerometer" ? "accel" : "anglvel"
        func number(_ names: [String], default value: Double) -> Double? {
            guard let name = names.first(where: { f[$0] != nil }) else { return value }
            return Double(f[name]!.trimmingCharacters(in: .whitespaces))
        }
        var v: [Double] = []
        for (axis, r) in zip(["x", "y", "z"], raw) {
            guard let scale = number(["in_\(t)_\(axis)_scale", "in_\(t)_scale", "scale"], default: 1),
                  let offset = number(["in_\(t)_\(axis)_offset", "in_\(t)_offset", "offset"], default: 0) else { return nil }
            v.append((Double(r) + offset) * scale)
        }
        var m: [[Double]] = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
        if let text = ["in_\(t)_mount_matrix", "mount_matrix", "in_mount_matrix"].lazy.compactMap({ f[$0] }).first {
            m = text.split(separator: ";").map { $0.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) } }
            guard m.count == 3, m.allSatisfy({ $0.count == 3 }) else { return nil }
        }
        let rotated = m.map { row in row[0] * v[0] + row[1] * v[1] + row[2] * v[2] }
        return sensor == "accelerometer" ? rotated.map { -$0 / 9.80665 } : rotated
    }
}

/// One row of the log, parsed strictly: nine-decimal timestamp, shortest round-trip numbers.
struct CSVRow: CustomStringConvertible {
    var nanoseconds: Int64
    var sensor: String
    var device: String
    var x: Double, y: Double, z: Double
    var description: String { "\(nanoseconds) ns \(sensor) \(device) (\(x), \(y), \(z))" }

    init?(line: Substring) {
        let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard f.count == 6, ["accelerometer", "gyroscope"].contains(f[1]), f[2].hasPrefix("iio:device") else { return nil }
        let t = f[0].split(separator: ".")
        guard t.count == 2, t[1].count == 9, let s = Int64(t[0]), let frac = Int64(t[1]) else { return nil }
        let values = f[3...5].compactMap(Double.init)
        // Shortest round-trip text: what Swift prints for the value is exactly the field.
        guard values.count == 3, zip(f[3...5], values).allSatisfy({ $0 == $1.description }) else { return nil }
        nanoseconds = s * 1_000_000_000 + frac
        sensor = f[1]
        device = f[2]
        (x, y, z) = (values[0], values[1], values[2])
    }
}

/// A whole log file.
struct CSVLogFile {
    var headerOK: Bool
    var rows: [CSVRow] = []
    var bad: [String] = []
    var endsWithNewline: Bool

    init(text: String) {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        headerOK = lines.first == "timestamp,sensor,device,x,y,z"
        endsWithNewline = text.hasSuffix("\n")
        // `# …` lines say whether the rows under them are calibrated (a new file's, and each --append's).
        for line in lines.dropFirst() where !line.isEmpty && !line.hasPrefix("#") {
            if let row = CSVRow(line: line) { rows.append(row) } else { bad.append(String(line)) }
        }
        if lines.dropFirst().dropLast().contains("") { bad.append("(an empty line)") }
    }
}
