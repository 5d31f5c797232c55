import Foundation
import Glibc
import IIOScanFormat
import IIOSimKit
import Testing

// End-to-end tests of `motion-monitor`'s continuous mode (the streaming API behind it), run inside
// `iio-sim`: the real libiio local backend over the simulator's sysfs tree and FIFO device nodes,
// and the real iiod for `--uri ip:127.0.0.1`.
//
// The reference is the simulator itself: with `--stream-log` it records every byte it streamed
// per buffer session. Those scans are decoded here with IIOScanFormat's `ScanFormat` and converted by
// hand from the sysfs files of the same session ((raw + offset) · scale, the mount matrix M·v,
// then Core Motion's −v / 9.80665), without the IIOMotion library, and compared line by line.
//
// Timing bounds are generous (the machine is shared): they catch a wrong design, not jitter. The
// suite is serialized because its runs stream at up to 1.6 kHz and compete for two cores.
//
// Helpers are `private` so they cannot collide with the other suites of this target.

/// Every shipped fixture, with a `--count` that takes ≤ ~2 s at the rate the library picks for
/// `--interval 0` (the device's own, raised to ≥ 10 Hz: cros-ec idles at 0 Hz).
private let countsPerFixture: [(fixture: String, count: Int)] = [
    ("bmi160", 100),         // 100 Hz
    ("lsm6dsx", 20),         // 12.5 Hz
    ("hid-sensor-hub", 15),  // 10 Hz
    ("mpu6050", 60),         // 50 Hz
    ("cros-ec", 20),         // 0 Hz raised to 12.5 Hz (accelerometer) and 25 Hz (gyroscope)
    ("sense-hat", 20),       // 59.5 Hz (accelerometer and gyroscope; the magnetometer is not streamed by default)
]

/// Motion that makes every sample different (so order and identity are checked, not just counts).
private let moving = ["--motion", "rotate:axis=z,dps=90", "--accel-noise", "0.05", "--gyro-noise", "0.01"]

@Suite("motion-monitor streams under iio-sim", .serialized, .timeLimit(.minutes(10)),
       .enabled(if: Streams.ready, Comment(rawValue: Streams.notReadyReason)))
struct MotionMonitorStreamingTests {
    @Test("The fixture list covers fixtures/*.json")
    func fixtureListIsComplete() {
        #expect(Set(countsPerFixture.map(\.fixture)) == Set(SimHarness.fixtureNames))
    }

    // MARK: Every sample

    @Test("--json --interval 0 --count N: N lines per sensor, increasing, the still pose, the first N streamed",
          arguments: countsPerFixture)
    func everySampleStill(fixture: String, count: Int) throws {
        let r = try Streams.run(fixture: fixture, ["--json", "--interval", "0", "--count", "\(count)"], streamLog: true)
        defer { r.removeLog() }
        #expect(r.status == 0, "\(r)")
        #expect(r.badLines.isEmpty, "every stdout line is a pinned JSON reading: \(r.badLines.prefix(3))")
        for sensor in ["accelerometer", "gyroscope"] {
            let lines = r.lines(sensor)
            #expect(lines.count == count, "\(fixture) \(sensor): \(lines.count) lines\n\(r)")
            #expect(Streams.strictlyIncreasing(lines), "\(fixture) \(sensor) timestamps")
            for line in lines {
                if sensor == "accelerometer" {
                    // Face up: z ≈ −1 g; x and y are 0 within a few quanta (≤ 0.01 g for every fixture).
                    #expect(abs(line.z + 1) < 0.01 && abs(line.x) < 0.01 && abs(line.y) < 0.01, "\(fixture) \(line)")
                } else {
                    // Still, no bias, no noise: 0 within a quantum (≤ 0.002 rad/s for every fixture).
                    #expect(abs(line.x) < 0.005 && abs(line.y) < 0.005 && abs(line.z) < 0.005, "\(fixture) \(line)")
                }
            }
            // --count drops what comes after the N-th: the lines are the first N samples streamed.
            try Streams.compare(lines, with: r, sensor: sensor, exact: false)
        }
    }

    @Test("--interval 0 at a modest rate: every sample the simulator streamed arrives once, in order, with its values",
          arguments: [("bmi160", "100"), ("lsm6dsx", "104")])
    func everySampleMoving(fixture: String, rate: String) throws {
        let r = try Streams.run(fixture: fixture, sim: moving,
                                ["--json", "--interval", "0", "--rate", rate, "--duration", "1.5"], streamLog: true)
        defer { r.removeLog() }
        #expect(r.status == 0, "\(r)")
        #expect(r.badLines.isEmpty, "\(r.badLines.prefix(3))")
        for sensor in ["accelerometer", "gyroscope"] {
            let lines = r.lines(sensor)
            #expect(lines.count > 100, "\(sensor): \(lines.count) lines in 1.5 s at \(rate) Hz")
            try Streams.compare(lines, with: r, sensor: sensor, exact: true)
        }
    }

    @Test("--interval 0 at 1.6 kHz for 3 s: nothing lost between the simulator and stdout")
    func everySampleFast() throws {
        let r = try Streams.run(fixture: "bmi160", sim: moving,
                                ["--json", "--interval", "0", "--rate", "1600", "--duration", "3", "--verbose"], streamLog: true)
        defer { r.removeLog() }
        #expect(r.status == 0, "\(r)")
        #expect(r.badLines.isEmpty, "\(r.badLines.prefix(3))")
        #expect(r.stderr.contains("accelerometer: iio:device0 (bmi160), buffered at 1600 Hz, every sample"), "\(r.stderr)")
        let sessions = try SimHarness.sessions(in: r.streamLog, device: "iio:device0")
        let written = sessions.reduce(Int64(0)) { $0 + $1.record.scansWritten - $1.record.scansUnreadAtClose }
        let dropped = sessions.reduce(Int64(0)) { $0 + $1.record.scansDropped }
        // Kernel-side overflow means this machine starved the reader; it is reported, not failed on
        // (the count below still has to match what was written).
        if dropped > 0 { print("note: the simulated kernel buffer dropped \(dropped) scans (reader starved)") }
        // `--duration 3` counts from when the updates are started, before the buffer is set up
        // and the simulator's stream begins: the stream runs for less (1.85 s of samples in a
        // ThreadSanitizer run on a busy machine). The floor is a second's samples; what is
        // checked is that every one written arrives.
        for sensor in ["accelerometer", "gyroscope"] {
            let lines = r.lines(sensor)
            #expect(lines.count > 1600, "\(sensor): \(lines.count) lines in 3 s at 1600 Hz")
            try Streams.compare(lines, with: r, sensor: sensor, exact: true)
        }
        // Every scan of the (last, two-sensor) session holds both sensors.
        #expect(r.lines("gyroscope").count == Int(sessions.last.map { $0.record.scansWritten - $0.record.scansUnreadAtClose } ?? -1))
        #expect(r.lines("accelerometer").count == Int(written), "\(written) scans written minus unread")
    }

    // MARK: Capped delivery

    @Test("--interval 0.05 on an 800 Hz stream: about 20 lines a second per sensor, each a streamed sample, the newest")
    func capped() throws {
        let r = try Streams.run(fixture: "bmi160", sim: moving,
                                ["--json", "--rate", "800", "--interval", "0.05", "--duration", "2"], streamLog: true)
        defer { r.removeLog() }
        #expect(r.status == 0, "\(r)")
        #expect(r.badLines.isEmpty, "\(r.badLines.prefix(3))")
        for sensor in ["accelerometer", "gyroscope"] {
            let lines = r.lines(sensor)
            #expect(lines.count >= 20 && lines.count <= 60, "\(sensor): \(lines.count) lines in 2 s (10–30 a second)")
            #expect(Streams.strictlyIncreasing(lines), "\(sensor)")
            let gaps = zip(lines.dropFirst(), lines).map { $0.timestamp - $1.timestamp }.sorted()
            let median = gaps.isEmpty ? 0 : gaps[gaps.count / 2]
            #expect(median >= 0.03 && median <= 0.15, "\(sensor): median gap \(median) s for an interval of 0.05 s")
            // Each line is a sample the simulator streamed, with its values; consecutive lines skip
            // the ~40 samples in between (the newest one is printed, not the next one).
            let indices = try Streams.locate(lines, in: r, sensor: sensor)
            let steps = zip(indices.dropFirst(), indices).map { $0 - $1 }.sorted()
            let medianStep = steps.isEmpty ? 0 : steps[steps.count / 2]
            #expect(medianStep >= 20 && medianStep <= 120, "\(sensor): median step \(medianStep) samples at 800 Hz")
        }
    }

    // MARK: Modes

    @Test("--mode polled reads the raw files (no buffer session), says so with --verbose, timestamps now")
    func polled() throws {
        let before = Streams.monotonicNow()
        let r = try Streams.run(fixture: "bmi160", ["--json", "--mode", "polled", "--interval", "0.05", "--count", "5", "--verbose"],
                                streamLog: true)
        defer { r.removeLog() }
        let after = Streams.monotonicNow()
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.contains("accelerometer: iio:device0 (bmi160), polled"), "\(r)")
        #expect(r.stderr.contains("gyroscope: iio:device0 (bmi160), polled"), "\(r)")
        #expect(!r.stderr.contains("note: "), "an explicit --mode polled is no fallback: \(r)")
        let sessions = try SimHarness.sessions(in: r.streamLog, device: "iio:device0")
        #expect(sessions.allSatisfy { $0.record.scansWritten == 0 }, "polled mode streamed: \(sessions.map(\.record.scansWritten))")
        for sensor in ["accelerometer", "gyroscope"] {
            let lines = r.lines(sensor)
            #expect(lines.count == 5, "\(sensor)\n\(r)")
            #expect(Streams.strictlyIncreasing(lines), "\(sensor)")
            #expect(lines.allSatisfy { $0.timestamp >= before && $0.timestamp <= after }, "CLOCK_MONOTONIC at read time")
        }
    }

    @Test("No permission to enable the buffer: auto polls with one note; --mode buffered fails with 77 and a hint")
    func fallback() throws {
        let sim = ["--unreadable", "iio:device0/buffer/enable"]
        let auto = try Streams.run(fixture: "bmi160", sim: sim, ["--json", "--interval", "0.05", "--count", "3"])
        #expect(auto.status == 0, "\(auto)")
        #expect(auto.lines("accelerometer").count == 3 && auto.lines("gyroscope").count == 3, "\(auto)")
        let notes = auto.stderr.split(separator: "\n").filter { $0.hasPrefix("note: ") }
        #expect(notes.count == 1, "the fallback is announced once: \(auto.stderr)")
        #expect(notes.first?.contains("Polling iio:device0 (bmi160) instead of streaming its buffer: no permission") == true,
                "\(auto.stderr)")

        let buffered = try Streams.run(fixture: "bmi160", sim: sim, ["--json", "--mode", "buffered", "--count", "3"])
        #expect(buffered.status == 77, "\(buffered)")
        #expect(buffered.stdout.isEmpty, "\(buffered)")
        #expect(buffered.stderr.contains("Accelerometer encountered error: ") && buffered.stderr.contains("Gyroscope encountered error: "),
                "\(buffered)")
        #expect(buffered.stderr.contains("EACCES") && buffered.stderr.contains("--mode auto"), "\(buffered)")
    }

    @Test("--mode buffered on a device without scan elements: exit 69, the reason and a hint; auto polls it")
    func cannotBuffer() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fixture = dir + "/noscan.json"
        try Data(#"""
            { "description": "an accelerometer without scan elements",
              "devices": [ { "name": "acc", "attributes": { "in_accel_scale": "0.01" },
                             "channels": [ { "id": "accel_x", "value": 0 }, { "id": "accel_y", "value": 0 },
                                           { "id": "accel_z", "value": 981 } ] } ] }
            """#.utf8).write(to: URL(fileURLWithPath: fixture))
        let buffered = try Streams.run(fixture: fixture, ["--json", "--mode", "buffered", "--sensor", "accelerometer", "--count", "2"])
        #expect(buffered.status == 69, "\(buffered)")
        #expect(buffered.stdout.isEmpty, "\(buffered)")
        #expect(buffered.stderr.contains("Accelerometer encountered error: ") && buffered.stderr.contains("scan elements"), "\(buffered)")
        #expect(buffered.stderr.contains("--mode auto"), "\(buffered)")
        let auto = try Streams.run(fixture: fixture, ["--json", "--sensor", "accelerometer", "--count", "2"])
        #expect(auto.status == 0 && auto.lines("accelerometer").count == 2, "\(auto)")
        #expect(auto.stderr.contains("note: Polling iio:device0 (acc)"), "\(auto)")
    }

    // MARK: Remote

    @Test("Through iiod: --interval 0 --count streams the first samples in order",
          .enabled(if: SimHarness.installed("iiod"), "iiod is not installed (apt-get install iiod)"))
    func throughIIOD() throws {
        let r = try Streams.run(fixture: "bmi160", sim: ["--iiod"],
                                ["--uri", "ip:127.0.0.1", "--json", "--interval", "0", "--count", "50", "--verbose"], streamLog: true)
        defer { r.removeLog() }
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.contains("accelerometer: iio:device0 (bmi160), buffered"), "\(r.stderr)")
        for sensor in ["accelerometer", "gyroscope"] {
            let lines = r.lines(sensor)
            #expect(lines.count == 50, "\(sensor)\n\(r)")
            #expect(Streams.strictlyIncreasing(lines))
            try Streams.compare(lines, with: r, sensor: sensor, exact: false)
        }
    }

    // MARK: Ending

    @Test("--duration ends the run on time")
    func duration() throws {
        let start = Date()
        let r = try Streams.run(fixture: "bmi160", ["--json", "--duration", "1"])
        let elapsed = Date().timeIntervalSince(start)
        #expect(r.status == 0, "\(r)")
        #expect(elapsed >= 1 && elapsed < 8, "took \(elapsed) s")
        let lines = r.lines("accelerometer")
        #expect(lines.count >= 5 && lines.count <= 15, "about 10 a second: \(lines.count)")
        if let first = lines.first, let last = lines.last {
            #expect(last.timestamp - first.timestamp < 1.3, "span \(last.timestamp - first.timestamp) s")
        }
    }

    @Test("A sensor that fails stops with its message; the other goes on; exit 74 at the end")
    func oneSensorFails() throws {
        // lsm6dsx: the accelerometer and the gyroscope are separate devices; unplug the accelerometer.
        let r = try Streams.run(fixture: "lsm6dsx", sim: ["--unplug", "iio:device0@0.8"],
                                ["--json", "--interval", "0", "--duration", "4"])
        #expect(r.status == 74, "\(r)")
        #expect(r.stderr.contains("Accelerometer encountered error: "), "\(r)")
        #expect(!r.stderr.contains("Gyroscope encountered error"), "\(r)")
        let accel = r.lines("accelerometer"), gyro = r.lines("gyroscope")
        #expect(!accel.isEmpty, "\(r)")
        if let a = accel.last, let g = gyro.last {
            #expect(g.timestamp - a.timestamp > 1, "the gyroscope went on after the accelerometer stopped: \(a) … \(g)")
        }
    }

    @Test("Every sensor failed: the run ends by itself with 74")
    func everySensorFails() throws {
        let start = Date()
        let r = try Streams.run(fixture: "bmi160", sim: ["--unplug", "iio:device0@0.5"], ["--json"])
        #expect(r.status == 74, "\(r)")
        #expect(r.stderr.contains("Accelerometer encountered error: ") && r.stderr.contains("Gyroscope encountered error: "), "\(r)")
        #expect(Date().timeIntervalSince(start) < 15, "no hang after the last sensor failed")
    }

    @Test("A sensor with a broken attribute (a garbage scale): the default run streams what works, names the library's cause (device and file), exit 74",
          .timeLimit(.minutes(10)))
    func brokenAttribute() throws {
        let sim = ["--set", "iio:device0/in_accel_scale=garbage"]
        let r = try Streams.run(fixture: "bmi160", sim: sim, ["--json", "--duration", "2"])
        #expect(r.status == 74, "\(r)")
        #expect(!r.stderr.contains("needs a magnetometer"), "no wrong cause: \(r)")
        let errors = r.stderr.split(separator: "\n")
        for who in ["Accelerometer", "Device motion"] {
            #expect(errors.contains { $0.hasPrefix("\(who) encountered error: ") && $0.contains("iio:device0") && $0.contains("in_accel_scale") },
                    "\(who)'s failure names the device and the file: \(r.stderr)")
        }
        #expect(r.lines("accelerometer").isEmpty && r.motion.isEmpty, "\(r)")
        #expect(r.lines("gyroscope").count >= 10, "the gyroscope streams: \(r)")
        let once = try Streams.run(fixture: "bmi160", sim: sim, ["--once", "--sensor", "motion"])
        #expect(once.status == 74 && once.stderr.contains("Device motion encountered error: ") && once.stderr.contains("in_accel_scale"), "\(once)")
    }

    @Test("SIGTERM mid-stream at 1.6 kHz: exit 0, every line whole", .timeLimit(.minutes(10)))
    func sigterm() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: SimHarness.product("iio-sim"))
        process.arguments = ["--fixture", "bmi160", "--", SimHarness.product("motion-monitor"),
                             "--json", "--interval", "0", "--rate", "1600"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        var data = Data()
        let handle = pipe.fileHandleForReading
        while data.count(where: { $0 == UInt8(ascii: "\n") }) < 500 {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            data += chunk
        }
        kill(process.processIdentifier, SIGTERM)
        data += handle.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0)
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.hasSuffix("\n"), "the output ends with a whole line")
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.count >= 500)
        // Under all, device motion's lines are among them, in their own pinned form.
        func whole(_ line: String) -> Bool { JSONReading(line: line) != nil || JSONDeviceMotion(line: line) != nil }
        #expect(lines.allSatisfy(whole), "a partial or mixed line: \(lines.first { !whole($0) } ?? "")")
    }

    // MARK: Output forms

    @Test("Without --json: one readable line per reading; --sensor picks the sensor")
    func plainAndSensor() throws {
        let plain = try Streams.run(fixture: "hid-sensor-hub", ["--count", "2"])
        #expect(plain.status == 0, "\(plain)")
        let lines = plain.stdout.split(separator: "\n")
        #expect(lines.count == 6, "2 per sensor and 2 of device motion: \(plain)")
        #expect(lines.filter { $0.hasPrefix("deviceMotion   roll ") && $0.contains(" g  at ") }.count == 2, "\(plain)")
        #expect(lines.filter { $0.hasPrefix("accelerometer  iio:device0 (accel_3d)  x ") && $0.contains(" g  at ") }.count == 2, "\(plain)")
        #expect(lines.filter { $0.hasPrefix("gyroscope      iio:device1 (gyro_3d)  x ") && $0.contains(" rad/s  at ") }.count == 2, "\(plain)")
        let gyro = try Streams.run(fixture: "mpu6050", ["--json", "--sensor", "gyroscope", "--interval", "0", "--count", "10"])
        #expect(gyro.status == 0 && gyro.lines("gyroscope").count == 10 && gyro.lines("accelerometer").isEmpty, "\(gyro)")
    }
}

// MARK: - Running

private enum Streams {
    static let monitor = SimHarness.product("motion-monitor")
    static let sim = SimHarness.product("iio-sim")

    static var notReadyReason: String { SimHarness.monitorNotReadyReason }

    static var ready: Bool { SimHarness.monitorReady("motion-monitor streaming tests", extra: notReadyReason) }

    /// One run of motion-monitor inside iio-sim, with the device files dumped just before it.
    struct Run: CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String
        var parsed: [JSONReading]
        /// The device motion lines (`all` shows device motion when there are an accelerometer and a gyroscope).
        var motion: [JSONDeviceMotion] = []
        var badLines: [String]
        var sysfs: StreamSysfs
        /// The `--stream-log` folder ("" without one).
        var streamLog: String

        /// Removes the `--stream-log` folder.
        func removeLog() {
            if !streamLog.isEmpty { try? FileManager.default.removeItem(atPath: streamLog) }
        }

        func lines(_ sensor: String) -> [JSONReading] { parsed.filter { $0.sensor == sensor } }

        var description: String { "exit \(status)\n--- stdout\n\(stdout.prefix(2000))\n--- stderr\n\(stderr.prefix(3000))" }
    }

    private static let marker = "@@@ motion-monitor"

    /// Runs `iio-sim --fixture F SIM… -- sh -c 'dump; motion-monitor ARGS…'`.
    static func run(fixture: String, sim simOptions: [String] = [], _ args: [String], streamLog: Bool = false) throws -> Run {
        var log = ""
        var simArgs = ["--fixture", fixture] + simOptions
        if streamLog {
            log = try SimHarness.temporaryDirectory()
            simArgs += ["--stream-log", log]
        }
        let quoted = ([monitor] + args).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let script = #"""
            for f in /sys/bus/iio/devices/*/*; do
                [ -f "$f" ] && [ -r "$f" ] && printf '%s=%s\n' "$f" "$(cat "$f" 2>/dev/null)"
            done
            """# + "\necho '\(marker)'\nexec \(quoted.joined(separator: " "))\n"
        let r = try SimHarness.sim(simArgs, script: script)
        let parts = r.out.components(separatedBy: marker + "\n")
        let dump = parts.first ?? ""
        let out = parts.count > 1 ? parts[1] : ""
        var parsed: [JSONReading] = []
        var motion: [JSONDeviceMotion] = []
        var bad: [String] = []
        for line in out.split(separator: "\n", omittingEmptySubsequences: false).dropLast() where args.contains("--json") {
            if let p = JSONReading(line: String(line)) {
                parsed.append(p)
            } else if let m = JSONDeviceMotion(line: String(line)) {
                motion.append(m)
            } else {
                bad.append(String(line))
            }
        }
        if !out.isEmpty && !out.hasSuffix("\n") { bad.append("(no final newline)") }
        return Run(status: r.status, stdout: out, stderr: r.stderr, parsed: parsed, motion: motion, badLines: bad,
                   sysfs: StreamSysfs(dump: dump), streamLog: log)
    }

    static func strictlyIncreasing(_ lines: [JSONReading]) -> Bool {
        zip(lines.dropFirst(), lines).allSatisfy { $0.timestamp > $1.timestamp }
    }

    /// The samples of `sensor` the simulator streamed to the device of `lines`, in order, over
    /// every buffer session that carried that sensor's channels.
    static func streamed(_ sensor: String, device: String, in r: Run) throws -> [StreamedSample] {
        let type = sensor == "accelerometer" ? "accel" : "anglvel"
        var out: [StreamedSample] = []
        for (session, (record, bytes)) in try SimHarness.sessions(in: r.streamLog, device: device).enumerated() {
            let find = { (name: String) in record.elements.first { $0.channel == name } }
            guard let ex = find("\(type)_x"), let ey = find("\(type)_y"), let ez = find("\(type)_z") else { continue }
            let axes = try [ex, ey, ez].map { (offset: $0.offset, type: try ScanFormat(parsing: $0.type)) }
            let ts = try find("timestamp").map { (offset: $0.offset, type: try ScanFormat(parsing: $0.type)) }
            let raw = Array(bytes)
            for i in 0..<(raw.count / record.scanSize) {
                let base = i * record.scanSize
                let v = axes.map { $0.type.decode(raw, at: base + $0.offset) }
                out.append(StreamedSample(raw: v, nanoseconds: ts.map { $0.type.decode(raw, at: base + $0.offset) },
                                          session: session, clock: record.clock))
            }
        }
        return out
    }

    /// `clock` − `CLOCK_MONOTONIC` now, in seconds: what the library subtracts from a timestamp
    /// of that clock (0 for monotonic).
    static func offsetFromMonotonic(_ clock: String) -> Double {
        let id: clockid_t
        switch clock {
        case "realtime": id = CLOCK_REALTIME
        case "boottime": id = CLOCK_BOOTTIME
        case "realtime_coarse": id = CLOCK_REALTIME_COARSE
        case "tai": id = CLOCK_TAI
        default: return 0
        }
        var a = timespec(), m = timespec()
        clock_gettime(id, &a)
        clock_gettime(CLOCK_MONOTONIC, &m)
        return Double(a.tv_sec - m.tv_sec) + Double(a.tv_nsec - m.tv_nsec) * 1e-9
    }

    /// Checks that line i is streamed sample i (values by the hand conversion, timestamps), and
    /// with `exact` that every streamed sample was printed.
    static func compare(_ lines: [JSONReading], with r: Run, sensor: String, exact: Bool) throws {
        guard let device = lines.first?.device else { return }
        var stream = try streamed(sensor, device: device, in: r)
        // A capture started for device motion alone is joined by motion-monitor's own consumers a
        // moment later: what it streamed before they joined went to device motion before anything
        // was printed. The printed lines start with the streamed sample whose timestamp, moved to
        // CLOCK_MONOTONIC as the library moves it, is the first line's: at a session's start when
        // the capture restarted for them (a queued consumer), within the session when they joined
        // the running capture (consumers on the capture thread). From there, every streamed
        // sample must be printed, in order.
        if let first = lines.first {
            let errors = stream.map { s in
                s.nanoseconds.map { abs(Double($0) * 1e-9 - offsetFromMonotonic(s.clock) - first.timestamp) } ?? .infinity
            }
            if let best = errors.indices.min(by: { errors[$0] < errors[$1] }), errors[best] < 1e-3, best > 0 {
                stream.removeFirst(best)
            }
        }
        if exact {
            #expect(lines.count == stream.count, "\(sensor): \(lines.count) printed, \(stream.count) streamed (written minus unread)")
        } else {
            #expect(lines.count <= stream.count, "\(sensor): \(lines.count) printed, only \(stream.count) streamed")
        }
        var offsets: [String: [Double]] = [:]
        var mismatches = 0
        for (i, (line, sample)) in zip(lines, stream).enumerated() {
            let want = try #require(r.sysfs.convert(sample.raw, sensor: sensor, device: device), "no conversion for \(sensor) of \(device)")
            if !zip([line.x, line.y, line.z], want).allSatisfy({ close($0, $1) }) {
                mismatches += 1
                if mismatches <= 3 { Issue.record("\(sensor) line \(i): \(line) but streamed sample \(i) is \(want)") }
            }
            if let ns = sample.nanoseconds { offsets[sample.clock, default: []].append(line.timestamp - Double(ns) * 1e-9) }
        }
        #expect(mismatches == 0, "\(sensor): \(mismatches) of \(min(lines.count, stream.count)) lines differ from the stream")
        // The timestamps are the kernel's: on CLOCK_MONOTONIC they are printed as they are; on
        // another clock (cros-ec: boottime) the library moves them by one constant.
        for (clock, values) in offsets {
            guard let lo = values.min(), let hi = values.max() else { continue }
            if clock == "monotonic" {
                #expect(abs(lo) < 1e-6 && abs(hi) < 1e-6, "\(sensor): timestamps differ from the stream's by \(lo)…\(hi) s")
            } else {
                #expect(hi - lo < 1e-4, "\(sensor) (\(clock)): the clock offset varies by \(hi - lo) s")
            }
        }
    }

    /// Where each line is in the stream (by timestamp), checking its values there.
    static func locate(_ lines: [JSONReading], in r: Run, sensor: String) throws -> [Int] {
        guard let device = lines.first?.device else { return [] }
        let stream = try streamed(sensor, device: device, in: r)
        var indices: [Int] = []
        var from = 0
        for line in lines {
            guard let i = stream[from...].firstIndex(where: { $0.nanoseconds.map { abs(Double($0) * 1e-9 - line.timestamp) < 1e-6 } ?? false })
            else {
                Issue.record("\(sensor): \(line) is not in the stream (after sample \(from))")
                continue
            }
            let want = try #require(r.sysfs.convert(stream[i].raw, sensor: sensor, device: device))
            #expect(zip([line.x, line.y, line.z], want).allSatisfy { close($0, $1) }, "\(line) vs \(want)")
            indices.append(i)
            from = i + 1
        }
        return indices
    }

    static func close(_ a: Double, _ b: Double) -> Bool { abs(a - b) <= 1e-9 * abs(b) + 1e-12 }

    static func monotonicNow() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
    }
}

/// One scan's values of one sensor, as the simulator streamed them.
private struct StreamedSample {
    var raw: [Int64]
    var nanoseconds: Int64?
    /// The buffer session (0, 1, …) it was streamed in.
    var session: Int
    /// The session's `current_timestamp_clock`.
    var clock: String
}


/// The device files of one session, parsed from the `cat` dump, and the hand conversion.
private struct StreamSysfs {
    /// Device id → file name → contents.
    var files: [String: [String: String]] = [:]

    init(dump: String) {
        files = SimHarness.sysfsFiles(dump: dump)
    }

    /// Raw values of `sensor` on `device` in the printed units: the kernel ABI's (raw + offset) ·
    /// scale (per axis, per type, then device-level files), the mount matrix M·v
    /// (`in_<type>_mount_matrix`, `mount_matrix`, `in_mount_matrix`), then Core Motion's −v/g for
    /// acceleration.
    func convert(_ raw: [Int64], sensor: String, device: String) -> [Double]? {
        guard let f = files[device], raw.count == 3 else { return nil }
        let t = sensor == "accelerometer" ? "accel" : "anglvel"
        func number(_ names: [String], default value: Double) -> Double? {
            guard let name = names.first(where: { f[$0] != nil }) else { return value }
            return Double(f[name]!.trimmingCharacters(in: .whitespaces))
        }
        var v: [Double] = []
        for (axis, r) in zip(["x", "y", "z"], raw) {
            guard let scale = number(["in_\(t)_\(axis)_scale", "in_\(t)_scale", "scale"], default: 1),
                  let offset = number(["in_\(t)_\(axis)_offset", "in_\(t)_offset", "offset"], default: 0)
            else { return nil }
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
