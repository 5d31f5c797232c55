import Foundation
import Glibc
import IIOSimKit
import Testing

// End-to-end tests of `motion-monitor --csv`, run inside `iio-sim`: the log is compared with what
// the simulator recorded with `--stream-log` (every scan it wrote, minus what was never read),
// decoded with IIOScanFormat's `ScanFormat` and converted by hand from the sysfs files, as
// MotionMonitorStreamingTests does for the JSON lines.
//
// Helpers are `private` so they cannot collide with the other suites of this target.

/// Motion that makes every sample different.
private let moving = ["--motion", "rotate:axis=z,dps=90", "--accel-noise", "0.05", "--gyro-noise", "0.01"]

@Suite("motion-monitor --csv under iio-sim", .serialized, .timeLimit(.minutes(10)),
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
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains("\n# accelerometer uncalibrated; gyroscope uncalibrated\n"), "the appended rows say they are uncalibrated: \(text.prefix(600))")
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

    private static let marker = LogCheck.marker

    private static func script(_ args: [String]) -> String { LogCheck.script(args) }

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

    /// Row i of `rows` is streamed sample i, and every streamed sample has its row (``LogCheck``).
    static func compare(_ rows: [CSVRow], with r: Run, sensor: String) throws {
        try LogCheck.compare(rows, streamLog: r.streamLog, sysfs: r.sysfs, sensor: sensor)
    }
}
