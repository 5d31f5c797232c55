import Foundation
import Glibc
import Testing

// End-to-end tests of the built `motion-monitor`, run inside the built `iio-sim`: the real libiio
// local backend over the simulator's sysfs tree, and the real iiod (`--uri ip:127.0.0.1`).
//
// Expected values are computed here from the sysfs files the simulator publishes, read with `cat` in
// the same namespace as the run, without using the IIOMotion library: (raw + offset) · scale per
// axis, the mount matrix M·v, then Core Motion's −v / 9.80665 for acceleration. The motions are
// `still` with no noise (and a constant gyro bias), so raw values do not change during a run and
// nothing depends on timing.
//
// Helpers are `private` so they cannot collide with the other suites of this target.

/// Every shipped fixture; `fixtureListIsComplete` fails when one is added without being listed here.
private let fixtures = ["bmi160", "lsm6dsx", "hid-sensor-hub", "mpu6050", "cros-ec", "sense-hat"]

@Suite("motion-monitor under iio-sim", .timeLimit(.minutes(10)), .enabled(if: Tools.ready, Comment(rawValue: Tools.notReadyReason)))
struct MotionMonitorIntegrationTests {
    @Test("The fixture list covers fixtures/*.json")
    func fixtureListIsComplete() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Tools.fixturesDirectory)
            .filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }
        #expect(Set(names) == Set(fixtures))
    }

    // MARK: Values

    @Test("--once --json and --si equal the hand-computed conversion (local backend)", arguments: fixtures)
    func conversionLocal(fixture: String) throws {
        try checkConversion(fixture: fixture, iiod: false)
    }

    // iiod is Debian's `iiod` package; without it these cannot run.
    @Test("--once --json and --si equal the hand-computed conversion (through iiod)",
          .enabled(if: Tools.has("iiod"), "iiod is not installed (apt-get install iiod)"), arguments: fixtures)
    func conversionIIOD(fixture: String) throws {
        try checkConversion(fixture: fixture, iiod: true)
    }

    /// One session: dump the device files, then `--once --json`, then `--once --json --si`; the
    /// device lies with +x up (so the mount matrix matters) and the gyro has a constant bias.
    private func checkConversion(fixture: String, iiod: Bool) throws {
        let uri = iiod ? ["--uri", "ip:127.0.0.1"] : []
        let before = monotonicNow()
        let r = try Tools.session(fixture: fixture, simOptions: ["--motion", "still:up=+x", "--gyro-bias", "0.1,-0.2,0.3"] + (iiod ? ["--iiod"] : []),
                                  runs: [["--once", "--json"] + uri, ["--once", "--json", "--si"] + uri])
        let after = monotonicNow()
        #expect(r.status == 0, "\(r)")
        #expect(r.outputs.count == 2, "\(r)")
        let sysfs = Sysfs(dump: r.dump)
        for (index, si) in [false, true].enumerated() {
            guard index < r.outputs.count else { break }
            let lines = r.outputs[index]
            // Under all, --once reads the magnetometer too when there is one (the Sense HAT's).
            #expect(lines.map(\.sensor) == ["accelerometer", "gyroscope"] + (fixture == "sense-hat" ? ["magnetometer"] : []), "\(r)")
            for line in lines {
                let expected = try #require(sysfs.expected(line.sensor, device: line.device, si: si), "\(r)")
                for (axis, got, want) in zip3(["x", "y", "z"], [line.x, line.y, line.z], expected) {
                    #expect(relativelyEqual(got, want), "\(fixture) \(line.sensor) \(axis) si=\(si): \(got) vs \(want)")
                }
                #expect(line.timestamp >= before && line.timestamp <= after, "\(line.timestamp) not in [\(before), \(after)]")
            }
            // Lying with +x up: x carries gravity, and the kernel's sign is the opposite of Core Motion's.
            if let accel = lines.first(where: { $0.sensor == "accelerometer" }) {
                #expect(si ? accel.x > 9.7 : accel.x < -0.99, "\(accel)")
            }
        }
    }

    @Test("Face up reads z ≈ −1 g (+9.81 m/s² with --si); --motion still:up=-z flips the sign", arguments: fixtures)
    func faceUpAndDown(fixture: String) throws {
        let up = try Tools.session(fixture: fixture, runs: [["--once", "--json", "--sensor", "accelerometer"],
                                                            ["--once", "--json", "--sensor", "accelerometer", "--si"]])
        let down = try Tools.session(fixture: fixture, simOptions: ["--motion", "still:up=-z"],
                                     runs: [["--once", "--json", "--sensor", "accelerometer"]])
        let cm = try #require(up.outputs.first?.first, "\(up)")
        let si = try #require(up.outputs.dropFirst().first?.first, "\(up)")
        let flipped = try #require(down.outputs.first?.first, "\(down)")
        #expect(abs(cm.z + 1) < 1e-3 && abs(cm.x) < 1e-3 && abs(cm.y) < 1e-3, "\(cm)")
        #expect(abs(si.z - 9.80665) < 1e-2, "\(si)")
        #expect(abs(flipped.z - 1) < 1e-3, "\(flipped)")
    }

    // MARK: Availability and errors

    @Test("A machine without IIO: both messages on stderr, nothing on stdout, exit 69",
          .enabled(if: !FileManager.default.fileExists(atPath: "/sys/bus/iio"),
                   "this machine has /sys/bus/iio; the iio-sim variant below covers the case"))
    func noIIOOnThisMachine() throws {
        let r = try Tools.run(Tools.monitor, ["--once"])
        #expect(r.status == 69, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderr.contains("This device has no accelerometer.\nThis device has no gyroscope.\n"), "\(r)")
    }

    @Test("IIO devices but no motion sensor: both messages, exit 69, in every mode")
    func onlyATemperatureSensor() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mm-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let fixture = dir.appendingPathComponent("thermometer.json")
        try Data(#"""
            { "description": "a TMP117 thermometer and nothing else",
              "devices": [ { "name": "tmp117", "attributes": { "in_temp_scale": "7.8125" },
                             "channels": [ { "id": "temp", "value": 2900 } ] } ] }
            """#.utf8).write(to: fixture)
        for args in [["--once"], ["--once", "--json"], []] {
            let r = try Tools.run(Tools.sim, ["--fixture", fixture.path, "--", Tools.monitor] + args)
            #expect(r.status == 69, "\(args): \(r)")
            #expect(r.stdout.isEmpty, "\(args): \(r)")
            #expect(r.stderr.contains("This device has no accelerometer.\nThis device has no gyroscope.\n"), "\(args): \(r)")
        }
        let gyro = try Tools.run(Tools.sim, ["--fixture", fixture.path, "--", Tools.monitor, "--once", "--sensor", "gyroscope"])
        #expect(gyro.status == 69)
        #expect(gyro.stderr == "This device has no gyroscope.\n", "\(gyro)")
        let list = try Tools.run(Tools.sim, ["--fixture", fixture.path, "--", Tools.monitor, "--list", "--json"])
        #expect(list.status == 0 && list.stdout == "[]\n", "\(list)")
    }

    @Test("A garbage scale: an error naming the device and the file, exit 74, no data for that sensor")
    func garbageScale() throws {
        let set = ["--set", "iio:device0/in_accel_scale=abc"]
        let r = try Tools.run(Tools.sim, ["--fixture", "bmi160"] + set + ["--", Tools.monitor, "--once", "--json", "--sensor", "accelerometer"])
        #expect(r.status == 74, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderr.hasPrefix("Accelerometer encountered error: "), "\(r)")
        #expect(r.stderr.contains("iio:device0") && r.stderr.contains("in_accel_scale") && r.stderr.contains("abc"), "\(r)")
        #expect(!r.stderr.contains("This device has no"), "a broken sensor is not a missing one: \(r)")
        // Asked for every sensor, the healthy gyroscope is still read; the status reports the failure.
        let all = try Tools.run(Tools.sim, ["--fixture", "bmi160"] + set + ["--", Tools.monitor, "--once", "--json"])
        #expect(all.status == 74, "\(all)")
        #expect(all.stdout.hasPrefix(#"{"sensor":"gyroscope","device":"iio:device0","#) && all.stdout.split(separator: "\n").count == 1, "\(all)")
    }

    @Test("An unreadable raw file: permission denied naming device and file, exit 77")
    func unreadableRaw() throws {
        let r = try Tools.run(Tools.sim, ["--fixture", "lsm6dsx", "--unreadable", "iio:device1/in_anglvel_y_raw", "--",
                                          Tools.monitor, "--once", "--json", "--sensor", "gyroscope"])
        #expect(r.status == 77, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderr.hasPrefix("Gyroscope encountered error: ") && r.stderr.contains("in_anglvel_y_raw of iio:device1"), "\(r)")
    }

    // MARK: Discovery and selection

    @Test("--list --json: one object per motion device with the pinned keys", arguments: fixtures)
    func listJSON(fixture: String) throws {
        let r = try Tools.session(fixture: fixture, runs: [["--list", "--json"]], parseReadings: false)
        #expect(r.status == 0, "\(r)")
        let text = try #require(r.rawOutputs.first, "\(r)")
        let object = try JSONSerialization.jsonObject(with: Data(text.utf8))
        let devices = try #require(object as? [[String: Any]], "\(text)")
        let sysfs = Sysfs(dump: r.dump)
        #expect(devices.count == sysfs.motionDevices.count, "\(text)")
        for (device, id) in zip(devices, sysfs.motionDevices) {
            #expect(device["id"] as? String == id)
            #expect(device["name"] as? String == sysfs.files[id]?["name"])
            if let label = sysfs.files[id]?["label"] {
                #expect(device["label"] as? String == label)
            } else {
                #expect(device["label"] is NSNull)
            }
            #expect(device["sensors"] as? [String] == sysfs.sensors(of: id), "\(id)")
            #expect(device["buffered"] as? Bool == true, "every shipped fixture's motion devices can buffer")
        }
        // The table has a header and a row per device.
        let table = try Tools.session(fixture: fixture, runs: [["--list"]], parseReadings: false)
        #expect(table.rawOutputs.first?.split(separator: "\n").count == devices.count + 1, "\(table)")
    }

    @Test("cros-ec: the display's accelerometer by default, the base's with --device accel-base")
    func deviceSelection() throws {
        let r = try Tools.session(fixture: "cros-ec", runs: [
            ["--once", "--json"], ["--once", "--json", "--device", "accel-base"], ["--once", "--json", "--device", "iio:device0"],
        ])
        #expect(r.status == 0, "\(r)")
        let devices = r.outputs.map { $0.map { "\($0.sensor) \($0.device)" } }
        #expect(devices == [
            ["accelerometer iio:device1", "gyroscope iio:device2"],      // accel-display; the only gyro
            ["accelerometer iio:device0", "gyroscope iio:device2"],      // both labelled accel-base
            ["accelerometer iio:device0"],                               // by id: no gyro on that device
        ], "\(r)")
        #expect(r.stderr.contains("This device has no gyroscope."), "\(r)")
        let none = try Tools.run(Tools.sim, ["--fixture", "cros-ec", "--", Tools.monitor, "--once", "--device", "nope"])
        #expect(none.status == 69 && none.stdout.isEmpty, "\(none)")
        #expect(none.stderr.contains("No device matches --device nope") && none.stderr.contains("accel-display"), "\(none)")
    }

    @Test("Where the mount matrix comes from: --list's MATRIX and mount_matrix_source, -v's line; over ip: udev is not asked, and --list says so",
          .enabled(if: Tools.has("iiod"), "iiod is not installed (apt-get install iiod)"))
    func mountMatrixSource() throws {
        // iio-sim's devices are not on sysfs, so libudev knows none of them (sd_device checks the
        // file system): their matrices are the kernel's. udev's own are the kernel suite's case udev-hwdb.
        let local = try Tools.run(Tools.sim, ["--fixture", "lsm6dsx", "--", Tools.monitor, "--list"])
        #expect(local.status == 0, "\(local)")
        let rows = local.stdout.split(separator: "\n")
        #expect(rows.first?.hasSuffix("MATRIX") == true && rows.dropFirst().allSatisfy { $0.hasSuffix("  kernel") }, "\(local)")
        #expect(!local.stderr.contains("udev"), "a local --list without -v says nothing about udev: \(local)")
        let json = try Tools.run(Tools.sim, ["--fixture", "lsm6dsx", "--", Tools.monitor, "--list", "--json"])
        let devices = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]], "\(json)")
        #expect(devices.map { $0["mount_matrix_source"] as? [String: String] }
            == [["accelerometer": "kernel:mount_matrix"], ["gyroscope": "kernel:mount_matrix"]], "\(json)")
        let verbose = try Tools.run(Tools.sim, ["--fixture", "lsm6dsx", "--", Tools.monitor, "--json", "--count", "1", "-v"])
        #expect(verbose.status == 0, "\(verbose)")
        #expect(verbose.stderr.contains("accelerometer: mount matrix -1, 0, 0; 0, -1, 0; 0, 0, 1 from the kernel (mount_matrix)"), "\(verbose)")
        #expect(verbose.stderr.contains("gyroscope: mount matrix -1, 0, 0; 0, -1, 0; 0, 0, 1 from the kernel (mount_matrix)"), "\(verbose)")
        let remote = try Tools.run(Tools.sim, ["--fixture", "lsm6dsx", "--iiod", "--", Tools.monitor, "--uri", "ip:127.0.0.1", "--list"])
        #expect(remote.status == 0 && remote.stdout.split(separator: "\n").dropFirst().allSatisfy { $0.hasSuffix("  kernel") }, "\(remote)")
        #expect(remote.stderr.contains("note: udev was not asked for mount matrices (a remote (ip:) context has no udev): they are the kernel's."), "\(remote)")
    }

    // MARK: The process

    @Test("Usage errors exit 64 with one line and a hint; --help and --version exit 0")
    func usage() throws {
        let bad = try Tools.run(Tools.monitor, ["--once", "--frobnicate"])
        #expect(bad.status == 64 && bad.stdout.isEmpty, "\(bad)")
        #expect(bad.stderr == "motion-monitor: error: unknown option '--frobnicate'\nRun 'motion-monitor --help' for usage.\n")
        let help = try Tools.run(Tools.monitor, ["--help"])
        #expect(help.status == 0 && help.stdout.hasPrefix("OVERVIEW: ") && help.stderr.isEmpty, "\(help)")
        let version = try Tools.run(Tools.monitor, ["--version"])
        #expect(version.status == 0 && version.stdout.hasPrefix("motion-monitor "), "\(version)")
    }

    @Test("The continuous view prints readings until SIGINT, then exits 0", .timeLimit(.minutes(10)))
    func watchStopsOnSIGINT() throws {
        // Event-driven, not timed: wait for two lines, then interrupt.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Tools.sim)
        process.arguments = ["--fixture", "hid-sensor-hub", "--", Tools.monitor, "--json"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        var text = ""
        let handle = pipe.fileHandleForReading
        while text.filter({ $0 == "\n" }).count < 2 {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        kill(process.processIdentifier, SIGINT)
        _ = handle.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0)
        let lines = text.split(separator: "\n")
        #expect(lines.count >= 2)
        #expect(lines.allSatisfy { $0.hasPrefix(#"{"sensor":"#) }, "\(text)")
    }
}

/// Drivers of Linux 6.1 whose published scale is not in the ABI's unit
/// (Sources/IIOMotionCore/Device/KernelQuirks.swift): their recorded fixtures read corrected.
@Suite("motion-monitor on kernel quirks recorded from Linux 6.1", .timeLimit(.minutes(10)),
       .enabled(if: Tools.ready, Comment(rawValue: Tools.notReadyReason)))
struct KernelQuirkReadingTests {
    @Test("hmc5883l's scale (0.01/Gain, hmc5843_core.c:86) is read ×100: gauss, printed as µT",
          arguments: [false, true])
    func hmc5883l(si: Bool) throws {
        try check(fixture: "kernel-6.1/hmc5883l", sensor: "magnetometer", si: si, factor: 100)
    }

    @Test("fxas21002c's scale (millidegrees/s, fxas21002c_core.c:609) is read in rad/s", arguments: [false, true])
    func fxas21002c(si: Bool) throws {
        try check(fixture: "kernel-6.1/fxas21002c", sensor: "gyroscope", si: si, factor: Double.pi / 180_000)
    }

    @Test("--list names the corrected scale: published, in use, and the kernel line")
    func listShowsCorrection() throws {
        let r = try Tools.session(fixture: "kernel-6.1/hmc5883l", runs: [["--list"]], parseReadings: false)
        #expect(r.status == 0, "\(r)")
        let out = r.rawOutputs.first ?? ""
        #expect(out.contains("scale of the magnetometer of iio:device0 (hmc5883l): 0.000009174 published, 0.0009174 used (the driver's unit is not the ABI's: hmc5843_core.c:86)"), "\(r)")
        let json = try Tools.session(fixture: "kernel-6.1/hmc5883l", runs: [["--list", "--json"]], parseReadings: false)
        let devices = try #require(try JSONSerialization.jsonObject(with: Data((json.rawOutputs.first ?? "").utf8)) as? [[String: Any]], "\(json)")
        let correction = try #require((devices.first?["scale_correction"] as? [String: Any])?["magnetometer"] as? [String: Any], "\(json)")
        #expect(correction["published"] as? Double == 0.000009174 && abs((correction["used"] as? Double ?? 0) - 0.0009174) < 1e-12
                    && correction["source"] as? String == "hmc5843_core.c:86", "\(json)")
        let plain = try Tools.session(fixture: "kernel-6.1/lis3mdl", runs: [["--list"], ["--list", "--json"]], parseReadings: false)
        #expect(plain.status == 0 && plain.rawOutputs.count == 2 && !(plain.rawOutputs.first ?? "").contains("scale of the")
                    && !plain.rawOutputs[1].contains("scale_correction"), "\(plain)")
    }

    @Test("mpu3050's raw reads published unsigned (Linux before 6.1.188) read signed; another gyroscope's as published",
          arguments: [("mpu3050", [-3598.0, 1000, -25536]), ("l3gd20", [61938.0, 1000, 40000])])
    func mpu3050Sign(name: String, want: [Double]) throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fixture = dir + "/\(name).json"
        try Data("""
            { "description": "\(name) as Debian's 6.1.0-50 kernel publishes mpu3050's polled reads (0xF1F2 as 61938)",
              "devices": [ { "name": "\(name)", "attributes": { "in_anglvel_scale": "0.001" },
                             "channels": [ { "id": "anglvel_x", "value": 61938 }, { "id": "anglvel_y", "value": 1000 },
                                           { "id": "anglvel_z", "value": 40000 } ] } ] }
            """.utf8).write(to: URL(fileURLWithPath: fixture))
        let r = try Tools.session(fixture: fixture, runs: [["--once", "--json", "--si"]])
        #expect(r.status == 0, "\(r)")
        let line = try #require(r.outputs.first?.first { $0.sensor == "gyroscope" }, "\(r)")
        for (axis, got, w) in zip3(["x", "y", "z"], [line.x, line.y, line.z], want.map { $0 * 0.001 }) {
            #expect(relativelyEqual(got, w), "\(name) \(axis): \(got), want \(w)")
        }
    }

    private func check(fixture: String, sensor: String, si: Bool, factor: Double) throws {
        let r = try Tools.session(fixture: fixture, runs: [["--once", "--json"] + (si ? ["--si"] : [])])
        #expect(r.status == 0, "\(r)")
        let sysfs = Sysfs(dump: r.dump)
        let line = try #require(r.outputs.first?.first { $0.sensor == sensor }, "\(r)")
        let published = try #require(sysfs.expected(sensor, device: line.device, si: si), "\(r)")
        #expect(published.allSatisfy { $0 != 0 }, "\(r)")
        for (axis, got, want) in zip3(["x", "y", "z"], [line.x, line.y, line.z], published.map { $0 * factor }) {
            #expect(relativelyEqual(got, want), "\(fixture) \(axis): \(got), want \(want) (published \(published))")
        }
    }
}

// MARK: - Running

private enum Tools {
    static let monitor = SimHarness.product("motion-monitor")
    static let sim = SimHarness.product("iio-sim")
    static let fixturesDirectory = SimHarness.fixturesDirectory

    static var notReadyReason: String { SimHarness.monitorNotReadyReason }

    static var ready: Bool { SimHarness.monitorReady("motion-monitor integration tests", extra: notReadyReason) }

    /// Whether a program is on PATH or in /usr/sbin.
    static func has(_ name: String) -> Bool { SimHarness.installed(name) }

    struct Result: CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String
        var description: String { "exit \(status)\n--- stdout\n\(stdout.prefix(3000))\n--- stderr\n\(stderr.prefix(3000))" }
    }

    /// Runs a program to completion (see ``SimHarness/run(_:_:environment:)``).
    static func run(_ executable: String, _ arguments: [String]) throws -> Result {
        let r = try SimHarness.run(executable, arguments)
        return Result(status: r.status, stdout: r.out, stderr: r.stderr)
    }

    /// What one simulator session printed: the device files, then each motion-monitor run's stdout.
    struct Session: CustomStringConvertible {
        var status: Int32
        var dump: String
        var rawOutputs: [String]
        var outputs: [[JSONReading]]
        var stderr: String
        var description: String { "exit \(status)\n--- stdout\n\(dump.suffix(1500))\n\(rawOutputs.joined(separator: "\n---\n"))\n--- stderr\n\(stderr.prefix(3000))" }
    }

    /// In one `iio-sim` session: dumps every file of every IIO device with `cat`, then runs
    /// motion-monitor once per entry of `runs`. The session's status is the first failing run's.
    static func session(fixture: String, simOptions: [String] = [], runs: [[String]], parseReadings: Bool = true) throws -> Session {
        let marker = "@@@ motion-monitor run"
        var script = #"""
            for f in /sys/bus/iio/devices/*/*; do
                [ -f "$f" ] && [ -r "$f" ] && printf '%s=%s\n' "$f" "$(cat "$f" 2>/dev/null)"
            done
            status=0
            """#
        for (i, args) in runs.enumerated() {
            let quoted = ([monitor] + args).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
            script += "\necho '\(marker) \(i)'; \(quoted.joined(separator: " ")) || { s=$?; [ $status -ne 0 ] || status=$s; }"
        }
        script += "\nexit $status\n"
        let r = try run(sim, ["--fixture", fixture] + simOptions + ["--", "/bin/sh", "-c", script])
        let parts = r.stdout.components(separatedBy: "\(marker) ")
        let rawOutputs = parts.dropFirst().map { part in
            String(part.drop { $0 != "\n" }.dropFirst()).trimmingCharacters(in: .newlines)
        }
        let outputs = parseReadings
            ? rawOutputs.map { $0.split(separator: "\n").compactMap { JSONReading(line: String($0)) } }
            : []
        if parseReadings {
            for (raw, parsed) in zip(rawOutputs, outputs) {
                #expect(raw.isEmpty ? parsed.isEmpty : raw.split(separator: "\n").count == parsed.count,
                        "every stdout line is a pinned JSON reading: \(raw)")
            }
        }
        return Session(status: r.status, dump: parts.first ?? "", rawOutputs: rawOutputs, outputs: outputs, stderr: r.stderr)
    }
}


// MARK: - The hand computation

/// The device files of one session, parsed from the `cat` dump.
private struct Sysfs {
    /// Device id → file name → contents.
    var files: [String: [String: String]] = [:]

    init(dump: String) {
        files = SimHarness.sysfsFiles(dump: dump)
    }

    /// `accel` or `anglvel`.
    private static func type(_ sensor: String) -> String? {
        ["accelerometer": "accel", "gyroscope": "anglvel", "magnetometer": "magn"][sensor]
    }

    /// Sensors of a device, from its `in_<type>_{x,y,z}_raw` files, in the pinned order.
    func sensors(of id: String) -> [String] {
        ["accelerometer", "gyroscope", "magnetometer"].filter { s in
            ["x", "y", "z"].allSatisfy { files[id]?["in_\(Self.type(s)!)_\($0)_raw"] != nil }
        }
    }

    /// iio:deviceN ids that have a motion sensor, in number order.
    var motionDevices: [String] {
        files.keys.filter { $0.hasPrefix("iio:device") && !sensors(of: $0).isEmpty }
            .sorted { Int($0.dropFirst(10))! < Int($1.dropFirst(10))! }
    }

    /// The expected (x, y, z) of `sensor` on `device`: kernel ABI (raw + offset) · scale with the
    /// per-axis, per-type, then device-level file; the mount matrix from `in_<type>_mount_matrix`,
    /// `mount_matrix`, `in_mount_matrix`, applied as M·v; then Core Motion's −v/g for acceleration.
    func expected(_ sensor: String, device: String, si: Bool) -> [Double]? {
        guard let f = files[device], let t = Self.type(sensor) else { return nil }
        func number(_ names: [String], default value: Double) -> Double? {
            guard let name = names.first(where: { f[$0] != nil }) else { return value }
            return Double(f[name]!.trimmingCharacters(in: .whitespaces))
        }
        var v: [Double] = []
        for axis in ["x", "y", "z"] {
            guard let raw = f["in_\(t)_\(axis)_raw"].flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }),
                  let scale = number(["in_\(t)_\(axis)_scale", "in_\(t)_scale", "scale"], default: 1),
                  let offset = number(["in_\(t)_\(axis)_offset", "in_\(t)_offset", "offset"], default: 0)
            else { return nil }
            v.append((Double(raw) + offset) * scale)
        }
        var m: [[Double]] = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
        if let text = ["in_\(t)_mount_matrix", "mount_matrix", "in_mount_matrix"].lazy.compactMap({ f[$0] }).first {
            m = text.split(separator: ";").map { $0.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) } }
            guard m.count == 3, m.allSatisfy({ $0.count == 3 }) else { return nil }
        }
        let rotated = m.map { row in row[0] * v[0] + row[1] * v[1] + row[2] * v[2] }
        if sensor == "magnetometer" { return rotated.map { $0 * 100 } } // gauss in IIO, µT printed
        return sensor == "accelerometer" && !si ? rotated.map { -$0 / 9.80665 } : rotated
    }
}

/// Relative error below 1e-6 (an absolute 1e-12 for values that should be zero).
private func relativelyEqual(_ a: Double, _ b: Double) -> Bool {
    abs(a - b) <= 1e-6 * abs(b) + 1e-12
}

private func zip3<A, B, C>(_ a: [A], _ b: [B], _ c: [C]) -> [(A, B, C)] {
    zip(a, zip(b, c)).map { ($0, $1.0, $1.1) }
}

private func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
}
