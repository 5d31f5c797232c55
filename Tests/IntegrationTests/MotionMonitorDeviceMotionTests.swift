import Foundation
import Testing

// motion-monitor's device motion and magnetometer (issue H) under iio-sim: the pinned deviceMotion
// JSON line parsed strictly, the still pose on bmi160 and the Sense HAT, a rotation's yaw rate, the
// simulator's magnetic field (20 µT north, 45 µT down: |B| ≈ 49 µT), and the reference frames a
// machine without a magnetometer refuses. (The live view's motion panel is tested with the other
// live-view tests, in tmux.)

@Suite("motion-monitor: device motion and the magnetometer under iio-sim", .serialized, .timeLimit(.minutes(10)),
       .enabled(if: SimHarness.monitorReady("motion-monitor device motion tests"), Comment(rawValue: SimHarness.monitorNotReadyReason)))
struct MotionMonitorDeviceMotionTests {
    /// `iio-sim --fixture F SIM… -- motion-monitor ARGS…`.
    private func run(_ fixture: String, sim: [String] = [], _ args: [String]) throws -> SimHarness.Result {
        try SimHarness.run(SimHarness.product("iio-sim"), ["--fixture", fixture] + sim + ["--", SimHarness.product("motion-monitor")] + args)
    }

    /// stdout's lines.
    private func lines(_ r: SimHarness.Result) -> [String] { r.out.split(separator: "\n").map(String.init) }

    @Test("--sensor motion --json: pinned lines only; lying still face up: roll ≈ pitch ≈ 0, gravity ≈ (0, 0, −1)",
          arguments: ["bmi160", "sense-hat"])
    func still(fixture: String) throws {
        let r = try run(fixture, ["--sensor", "motion", "--json", "--interval", "0.05", "--count", "20"])
        #expect(r.status == 0, "\(r)")
        let all = lines(r)
        let parsed = all.compactMap(JSONDeviceMotion.init(line:))
        #expect(all.count == 20 && parsed.count == 20, "20 pinned deviceMotion lines: \(r)")
        #expect(zip(parsed.dropFirst(), parsed).allSatisfy { $0.timestamp > $1.timestamp }, "timestamps increase")
        for m in parsed {
            #expect(abs(m.roll) < 0.5 * .pi / 180 && abs(m.pitch) < 0.5 * .pi / 180, "\(fixture) \(m)")
            #expect(abs(m.gravity.x) < 0.01 && abs(m.gravity.y) < 0.01 && abs(m.gravity.z + 1) < 0.01, "\(fixture) \(m)")
            #expect(abs(m.userAcceleration.z) < 0.01, "\(fixture) \(m)")
            let q = m.quaternion
            #expect(abs(q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w - 1) < 1e-9, "a unit quaternion: \(m)")
        }
    }

    @Test("--motion rotate:axis=z,dps=90: yaw turns at ~90°/s (radians in the JSON), the rotation rate says the same")
    func rotation() throws {
        let r = try run("bmi160", sim: ["--motion", "rotate:axis=z,dps=90"],
                        ["--sensor", "motion", "--json", "--interval", "0.1", "--duration", "2.5"])
        #expect(r.status == 0, "\(r)")
        let parsed = lines(r).compactMap(JSONDeviceMotion.init(line:))
        #expect(parsed.count >= 15 && parsed.count == lines(r).count, "\(r)")
        // Unwrap yaw (it wraps at ±π) and fit its rate over the run after the first half second.
        let settled = parsed.filter { $0.timestamp - (parsed.first?.timestamp ?? 0) > 0.5 }
        var unwrapped: [(t: Double, yaw: Double)] = []
        for m in settled {
            var y = m.yaw
            if let last = unwrapped.last {
                while y - last.yaw > .pi { y -= 2 * .pi }
                while y - last.yaw < -.pi { y += 2 * .pi }
            }
            unwrapped.append((m.timestamp, y))
        }
        let first = try #require(unwrapped.first), last = try #require(unwrapped.last)
        let rate = (last.yaw - first.yaw) / (last.t - first.t) * 180 / .pi
        let gyro = settled.map(\.rotationRate.z).reduce(0, +) / Double(max(1, settled.count)) * 180 / .pi
        #expect(abs(abs(rate) - 90) < 9, "yaw changes at \(rate)°/s")
        #expect(abs(gyro - 90) < 5, "rotationRate.z: \(gyro)°/s")
        #expect(rate.sign == gyro.sign, "yaw turns the way the rotation rate says: \(rate) vs \(gyro)")
        for m in settled {
            #expect(abs(m.roll) < 2 * .pi / 180 && abs(m.pitch) < 2 * .pi / 180 && abs(m.gravity.z + 1) < 0.02, "\(m)")
        }
    }

    @Test("The Sense HAT's magnetometer: pinned lines in µT, |B| ≈ 49 µT; --once, plain lines and CSV too")
    func magnetometer() throws {
        let r = try run("sense-hat", ["--sensor", "magnetometer", "--json", "--interval", "0", "--count", "10"])
        #expect(r.status == 0, "\(r)")
        let readings = lines(r).compactMap(JSONReading.init(line:))
        #expect(readings.count == 10 && lines(r).count == 10, "\(r)")
        for m in readings {
            #expect(m.sensor == "magnetometer" && m.device == "iio:device2", "\(m)")
            let b = (m.x * m.x + m.y * m.y + m.z * m.z).squareRoot()
            #expect(abs(b - 49.25) < 1.5, "|B| = \(b) µT: \(m)")
            #expect(m.z < -40, "45 µT down, Core Motion axes face up: \(m)")
        }
        let once = try run("sense-hat", ["--once", "--sensor", "magnetometer"])
        #expect(once.status == 0 && once.out.hasPrefix("magnetometer   iio:device2 (") && once.out.contains(" µT  at "), "\(once)")
        let csv = try run("sense-hat", ["--sensor", "magnetometer", "--csv", "-", "--count", "5"])
        let rows = lines(csv)
        #expect(csv.status == 0 && rows.first == "timestamp,sensor,device,x,y,z" && rows.count == 6, "\(csv)")
        #expect(rows.dropFirst().allSatisfy { $0.contains(",magnetometer,iio:device2,") }, "\(csv)")
        let missing = try run("bmi160", ["--sensor", "magnetometer"])
        #expect(missing.status == 69 && missing.stderr == "This device has no magnetometer.\n" && missing.out.isEmpty, "\(missing)")
    }

    @Test("--sensor all on the Sense HAT: accelerometer, gyroscope, magnetometer and device motion, --count each; --once leaves device motion out")
    func all() throws {
        let r = try run("sense-hat", ["--json", "--interval", "0.05", "--count", "8"])
        #expect(r.status == 0, "\(r)")
        let readings = lines(r).compactMap(JSONReading.init(line:))
        let motion = lines(r).compactMap(JSONDeviceMotion.init(line:))
        #expect(readings.count + motion.count == lines(r).count, "only pinned lines: \(r)")
        for sensor in ["accelerometer", "gyroscope", "magnetometer"] {
            #expect(readings.filter { $0.sensor == sensor }.count == 8, "\(sensor): \(r)")
        }
        #expect(motion.count == 8, "\(r)")
        let once = try run("sense-hat", ["--once", "--json"])
        #expect(once.status == 0 && lines(once).compactMap(JSONReading.init(line:)).map(\.sensor) == ["accelerometer", "gyroscope", "magnetometer"], "\(once)")
        // bmi160 has no magnetometer: under all that goes unsaid.
        let bmi = try run("bmi160", ["--json", "--count", "3"])
        #expect(bmi.status == 0 && !bmi.stderr.contains("magnetometer"), "\(bmi)")
        #expect(lines(bmi).compactMap(JSONDeviceMotion.init(line:)).count == 3, "\(bmi)")
    }

    @Test("--reference-frame north on bmi160 (no magnetometer): refused naming the frames there are, exit 69")
    func northRefused() throws {
        for args in [["--sensor", "motion", "--reference-frame", "north"], ["--reference-frame", "north", "--json"],
                     ["--once", "--sensor", "motion", "--reference-frame", "north"]] {
            let r = try run("bmi160", args)
            #expect(r.status == 69, "\(args): \(r)")
            #expect(r.out.isEmpty, "\(args): \(r)")
            #expect(r.stderr == "motion-monitor: the reference frame north (xMagneticNorthZVertical) needs a magnetometer, and this device has none. Frames available here: arbitrary (xArbitraryZVertical).\n",
                    "\(args): \(r)")
        }
        let corrected = try run("bmi160", ["--sensor", "motion", "--reference-frame", "corrected"])
        #expect(corrected.status == 69 && corrected.stderr.contains("corrected (xArbitraryCorrectedZVertical) needs a magnetometer"), "\(corrected)")
    }

    @Test("--reference-frame north on the Sense HAT: accepted, the plain lines give the heading (top edge north: ≈ 0°)")
    func north() throws {
        let r = try run("sense-hat", ["--sensor", "motion", "--reference-frame", "north", "--interval", "0.05", "--count", "10"])
        #expect(r.status == 0, "\(r)")
        let all = lines(r)
        #expect(all.count == 10 && all.allSatisfy { $0.hasPrefix("deviceMotion   roll ") }, "\(r)")
        for line in all {
            let label = try #require(line.firstRange(of: "heading "), "a heading: \(line)")
            let heading = try #require(Double(line[label.upperBound...].prefix { $0 != "°" }), "a heading: \(line)")
            #expect(min(heading, 360 - heading) < 3, "\(line)")
        }
        let json = try run("sense-hat", ["--once", "--sensor", "motion", "--reference-frame", "north", "--json"])
        #expect(json.status == 0 && JSONDeviceMotion(line: json.out.trimmingCharacters(in: .newlines)) != nil, "the same pinned form: \(json)")
        let arbitrary = try run("sense-hat", ["--sensor", "motion", "--count", "2"])
        #expect(arbitrary.status == 0 && !arbitrary.out.contains("heading"), "no heading in the arbitrary frame: \(arbitrary)")
    }

    @Test("--once --sensor motion: the first estimate, one pinned line; without a gyroscope, a clear 69")
    func once() throws {
        let r = try run("bmi160", ["--once", "--sensor", "motion", "--json"])
        #expect(r.status == 0 && lines(r).count == 1, "\(r)")
        let m = try #require(JSONDeviceMotion(line: lines(r).first ?? ""), "\(r)")
        #expect(abs(m.gravity.z + 1) < 0.01, "\(m)")

        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fixture = try SimHarness.accelerometerOnlyFixture(in: dir)
        let message = "This device has no device motion: it needs an accelerometer and a gyroscope, and has no gyroscope.\n"
        for args in [["--once", "--sensor", "motion"], ["--sensor", "motion"]] {
            let none = try run(fixture, args)
            #expect(none.status == 69 && none.out.isEmpty && none.stderr == message, "\(args): \(none)")
        }
        // Under all, only the missing gyroscope is named; the accelerometer is read.
        let all = try run(fixture, ["--count", "2", "--json"])
        #expect(all.status == 0 && all.stderr.contains("This device has no gyroscope.") && !all.stderr.contains("device motion"), "\(all)")
    }

    @Test("--csv with all: device motion is not logged (it does not fit the columns); with --sensor motion, a usage error")
    func csv() throws {
        let r = try run("sense-hat", ["--csv", "-", "--count", "5"])
        #expect(r.status == 0, "\(r)")
        let rows = lines(r)
        #expect(rows.first == "timestamp,sensor,device,x,y,z" && rows.count == 16, "5 rows per sensor, 3 sensors: \(r)")
        #expect(!r.out.contains("deviceMotion"))
        let refused = try run("sense-hat", ["--sensor", "motion", "--csv", "-"])
        #expect(refused.status == 64 && refused.stderr.contains("device motion does not fit"), "\(refused)")
    }
}
