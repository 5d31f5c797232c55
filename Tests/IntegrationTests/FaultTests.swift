import Foundation
import Glibc
import IIOSimKit
import Testing

// Issue G's fault matrix, end to end: motion-monitor under iio-sim through the real libiio local
// backend (and the real iiod for `ip:`), with faults the simulator injects or a script causes.
// Other faults of the matrix live next to the feature they break: unplug and no IRQ in
// LibraryStreamingTests / MotionMonitorStreamingTests, unreadable and garbage attributes in
// PermissionTests / SimulatorIntegrationTests, disk full in MotionMonitorCSVTests.

@Suite("Faults: busy devices, odd devices, many devices, a dying iiod", .serialized, .timeLimit(.minutes(10)),
       .enabled(if: SimHarness.monitorReady("fault tests")))
struct FaultTests {
    static let monitor = SimHarness.product("motion-monitor")

    @Test("A device whose buffer another process streams: polled, with a note naming the cause, and the other reader keeps its stream")
    func busyDevice() throws {
        // iio_readdev holds the buffer (as iio-sensor-proxy or iiod would). libiio's own buffer
        // set-up writes buffer/enable = 0 before it opens the node, which would stop the holder's
        // stream; motion-monitor must find out without touching it.
        let r = try SimHarness.sim(["--fixture", "bmi160"], script: """
            stdbuf -o0 iio_readdev -u local: -b 1 bmi160 > /tmp/held.bin 2>/tmp/held.err &
            holder=$!
            i=0; while [ ! -s /tmp/held.bin ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
            '\(Self.monitor)' --json --interval 0.05 --count 5
            status=$?
            a=$(stat -c %s /tmp/held.bin); sleep 0.5; b=$(stat -c %s /tmp/held.bin)
            echo "enable $(cat /sys/bus/iio/devices/iio:device0/buffer/enable)" >&2
            kill $holder 2>/dev/null
            echo "holder $a $b" >&2
            cat /tmp/held.err >&2
            exit $status
            """)
        #expect(r.status == 0, "\(r)")
        let notes = r.stderr.split(separator: "\n").filter { $0.hasPrefix("note: ") }
        #expect(notes.count == 1 && notes[0].contains("held by another process"), "\(r.stderr)")
        let lines = r.out.split(separator: "\n")
        #expect(lines.filter { $0.contains("\"accelerometer\"") }.count == 5, "\(r)")
        #expect(lines.filter { $0.contains("\"gyroscope\"") }.count == 5, "\(r)")
        let holder = r.stderr.split(separator: "\n").first { $0.hasPrefix("holder ") }?.split(separator: " ").compactMap { Int($0) } ?? []
        #expect(holder.count == 2 && holder[1] > holder[0], "the other reader's stream went on: \(r.stderr)")
        #expect(!r.stderr.contains("Unable to refill buffer"), "\(r.stderr)")
        #expect(r.stderr.contains("enable 1"), "the holder's buffer is still enabled: \(r.stderr)")
    }

    @Test("iiod killed mid-stream: each sensor reports the lost connection, exit 74, no hang")
    func iiodKilled() throws {
        guard SimHarness.installed("iiod") else {
            print("skipping: iiod is not installed")
            return
        }
        let start = Date()
        let r = try SimHarness.run(SimHarness.product("iio-sim"), ["--fixture", "bmi160", "--iiod", "--", "/bin/sh", "-c", """
            : > /tmp/out.jsonl
            '\(Self.monitor)' --uri ip:127.0.0.1 --json --interval 0 > /tmp/out.jsonl &
            m=$!
            i=0; while [ "$(wc -c < /tmp/out.jsonl)" -lt 8192 ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
            pkill -x iiod
            wait $m
            status=$?
            echo "lines $(wc -l < /tmp/out.jsonl)" >&2
            exit $status
            """])
        let seconds = Date().timeIntervalSince(start)
        #expect(r.status == 74, "\(r)")
        #expect(r.stderr.contains("Accelerometer encountered error: ") && r.stderr.contains("Gyroscope encountered error: "), "\(r)")
        #expect(r.stderr.contains("The connection to iiod was lost"), "\(r)")
        #expect(!r.stderr.contains("lines 0"), "it streamed before iiod went: \(r)")
        #expect(seconds < 30, "ended \(seconds) s after start")
    }

    @Test("A two-axis accelerometer: an error naming the missing axis, exit 69, no reading made up")
    func twoAxes() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fixture = dir + "/two-axes.json"
        try Data(#"""
            { "description": "a two-axis accelerometer (x and y only), like the ADXL213",
              "devices": [ { "name": "adxl213", "attributes": { "in_accel_scale": "0.01" },
                             "channels": [ { "id": "accel_x", "value": 0 }, { "id": "accel_y", "value": 981 } ] } ] }
            """#.utf8).write(to: URL(fileURLWithPath: fixture))
        let r = try SimHarness.sim(["--fixture", fixture], script: "'\(Self.monitor)' --once --json; echo \"status $?\"")
        #expect(r.out.contains("status 69"), "\(r)")
        #expect(r.stderr.contains("iio:device0 (adxl213) has no in_accel_z channel, so its accelerometer cannot be used"), "\(r)")
        #expect(!r.out.contains("nan") && !r.out.contains("\"x\""), "no reading made up from two axes: \(r)")
    }

    @Test("Unknown extra channels (temperature, steps, a vendor channel in the scan) are ignored; readings stay right")
    func extraChannels() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fixture = dir + "/extra.json"
        try Data(#"""
            { "description": "an IMU with temperature, a step counter and a vendor channel in its scan",
              "devices": [ { "name": "imu-extra",
                             "attributes": { "in_accel_scale": "0.001", "in_anglvel_scale": "0.001", "in_temp_scale": "0.5",
                                             "in_steps_input": "42", "sampling_frequency": "100" },
                             "channels": [
                               { "id": "temp", "index": 0, "format": "le:s16/16>>0", "value": 50 },
                               { "id": "accel_x", "index": 1, "format": "le:s16/16>>0" },
                               { "id": "accel_y", "index": 2, "format": "le:s16/16>>0" },
                               { "id": "accel_z", "index": 3, "format": "le:s16/16>>0" },
                               { "id": "anglvel_x", "index": 4, "format": "le:s16/16>>0" },
                               { "id": "anglvel_y", "index": 5, "format": "le:s16/16>>0" },
                               { "id": "anglvel_z", "index": 6, "format": "le:s16/16>>0" },
                               { "id": "activity_x", "index": 7, "format": "le:u8/8>>0", "value": 7 },
                               { "id": "timestamp", "index": 8, "format": "le:s64/64>>0" } ],
                             "buffer": { "triggered": false } } ] }
            """#.utf8).write(to: URL(fileURLWithPath: fixture))
        let r = try SimHarness.sim(["--fixture", fixture], script: "'\(Self.monitor)' --json --interval 0 --count 20")
        #expect(r.status == 0, "\(r)")
        let readings = r.out.split(separator: "\n").compactMap { JSONReading(line: String($0)) }
        #expect(readings.filter { $0.sensor == "accelerometer" }.count == 20 && readings.filter { $0.sensor == "gyroscope" }.count == 20, "\(r)")
        #expect(readings.filter { $0.sensor == "accelerometer" }.allSatisfy { abs($0.z + 1) < 0.01 && abs($0.x) < 0.01 }, "\(r)")
        #expect(readings.filter { $0.sensor == "gyroscope" }.allSatisfy { abs($0.x) + abs($0.y) + abs($0.z) < 0.01 }, "\(r)")
    }

    @Test("64 devices: all listed, quickly; one streams")
    func sixtyFourDevices() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let device = #"""
            { "name": "acc%d", "attributes": { "in_accel_scale": "0.01", "sampling_frequency": "100" },
              "channels": [ { "id": "accel_x", "index": 0, "format": "le:s16/16>>0" }, { "id": "accel_y", "index": 1, "format": "le:s16/16>>0" },
                            { "id": "accel_z", "index": 2, "format": "le:s16/16>>0" }, { "id": "timestamp", "index": 3, "format": "le:s64/64>>0" } ],
              "buffer": { "triggered": false } }
            """#
        let devices = (0..<64).map { device.replacingOccurrences(of: "%d", with: String($0)) }
        let text = #"{ "description": "64 accelerometers", "devices": [ "# + devices.joined(separator: ",") + " ] }"
        try Data(text.utf8).write(to: URL(fileURLWithPath: dir + "/many.json"))
        // The simulator rewrites each device's `raw` files at up to its sampling frequency, a
        // thread per device: 64 of them at 100 Hz keep 1.7 of 2 cores busy in a debug build (a
        // kernel reads `raw` on demand), and under ThreadSanitizer kept the one stream from
        // delivering within its 1 s timeout. This test reads no `raw` file: 10 Hz (0.3 cores).
        let r = try SimHarness.sim(["--fixture", dir + "/many.json", "--raw-refresh-max", "10"], script: """
            t0=$(date +%s%N)
            '\(Self.monitor)' --list --json > /tmp/list.json || exit 1
            t1=$(date +%s%N)
            echo "list ms $(( (t1 - t0) / 1000000 ))" >&2
            cat /tmp/list.json
            '\(Self.monitor)' --json --interval 0 --count 5 --device acc63 >&2
            """)
        #expect(r.status == 0, "\(r)")
        let list = try JSONSerialization.jsonObject(with: r.stdout) as? [[String: Any]] ?? []
        #expect(list.count == 64, "\(r.out.prefix(400))")
        #expect(Set(list.compactMap { $0["name"] as? String }).count == 64)
        #expect(r.stderr.split(separator: "\n").filter { $0.contains("\"accelerometer\"") && $0.contains("iio:device63") }.count == 5, "\(r)")
        if let ms = r.stderr.split(separator: "\n").first(where: { $0.hasPrefix("list ms ") }).flatMap({ Int($0.dropFirst(8)) }) {
            print("64 devices listed in \(ms) ms")
            #expect(ms < 20_000)
        }
    }
}

/// Garbage in every attribute the library reads: each value written into the live file, then a
/// polled read (`--once`) and a short buffered stream. Each run must end by itself with a status
/// (no signal, no hang), print only well-formed readings with finite numbers, and, when it fails,
/// name the device and the attribute.
@Suite("Faults: garbage in every attribute", .timeLimit(.minutes(10)),
       .enabled(if: SimHarness.monitorReady("garbage attribute tests")))
struct GarbageAttributeTests {
    static let monitor = SimHarness.product("motion-monitor")
    /// Written with `printf %b`: `\\377\\376` is two bytes that are not UTF-8, `\\0` a NUL.
    static let garbage = ["", "abc", "nan", "inf", "1e999", "-1e999", "0x10", "1 2 3", "12345678901234567890123",
                          "0.5\\00007", "\\377\\376", "-", "4.5e-99999", "1,5", "le:s99/16>>0", "-3"]

    @Test("bmi160: each attribute, each garbage value", arguments: [
        "in_accel_scale", "in_anglvel_scale", "in_accel_x_raw", "in_mount_matrix",
        "in_accel_sampling_frequency", "in_accel_sampling_frequency_available",
        "scan_elements/in_accel_x_type", "scan_elements/in_accel_x_index", "scan_elements/in_timestamp_type",
    ])
    func garbage(_ attribute: String) throws {
        let file = "/sys/bus/iio/devices/iio:device0/" + attribute
        // Under ThreadSanitizer (each instrumented start-up is slow) a third of the values: this
        // suite is about input handling, which the plain run covers whole; races are TSan's part.
        let garbage = SimHarness.underThreadSanitizer ? Self.garbage.enumerated().filter { $0.offset % 3 == 0 }.map(\.element) : Self.garbage
        let values = garbage.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let r = try SimHarness.sim(["--fixture", "bmi160", "--set", "bmi160/\(attribute)=0"], script: """
            for v in \(values); do
              printf '%b\n' "$v" > '\(file)'
              echo "=== value [$v]"
              echo "=== value [$v]" >&2
              timeout 20 '\(Self.monitor)' --once --json; echo "=== once $?"
              timeout 20 '\(Self.monitor)' --json --interval 0 --count 3; echo "=== stream $?"
            done
            """)
        #expect(r.status == 0, "\(r)")
        var runs = 0
        for block in r.out.components(separatedBy: "=== value [").dropFirst() {
            let value = String(block.prefix { $0 != "]" })
            for line in block.split(separator: "\n").dropFirst() where !line.hasPrefix("===") {
                #expect(JSONReading(line: String(line)) != nil || JSONDeviceMotion(line: String(line)) != nil,
                        "\(attribute) = [\(value)]: not a well-formed reading: \(line)")
            }
            for kind in ["once", "stream"] {
                guard let statusLine = block.split(separator: "\n").first(where: { $0.hasPrefix("=== \(kind) ") }),
                      let status = Int(statusLine.dropFirst(5 + kind.count)) else {
                    Issue.record("\(attribute) = [\(value)]: no \(kind) status")
                    continue
                }
                runs += 1
                #expect(status != 124 && status < 128, "\(attribute) = [\(value)], \(kind): ended by timeout or signal (\(status))")
            }
        }
        #expect(runs == 2 * garbage.count, "\(r)")
        // Every failure names the device and the attribute's file.
        let base = attribute.split(separator: "/").last.map(String.init) ?? attribute
        for block in r.stderr.components(separatedBy: "=== value [").dropFirst() {
            let value = String(block.prefix { $0 != "]" })
            let errors = block.split(separator: "\n").filter { $0.contains("encountered error") || $0.hasPrefix("motion-monitor: ") && $0.contains("error") }
            // libiio reads the scan elements itself: a layout it built from garbage fails at refill,
            // and the message can only point at the scan_elements files.
            for e in errors where !(e.contains(base) || (attribute.hasPrefix("scan_elements/") && e.contains("scan_elements"))) {
                // A failure caused by this attribute must say so; others (none expected) are reported too.
                Issue.record("\(attribute) = [\(value)]: the error does not name \(base): \(e)")
            }
        }
    }
}

/// The rest of the fault matrix for the CLI: no data-ready interrupt, Ctrl-C while waiting for
/// one, a device unplugged while polled, a sampling frequency the driver refuses to change.
@Suite("Faults: silent, vanishing and stubborn devices", .serialized, .timeLimit(.minutes(10)),
       .enabled(if: SimHarness.monitorReady("fault tests")))
struct SilentDeviceTests {
    static let monitor = SimHarness.product("motion-monitor")

    @Test("No data-ready interrupt: each sensor's error names the interrupt and the trigger after the timeout; exit 74, no hang")
    func noInterrupt() throws {
        let start = Date()
        let r = try SimHarness.sim(["--fixture", "bmi160", "--no-irq", "bmi160"],
                                   script: "timeout 30 '\(Self.monitor)' --json --interval 0.05")
        let seconds = Date().timeIntervalSince(start)
        #expect(r.status == 74, "\(r)")
        for sensor in ["Accelerometer", "Gyroscope"] {
            let line = r.stderr.split(separator: "\n").first { $0.hasPrefix("\(sensor) encountered error: ") } ?? ""
            #expect(line.contains("interrupt") && line.contains("trigger") && line.contains("ETIMEDOUT"), "\(r)")
        }
        #expect(seconds < 15, "ended \(seconds) s after start")
    }

    @Test("A scan-element type that cannot be decoded: polled, one note naming the file and its text (not 'no scan elements'), values right",
          arguments: ["junk", "le:s12/24>>0"])
    func unreadableScanType(_ type: String) throws {
        let file = "/sys/bus/iio/devices/iio:device0/scan_elements/in_accel_x_type"
        let r = try SimHarness.sim(["--fixture", "bmi160", "--set", "bmi160/scan_elements/in_accel_x_type=0"], script: """
            printf '%s\\n' '\(type)' > '\(file)'
            timeout 20 '\(Self.monitor)' --json --interval 0 --count 5 --sensor accelerometer
            """)
        #expect(r.status == 0, "\(r)")
        let notes = r.stderr.split(separator: "\n").filter { $0.hasPrefix("note: ") }
        #expect(notes.count == 1, "\(r)")
        let note = notes.first.map(String.init) ?? ""
        #expect(note.contains("scan_elements/in_accel_x_type (\"\(type)\"") && note.contains("is not a scan-element type that can be decoded"), "\(note)")
        #expect(!note.contains("no scan elements"), "\(note)")
        let lines = r.out.split(separator: "\n").compactMap { JSONReading(line: String($0)) }
        #expect(lines.count == 5 && lines.allSatisfy { abs($0.z + 1) < 0.05 }, "\(r)")
    }

    @Test("Ctrl-C while the device stays silent: motion-monitor ends at once")
    func interruptWhileSilent() throws {
        let r = try SimHarness.sim(["--fixture", "bmi160", "--no-irq", "bmi160"], script: """
            '\(Self.monitor)' --json --interval 0.05 &
            m=$!
            sleep 0.5
            t0=$(date +%s%N)
            kill -INT $m
            wait $m
            status=$?
            t1=$(date +%s%N)
            echo "status $status after $(( (t1 - t0) / 1000000 )) ms" >&2
            """)
        let line = r.stderr.split(separator: "\n").first { $0.hasPrefix("status ") } ?? ""
        let parts = line.split(separator: " ")
        #expect(parts.count >= 4, "\(r)")
        if parts.count >= 4, let status = Int(parts[1]), let ms = Int(parts[3]) {
            #expect(status == 0 || status == 130, "\(r)")
            #expect(ms < 2000, "stopped \(ms) ms after Ctrl-C")
        }
    }

    @Test("A polled device unplugged: its sensor's error, the other device's sensor goes on, exit 74")
    func polledUnplug() throws {
        let r = try SimHarness.sim(["--fixture", "lsm6dsx", "--unplug", "iio:device0@0.8"],
                                   script: "timeout 30 '\(Self.monitor)' --json --mode polled --interval 0.05 --duration 3")
        #expect(r.status == 74, "\(r)")
        #expect(r.stderr.contains("Accelerometer encountered error: ") && !r.stderr.contains("Gyroscope encountered error"), "\(r)")
        let readings = r.out.split(separator: "\n").compactMap { JSONReading(line: String($0)) }
        let accel = readings.filter { $0.sensor == "accelerometer" }, gyro = readings.filter { $0.sensor == "gyroscope" }
        #expect(!accel.isEmpty && !gyro.isEmpty, "\(r)")
        if let a = accel.last, let g = gyro.last {
            #expect(g.timestamp - a.timestamp > 1, "the gyroscope went on after the accelerometer went: \(a) … \(g)")
        }
    }

    @Test("A sampling frequency the driver will not change: the run goes on at the frequency in force and says which")
    func refusedFrequency() throws {
        let r = try SimHarness.sim(["--fixture", "bmi160", "--read-only", "bmi160/in_accel_sampling_frequency",
                                    "--read-only", "bmi160/in_anglvel_sampling_frequency"],
                                   script: "timeout 30 '\(Self.monitor)' --json --interval 0 --rate 400 --count 30 --verbose")
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.contains("buffered at 100 Hz"), "the frequency in force, not the one asked for: \(r.stderr)")
        let accel = r.out.split(separator: "\n").compactMap { JSONReading(line: String($0)) }.filter { $0.sensor == "accelerometer" }
        #expect(accel.count == 30, "\(r)")
        if let first = accel.first, let last = accel.last {
            let period = (last.timestamp - first.timestamp) / Double(accel.count - 1)
            #expect(abs(period - 0.01) < 0.001, "samples 10 ms apart (100 Hz): \(period)")
        }
    }

    @Test("A hub that stalls after a sensor reached --count, while another is still counting: exit 0, every reading printed (issue 33)")
    func stallAfterCount() throws {
        // An accelerometer at 416 Hz reaches --count 30 within 0.1 s and keeps running while the
        // magnetometer, at 12.5 Hz, needs 2.4 s. 0.5 s after its buffer was enabled the
        // accelerometer's device stalls for good: its refill times out (1.0 s) about 1 s before the
        // run's end condition is met. The accelerometer's part of the run was over by then.
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fixture = dir + "/fast-and-slow.json"
        try Data(#"""
            { "description": "a fast accelerometer and a slow magnetometer, each with a hardware FIFO",
              "devices": [
                { "name": "fast_accel", "frequency_rule": "round-up",
                  "attributes": { "in_accel_scale": "0.000598", "sampling_frequency": "416.000000",
                                  "sampling_frequency_available": "416.000" },
                  "channels": [ { "id": "accel_x", "index": 0, "format": "le:s16/16>>0" },
                                { "id": "accel_y", "index": 1, "format": "le:s16/16>>0" },
                                { "id": "accel_z", "index": 2, "format": "le:s16/16>>0" },
                                { "id": "timestamp", "index": 3, "format": "le:s64/64>>0" } ],
                  "buffer": { "triggered": false } },
                { "name": "slow_magn", "frequency_rule": "round-up",
                  "attributes": { "in_magn_scale": "0.001", "sampling_frequency": "12.500000",
                                  "sampling_frequency_available": "12.500" },
                  "channels": [ { "id": "magn_x", "index": 0, "format": "le:s16/16>>0" },
                                { "id": "magn_y", "index": 1, "format": "le:s16/16>>0" },
                                { "id": "magn_z", "index": 2, "format": "le:s16/16>>0" },
                                { "id": "timestamp", "index": 3, "format": "le:s64/64>>0" } ],
                  "buffer": { "triggered": false } } ] }
            """#.utf8).write(to: URL(fileURLWithPath: fixture))
        let r = try SimHarness.sim(["--fixture", fixture, "--stall", "fast_accel@0.5"],
                                   script: "'\(Self.monitor)' --json --interval 0 --count 30 --verbose")
        let readings = r.out.split(separator: "\n").compactMap { JSONReading(line: String($0)) }
        #expect(readings.filter { $0.sensor == "accelerometer" }.count == 30, "\(r)")
        #expect(readings.filter { $0.sensor == "magnetometer" }.count == 30, "\(r)")
        #expect(r.status == 0, "the run's end condition was met: \(r)")
        #expect(!r.stderr.contains("encountered error"), "\(r.stderr)")
        // The stall is not hidden: --verbose says what came after the sensor's end.
        #expect(r.stderr.contains("delivered no data for 1.0 s") && r.stderr.contains("not a failure of the run"), "\(r.stderr)")
    }
}
