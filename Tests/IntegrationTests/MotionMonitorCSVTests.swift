import Foundation
import Glibc
import IIOSimKit
import Testing

// End-to-end tests of `motion-monitor --csv`, run inside `iio-sim`: the log is compared with what
// the simulator recorded with `--stream-log` (every scan it wrote, minus what was never read),
// decoded with IIOSimKit's `ScanType` and converted by hand from the sysfs files, as
// MotionMonitorStreamingTests does for the JSON lines.
//
// Helpers are `private` so they cannot collide with the other suites of this target.

/// Motion that makes every sample different.
private let moving = ["--motion", "rotate:axis=z,dps=90", "--accel-noise", "0.05", "--gyro-noise", "0.01"]

@Suite("motion-monitor --csv under iio-sim", .serialized, .timeLimit(.minutes(5)),
       .enabled(if: CSVRuns.ready, Comment(rawValue: CSVRuns.notReadyReason)))
struct MotionMonitorCSVTests {
    @Test("The log equals the stream: every sample once, in order, nanosecond timestamps, values to the last digit",
          arguments: [("bmi160", "100"), ("lsm6dsx", "104"), ("hid-sensor-hub", "10")])
    func equalsStream(fixture: String, rate: String) throws {
        let r = try CSVRuns.run(fixture: fixture, sim: moving, ["--rate", rate, "--duration", "1.5", "--quiet"])
        defer { r.remove() }
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.isEmpty, "--quiet: \(r.stdout.prefix(200))")
        let log = try #require(r.log, "\(r)")
        #expect(log.bad.isEmpty, "rows that are not the pinned form: \(log.bad.prefix(3))")
        for sensor in ["accelerometer", "gyroscope"] {
            let rows = log.rows.filter { $0.sensor == sensor }
            #expect(rows.count >= 10, "\(sensor): \(rows.count) rows")
            try CSVRuns.compare(rows, with: r, sensor: sensor)
            // Under ThreadSanitizer a stalled reader may let the kernel buffer overflow (timing, not
            // design); what motion-monitor drops must be 0 either way.
            let kernel = SimHarness.underThreadSanitizer ? "" : "0 dropped by the kernel, "
            #expect(r.stderr.contains("  \(sensor.padding(toLength: 13, withPad: " ", startingAt: 0))  ")
                    && r.stderr.contains("\(rows.count) written, \(kernel)") && r.stderr.contains("0 dropped by motion-monitor"), "\(r.stderr)")
        }
        #expect(r.stderr.contains("motion-monitor: logged \(log.rows.count) samples to \(r.path)"), "\(r.stderr)")
    }

    @Test("--count N logs the first N samples of each sensor; --si logs m/s²")
    func countAndSI() throws {
        let r = try CSVRuns.run(fixture: "bmi160", ["--count", "25", "--si", "--quiet"])
        defer { r.remove() }
        #expect(r.status == 0, "\(r)")
        let log = try #require(r.log)
        for sensor in ["accelerometer", "gyroscope"] {
            #expect(log.rows.filter { $0.sensor == sensor }.count == 25, "\(r)")
        }
        // Face up, in SI units with the kernel's sign: z ≈ +9.81.
        #expect(log.rows.filter { $0.sensor == "accelerometer" }.allSatisfy { abs($0.z - 9.80665) < 0.05 }, "\(log.rows.prefix(2))")
    }

    @Test("--csv - through a pipe: nothing but CSV on stdout, the summary on stderr")
    func stdoutIsClean() throws {
        let r = try CSVRuns.run(fixture: "bmi160", ["--count", "20"], file: "-")
        defer { r.remove() }
        #expect(r.status == 0, "\(r)")
        let log = CSVLogFile(text: r.stdout)
        #expect(log.headerOK && log.bad.isEmpty && log.endsWithNewline, "\(r.stdout.prefix(300))")
        #expect(log.rows.count == 40, "\(r)")
        #expect(r.stderr.contains("logged 40 samples to stdout"), "\(r.stderr)")
    }

    @Test("SIGINT and SIGTERM mid-log: exit 0, a whole file holding every sample read", arguments: [SIGINT, SIGTERM])
    func interrupted(signal: Int32) throws {
        let r = try CSVRuns.runUntil(fixture: "bmi160", sim: moving, ["--rate", "400", "--interval", "0", "--quiet"], rows: 400, signal: signal)
        defer { r.remove() }
        #expect(r.status == 0, "\(r)")
        let log = try #require(r.log)
        #expect(log.headerOK && log.bad.isEmpty && log.endsWithNewline, "\(log.bad.prefix(3))")
        for sensor in ["accelerometer", "gyroscope"] {
            let rows = log.rows.filter { $0.sensor == sensor }
            #expect(rows.count >= 200, "\(sensor): \(rows.count)")
            try CSVRuns.compare(rows, with: r, sensor: sensor)
        }
        #expect(r.stderr.contains("0 dropped by motion-monitor"), "\(r.stderr)")
    }

    @Test("Unplugged mid-log: exit 74, the error, and a whole file holding every sample read")
    func unplugged() throws {
        let r = try CSVRuns.run(fixture: "bmi160", sim: moving + ["--unplug", "iio:device0@1"], ["--rate", "200", "--quiet"])
        defer { r.remove() }
        #expect(r.status == 74, "\(r)")
        #expect(r.stderr.contains("Accelerometer encountered error: ") && r.stderr.contains("iio:device0 (bmi160)"), "\(r.stderr)")
        let log = try #require(r.log)
        #expect(log.headerOK && log.bad.isEmpty && log.endsWithNewline)
        for sensor in ["accelerometer", "gyroscope"] {
            let rows = log.rows.filter { $0.sensor == sensor }
            #expect(rows.count >= 100, "\(sensor): \(rows.count)")
            try CSVRuns.compare(rows, with: r, sensor: sensor)
        }
    }

    @Test("A file that exists: refused with 73 and left alone; --force replaces it; --append adds without a second header")
    func existingFile() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/ride.csv"
        try Data("precious\n".utf8).write(to: URL(fileURLWithPath: path))
        let refused = try CSVRuns.run(fixture: "bmi160", ["--count", "3", "--quiet"], file: path, keep: true)
        #expect(refused.status == 73, "\(refused)")
        #expect(refused.stderr.contains("\(path) exists; pass --force to replace it or --append to add to it"), "\(refused.stderr)")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "precious\n")

        let badAppend = try CSVRuns.run(fixture: "bmi160", ["--count", "3", "--quiet", "--append"], file: path, keep: true)
        #expect(badAppend.status == 73 && badAppend.stderr.contains("does not begin with the header"), "\(badAppend)")

        let forced = try CSVRuns.run(fixture: "bmi160", ["--count", "3", "--quiet", "--force"], file: path, keep: true)
        #expect(forced.status == 0, "\(forced)")
        #expect(forced.log?.rows.count == 6)
        let appended = try CSVRuns.run(fixture: "bmi160", ["--count", "4", "--quiet", "--append"], file: path, keep: true)
        #expect(appended.status == 0, "\(appended)")
        let log = try #require(appended.log)
        #expect(log.headerOK && log.bad.isEmpty && log.rows.count == 14, "one header, 6 + 8 rows: \(log.bad.prefix(2))")
    }

    @Test("None of the requested sensors: 69, the message, and no file created")
    func noSensor() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fixture = try SimHarness.accelerometerOnlyFixture(in: dir)
        let r = try CSVRuns.run(fixture: fixture, ["--sensor", "gyroscope"], file: dir + "/never.csv", keep: true)
        #expect(r.status == 69, "\(r)")
        #expect(r.stderr.contains("This device has no gyroscope."), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/never.csv"))
    }

    @Test("Disk full: exit 74, what failed, and a file of whole rows")
    func diskFull() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // iio-sim's command is root in its own mount namespace: a 64 KiB tmpfs fills in about a second.
        let monitor = SimHarness.product("motion-monitor")
        let script = """
            mkdir -p /tmp/full-\(getpid()) && mount -t tmpfs -o size=64k full /tmp/full-\(getpid()) || { echo "cannot mount" >&2; exit 99; }
            '\(monitor)' --csv /tmp/full-\(getpid())/log.csv --rate 1600 --interval 0 --quiet --duration 20
            status=$?
            cp /tmp/full-\(getpid())/log.csv '\(dir)/log.csv'
            exit $status
            """
        let r = try SimHarness.sim(["--fixture", "bmi160"], script: script)
        if r.status == 99 {
            print("skipping the disk-full test: a tmpfs cannot be mounted inside iio-sim here")
            return
        }
        #expect(r.status == 74, "\(r)")
        #expect(r.stderr.contains("writing /tmp/full-\(getpid())/log.csv failed: no space left on device (ENOSPC)"), "\(r.stderr)")
        #expect(r.stderr.contains("rows written before it are kept"), "\(r.stderr)")
        let log = CSVLogFile(text: try String(contentsOfFile: dir + "/log.csv", encoding: .utf8))
        #expect(log.headerOK && log.bad.isEmpty && log.endsWithNewline, "\(log.bad.prefix(3))")
        #expect(log.rows.count > 500, "\(log.rows.count) rows in 64 KiB")
    }
}

// MARK: - Running

private enum CSVRuns {
    static let monitor = SimHarness.product("motion-monitor")
    static let sim = SimHarness.product("iio-sim")

    static var notReadyReason: String { SimHarness.monitorNotReadyReason }

    static var ready: Bool { SimHarness.monitorReady("motion-monitor --csv tests", extra: notReadyReason) }

    struct Run: CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String
        /// The log file ("-" for stdout).
        var path: String
        var sysfs: [String: [String: String]]
        var streamLog: String
        var folder: String
        var keep: Bool

        var log: CSVLogFile? {
            guard path != "-", let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
            return CSVLogFile(text: text)
        }

        func remove() {
            try? FileManager.default.removeItem(atPath: streamLog)
            if !keep { try? FileManager.default.removeItem(atPath: folder) }
        }

        var description: String { "exit \(status)\n--- stdout\n\(stdout.prefix(1500))\n--- stderr\n\(stderr.prefix(3000))" }
    }

    private static let marker = "@@@ motion-monitor"

    private static func script(_ args: [String]) -> String {
        let quoted = args.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        return #"""
            for f in /sys/bus/iio/devices/*/*; do
                [ -f "$f" ] && [ -r "$f" ] && printf '%s=%s\n' "$f" "$(cat "$f" 2>/dev/null)"
            done
            """# + "\necho '\(marker)'\nexec \(quoted.joined(separator: " "))\n"
    }

    private static func parseDump(_ dump: String) -> [String: [String: String]] {
        SimHarness.sysfsFiles(dump: dump)
    }

    /// Runs `motion-monitor --csv FILE ARGS…` inside `iio-sim --stream-log`.
    static func run(fixture: String, sim simOptions: [String] = [], _ args: [String], file: String? = nil, keep: Bool = false) throws -> Run {
        let folder = try SimHarness.temporaryDirectory()
        let log = try SimHarness.temporaryDirectory()
        let path = file ?? folder + "/log.csv"
        let r = try SimHarness.sim(["--fixture", fixture, "--stream-log", log] + simOptions,
                                   script: script([monitor, "--csv", path] + args))
        let parts = r.out.components(separatedBy: marker + "\n")
        return Run(status: r.status, stdout: parts.count > 1 ? parts[1] : "", stderr: r.stderr, path: path,
                   sysfs: parseDump(parts.first ?? ""), streamLog: log, folder: file == nil ? folder : folder, keep: keep)
    }

    /// Runs until the log holds `rows` rows, then sends `signal` to iio-sim (which forwards it).
    static func runUntil(fixture: String, sim simOptions: [String], _ args: [String], rows: Int, signal: Int32) throws -> Run {
        let folder = try SimHarness.temporaryDirectory()
        let log = try SimHarness.temporaryDirectory()
        let path = folder + "/log.csv"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: sim)
        process.arguments = ["--fixture", fixture, "--stream-log", log] + simOptions
            + ["--", "/bin/sh", "-c", script([monitor, "--csv", path] + args)]
        let out = URL(fileURLWithPath: folder + "/stdout"), err = URL(fileURLWithPath: folder + "/stderr")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            if text.utf8.count(where: { $0 == UInt8(ascii: "\n") }) > rows { break }
            usleep(50_000)
        }
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
        let status = process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
        let stdout = String(decoding: try Data(contentsOf: out), as: UTF8.self)
        let parts = stdout.components(separatedBy: marker + "\n")
        return Run(status: status, stdout: parts.count > 1 ? parts[1] : "", stderr: String(decoding: try Data(contentsOf: err), as: UTF8.self),
                   path: path, sysfs: parseDump(parts.first ?? ""), streamLog: log, folder: folder, keep: false)
    }

    /// Row i of `rows` is streamed sample i: the same nanosecond timestamp (on CLOCK_MONOTONIC) and
    /// the values the hand conversion gives, to the last bit the shortest text carries; and every
    /// streamed sample (written minus unread) has its row.
    static func compare(_ rows: [CSVRow], with r: Run, sensor: String) throws {
        guard let device = rows.first?.device else { return }
        let type = sensor == "accelerometer" ? "accel" : "anglvel"
        var stream: [(raw: [Int64], ns: Int64?)] = []
        var clock = ""
        for (record, bytes) in try SimHarness.sessions(in: r.streamLog, device: device) {
            let find = { (name: String) in record.elements.first { $0.channel == name } }
            guard let ex = find("\(type)_x"), let ey = find("\(type)_y"), let ez = find("\(type)_z") else { continue }
            let axes = try [ex, ey, ez].map { (offset: $0.offset, type: try ScanType(parsing: $0.type)) }
            let ts = try find("timestamp").map { (offset: $0.offset, type: try ScanType(parsing: $0.type)) }
            clock = record.clock
            let raw = Array(bytes)
            for i in 0..<(raw.count / record.scanSize) {
                let base = i * record.scanSize
                stream.append((axes.map { $0.type.decode(raw, at: base + $0.offset) }, ts.map { $0.type.decode(raw, at: base + $0.offset) }))
            }
        }
        #expect(rows.count == stream.count, "\(sensor): \(rows.count) rows, \(stream.count) samples streamed (written minus unread)")
        var mismatches = 0
        for (i, (row, sample)) in zip(rows, stream).enumerated() {
            let want = try #require(convert(sample.raw, sensor: sensor, files: r.sysfs[device] ?? [:]), "no conversion for \(device)")
            let valuesOK = zip([row.x, row.y, row.z], want).allSatisfy { abs($0 - $1) <= 1e-9 * abs($1) + 1e-12 }
            let timeOK = clock != "monotonic" || sample.ns == nil || row.nanoseconds == sample.ns
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
private struct CSVRow: CustomStringConvertible {
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
private struct CSVLogFile {
    var headerOK: Bool
    var rows: [CSVRow] = []
    var bad: [String] = []
    var endsWithNewline: Bool

    init(text: String) {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        headerOK = lines.first == "timestamp,sensor,device,x,y,z"
        endsWithNewline = text.hasSuffix("\n")
        for line in lines.dropFirst() where !line.isEmpty {
            if let row = CSVRow(line: line) { rows.append(row) } else { bad.append(String(line)) }
        }
        if lines.dropFirst().dropLast().contains("") { bad.append("(an empty line)") }
    }
}
