import Foundation
import Glibc
import IIOSimKit
import Testing

// `motion-monitor calibrate` as a person runs it, in a terminal (util-linux `script` gives it a
// pty), against iio-sim's accelerometer with a known offset, scale and misalignment and a
// gyroscope with a known bias, laid on its six faces by the `faces` motion. The stored
// calibration is compared with what the simulator was given; then readings of the same device
// are compared with the truth (calibrated) and with the simulator's distorted values
// (--uncalibrated).

@Suite("motion-monitor calibrate under iio-sim", .timeLimit(.minutes(10)),
       .enabled(if: CalibrationRuns.ready, Comment(rawValue: CalibrationRuns.notReadyReason)))
struct CalibrationTests {
    @Test("Six faces in a terminal: offsets within 2 mg, scales within 0.2 %, gyroscope bias; then readings match the truth, and --uncalibrated gives the raw ones")
    func sixFaces() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let mm = SimHarness.product("motion-monitor")
        // The pty comes from `script` outside the simulator (its namespace has no /dev/pts):
        // iio-sim hands its terminal to motion-monitor.
        let calibrate = [SimHarness.product("iio-sim")] + CalibrationRuns.simArguments(bump: nil)
            + ["--", mm, "calibrate", "--still", "0.75", "--seconds", "1.5", "--timeout", "60"]
        let quoted = calibrate.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let r = try SimHarness.run("/usr/bin/script", ["-qec", quoted, "/dev/null"],
                                   environment: ["XDG_STATE_HOME": dir, "TERM": "xterm", "NO_COLOR": ""])
        // Then the board lies still on the last face (-x up), in a second run of the simulator.
        let script = """
        echo "MOUNT=$(cat /sys/bus/iio/devices/iio:device0/in_mount_matrix)"
        \(mm) --json --si --sensor accelerometer --interval 0 --count 40 | sed 's/^/CAL /'
        \(mm) --json --si --sensor accelerometer --interval 0 --count 40 --uncalibrated | sed 's/^/RAW /'
        \(mm) --json --sensor gyroscope --interval 0 --count 40 | sed 's/^/GYRO /'
        \(mm) --csv - --sensor accelerometer --count 1 --quiet | sed 's/^/CSV /'
        \(mm) --once --json --si --sensor accelerometer | sed 's/^/ONCE /'
        """
        var still = CalibrationRuns.simArguments(bump: nil)
        still[still.firstIndex(of: "--motion")! + 1] = "still:up=-x"
        let readings = try SimHarness.run(SimHarness.product("iio-sim"), still + ["--", "/bin/sh", "-c", script],
                                          environment: ["XDG_STATE_HOME": dir])
        #expect(readings.status == 0, "\(readings)")
        let after = readings.out
        let out = r.out
        #expect(r.status == 0, "\(r)")
        #expect(out.contains("6 of 6") && out.contains("Mount matrix: right"), "\(r)")
        #expect(out.contains("\r\u{1B}[K"), "a status line rewritten in place on a terminal")
        #expect(out.contains("\u{1B}[1m"), "instructions in bold on a terminal without NO_COLOR")

        // The stored accelerometer calibration against what the simulator was given.
        let accel = try CalibrationRuns.file(dir + "/iiomotion/accelerometer-bmi160.txt")
        let g = MotionScript.g
        for (axis, given) in CalibrationRuns.offsetMG.enumerated() {
            let found = accel.bias[axis] / g * 1000
            #expect(abs(found - given) < 2, "offset \(axis): \(found) mg, given \(given) mg")
        }
        let scale = try #require(CalibrationRuns.inverseDiagonal(accel.matrix))
        for (axis, given) in CalibrationRuns.scale.enumerated() {
            #expect(abs(scale[axis] / given - 1) < 0.002, "scale \(axis): \(scale[axis]), given \(given)")
        }
        // The gyroscope's bias is given in device axes; the file holds the sensor's: Mᵀ · bias.
        let mountText = try #require(after.split(separator: "\n").first { $0.hasPrefix("MOUNT=") }).dropFirst(6)
        let mount = try #require(Mat3(mountMatrix: String(mountText)))
        let gyro = try CalibrationRuns.file(dir + "/iiomotion/gyroscope-bmi160.txt")
        let chipBias = mount.transposed * CalibrationRuns.gyroBias
        for axis in 0..<3 {
            #expect(abs(gyro.bias[axis] - chipBias[axis]) < 0.0005, "gyroscope bias \(axis): \(gyro.bias[axis]), given \(chipBias[axis]) rad/s")
        }

        // The board lies on its last face, -x up: the truth is (-g, 0, 0) m/s², no rotation.
        let truth = Vec3(-g, 0, 0)
        let calibrated = try CalibrationRuns.mean(after, prefix: "CAL ")
        for axis in 0..<3 {
            #expect(abs(calibrated[axis] - truth[axis]) / g * 1000 < 2, "calibrated \(axis): \(calibrated[axis]) m/s², truth \(truth[axis])")
        }
        let once = try CalibrationRuns.mean(after, prefix: "ONCE ", least: 1)
        for axis in 0..<3 {
            #expect(abs(once[axis] - truth[axis]) / g * 1000 < 5, "a polled read, calibrated \(axis): \(once[axis]) m/s², truth \(truth[axis])")
        }
        var imperfections = Imperfections()
        imperfections.accelOffset = Vec3(CalibrationRuns.offsetMG[0], CalibrationRuns.offsetMG[1], CalibrationRuns.offsetMG[2]) * (g / 1000)
        imperfections.accelScale = Vec3(CalibrationRuns.scale[0], CalibrationRuns.scale[1], CalibrationRuns.scale[2])
        imperfections.accelMisalignment = try #require(Mat3(mountMatrix: CalibrationRuns.misalignment))
        let distorted = mount * imperfections.distortedAcceleration(mount.transposed * truth)
        let raw = try CalibrationRuns.mean(after, prefix: "RAW ")
        for axis in 0..<3 {
            #expect(abs(raw[axis] - distorted[axis]) / g * 1000 < 2, "uncalibrated \(axis): \(raw[axis]) m/s², the simulator's \(distorted[axis])")
        }
        #expect(abs(raw[1] - truth[1]) / g * 1000 > 20, "the uncalibrated reading is off by the offset")
        let rate = try CalibrationRuns.mean(after, prefix: "GYRO ")
        for axis in 0..<3 { #expect(abs(rate[axis]) < 0.001, "calibrated rotation rate at rest \(axis): \(rate[axis]) rad/s") }
        #expect(after.contains("CSV timestamp,sensor,device,x,y,z\nCSV # accelerometer calibrated 20"), "the log says it is calibrated: \(readings)")
    }

    @Test("A knock while a face is measured is refused, line by line when not a terminal, and nothing is stored")
    func movedDuringAFace() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try SimHarness.run(SimHarness.product("iio-sim"),
                                   CalibrationRuns.simArguments(bump: 2) + ["--", SimHarness.product("motion-monitor"), "calibrate",
                                                                            "--still", "0.75", "--seconds", "1.5", "--timeout", "60"],
                                   environment: ["XDG_STATE_HOME": dir])
        #expect(r.status == 65, "\(r)")
        #expect(r.out.contains("Measured face up") && r.out.contains("refused: the board moved while top edge up"), "\(r)")
        #expect(r.out.contains("Nothing was stored."), "\(r)")
        #expect(!r.out.contains("\r") && !r.out.contains("\u{1B}"), "plain lines when stdout is not a terminal: \(r)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/iiomotion/accelerometer-bmi160.txt"))
    }

    @Test("A face missing when the time is up is refused; --show and --forget")
    func faceMissing() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let mm = SimHarness.product("motion-monitor")
        let script = """
        \(mm) calibrate --still 0.5 --seconds 1 --timeout 4; echo "STATUS=$?"
        \(mm) calibrate --show
        mkdir -p \(dir)/iiomotion
        printf 'version 1\\nkind accelerometer\\nbias 0.1 0 0\\nmatrix 1 0 0 0 1 0 0 0 1\\n' > \(dir)/iiomotion/accelerometer-bmi160.txt
        \(mm) calibrate --show
        \(mm) --list
        \(mm) calibrate --forget
        \(mm) calibrate --show
        """
        let r = try SimHarness.run(SimHarness.product("iio-sim"), ["--fixture", "bmi160", "--", "/bin/sh", "-c", script],
                                   environment: ["XDG_STATE_HOME": dir])
        let out = r.out
        #expect(out.contains("refused: timed out after 4 s with 1 of 6 faces measured; faces missing: face down"), "\(r)")
        #expect(out.contains("STATUS=65"), "\(r)")
        #expect(out.contains("accelerometer of iio:device0 (bmi160): not calibrated (no \(dir)/iiomotion/accelerometer-bmi160.txt)"), "\(r)")
        #expect(out.contains("accelerometer of iio:device0 (bmi160): calibrated 1970-01-01 00:00:00 UTC"), "\(r)")
        #expect(out.contains("offset (sensor axes): x +10.2 mg, y +0.0 mg, z +0.0 mg"), "\(r)")
        #expect(out.contains("iio:device0 (bmi160) accelerometer: calibrated 1970-01-01 00:00:00 UTC"), "--list: \(r)")
        #expect(out.contains("removed \(dir)/iiomotion/accelerometer-bmi160.txt"), "\(r)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/iiomotion/accelerometer-bmi160.txt"))
    }

    @Test("--write-kernel on inv_mpu6050: the offsets go into calibbias, readings stay right, --restore-kernel, --stored and --forget put the registers back as found")
    func writeKernel() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let mm = SimHarness.product("motion-monitor")
        let files = ["accel_x", "accel_y", "accel_z", "anglvel_x", "anglvel_y", "anglvel_z"]
            .map { "/sys/bus/iio/devices/iio:device0/in_\($0)_calibbias" }.joined(separator: " ")
        let script = """
        echo FOUND $(for f in \(files); do echo "$(cat $f)"; done)
        \(mm) calibrate --write-kernel --still 0.75 --seconds 1.5 --timeout 60; echo "STATUS=$?"
        echo WRITTEN $(for f in \(files); do echo "$(cat $f)"; done)
        cp \(dir)/iiomotion/accelerometer-mpu6050.txt \(dir)/accel-written.txt
        \(mm) --json --si --sensor accelerometer --interval 0 --count 40 --uncalibrated | sed 's/^/RAW /'
        \(mm) --json --si --sensor accelerometer --interval 0 --count 40 | sed 's/^/CAL /'
        \(mm) calibrate --show
        cd /sys/bus/iio/devices/iio:device0
        echo -2838 > in_accel_x_calibbias; echo 1702 > in_accel_y_calibbias; echo 1366 > in_accel_z_calibbias
        \(mm) --json --si --sensor accelerometer --interval 0 --count 40 | sed 's/^/RESET /'
        \(mm) calibrate --show | grep 'kernel:' | sed 's/^/SHOW /'
        cd /
        \(mm) calibrate --restore-kernel; echo "RESTORE=$?"
        echo RESTORED $(for f in \(files); do echo "$(cat $f)"; done)
        cp \(dir)/iiomotion/accelerometer-mpu6050.txt \(dir)/accel-restored.txt
        \(mm) --json --si --sensor accelerometer --interval 0 --count 40 | sed 's/^/SOFT /'
        \(mm) calibrate --write-kernel --stored; echo "STORED=$?"
        echo AGAIN $(for f in \(files); do echo "$(cat $f)"; done)
        \(mm) calibrate --forget; echo "FORGET=$?"
        echo FORGOTTEN $(for f in \(files); do echo "$(cat $f)"; done)
        """
        let args = ["--fixture", "mpu6050", "--motion", "faces:hold=3.5,move=1",
                    "--accel-offset", CalibrationRuns.offsetMG.map { "\($0)" }.joined(separator: ","),
                    "--accel-scale", CalibrationRuns.scale.map { "\($0)" }.joined(separator: ","),
                    "--gyro-bias", "\(CalibrationRuns.gyroBias.x),\(CalibrationRuns.gyroBias.y),\(CalibrationRuns.gyroBias.z)",
                    "--accel-noise", "0.01", "--gyro-noise", "0.001"]
        let r = try SimHarness.run(SimHarness.product("iio-sim"), args + ["--", "/bin/sh", "-c", script],
                                   environment: ["XDG_STATE_HOME": dir])
        let out = r.out
        func values(_ tag: String) throws -> [Int] {
            let line = try #require(out.split(separator: "\n").first { $0.hasPrefix(tag + " ") }, "no \(tag) line: \(r)")
            let v = line.split(separator: " ").dropFirst().compactMap { Int($0) }
            try #require(v.count == 6, "\(line)")
            return v
        }
        #expect(out.contains("STATUS=0") && out.contains("RESTORE=0") && out.contains("STORED=0") && out.contains("FORGET=0"), "\(r)")
        let found = try values("FOUND")
        #expect(found == [-2838, 1702, 1366, 25, -14, 60], "the fixture's factory values: \(r)")
        // What the registers must take: the offset in counts (1/2048 g, even steps) and the
        // gyroscope's bias (1/32.8 °/s), within a step of the fit's noise.
        let g = MotionScript.g
        let accelCounts = CalibrationRuns.offsetMG.map { Int(($0 / 1000 * 2048 / 2).rounded()) * 2 }
        let gyroCounts = [CalibrationRuns.gyroBias.x, CalibrationRuns.gyroBias.y, CalibrationRuns.gyroBias.z]
            .map { Int(($0 * 180 / Double.pi * 32.8).rounded()) }
        let written = try values("WRITTEN")
        for i in 0..<3 {
            #expect(abs(written[i] - (found[i] - accelCounts[i])) <= 2, "accel \(i): wrote \(written[i]), found \(found[i]), offset \(accelCounts[i]) counts")
            #expect(written[i] % 2 == found[i] % 2, "bit 0 of the accelerometer's offset register is kept")
            #expect(abs(written[3 + i] - (found[3 + i] - gyroCounts[i])) <= 1, "gyro \(i): wrote \(written[3 + i]), found \(found[3 + i]), bias \(gyroCounts[i]) counts")
        }
        // The stored calibration keeps only what the registers did not take, and records them.
        let stored = try CalibrationRuns.file(dir + "/accel-written.txt")
        for i in 0..<3 { #expect(abs(stored.bias[i] / g * 1000) < 2, "software offset left \(i): \(stored.bias[i] / g * 1000) mg") }
        let text = try String(contentsOfFile: dir + "/accel-written.txt", encoding: .utf8)
        #expect(text.contains("kernel-original -2838 1702 1366\n"), "\(text)")
        #expect(text.contains("kernel-written \(written[0]) \(written[1]) \(written[2])\n"), "\(text)")
        // On its last face (-x up): the hardware took the offsets out of the raw readings, and
        // the calibrated ones are the truth.
        let raw = try CalibrationRuns.mean(out, prefix: "RAW ")
        for axis in 1..<3 { #expect(abs(raw[axis]) / g * 1000 < 2, "uncalibrated \(axis) with the offsets in the registers: \(raw[axis] / g * 1000) mg") }
        let calibrated = try CalibrationRuns.mean(out, prefix: "CAL ")
        let truth = Vec3(-g, 0, 0)
        for axis in 0..<3 { #expect(abs(calibrated[axis] - truth[axis]) / g * 1000 < 2, "calibrated \(axis): \(calibrated[axis]) m/s²") }
        #expect(out.contains("kernel: in_accel_x_calibbias = \(written[0])") && out.contains("they hold it"), "--show: \(r)")
        // The registers back at their power-up values: the library takes the offsets back in software.
        let reset = try CalibrationRuns.mean(out, prefix: "RESET ")
        for axis in 0..<3 { #expect(abs(reset[axis] - truth[axis]) / g * 1000 < 2, "calibrated, registers reset \(axis): \(reset[axis]) m/s²") }
        #expect(out.contains("SHOW   kernel: in_accel_x_calibbias") && out.contains("they hold the values found again"), "\(r)")
        // --restore-kernel: the registers as found, the offsets back in software, readings still right.
        #expect(try values("RESTORED") == found, "\(r)")
        let restored = try CalibrationRuns.file(dir + "/accel-restored.txt")
        for (i, given) in CalibrationRuns.offsetMG.enumerated() {
            #expect(abs(restored.bias[i] / g * 1000 - given) < 2, "software offset after restoring \(i): \(restored.bias[i] / g * 1000) mg, given \(given)")
        }
        #expect(!(try String(contentsOfFile: dir + "/accel-restored.txt", encoding: .utf8)).contains("kernel-"))
        let soft = try CalibrationRuns.mean(out, prefix: "SOFT ")
        for axis in 0..<3 { #expect(abs(soft[axis] - truth[axis]) / g * 1000 < 2, "calibrated in software \(axis): \(soft[axis]) m/s²") }
        // --write-kernel --stored writes the same values again; --forget restores them and removes the files.
        #expect(try values("AGAIN") == written, "\(r)")
        #expect(try values("FORGOTTEN") == found, "\(r)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/iiomotion/accelerometer-mpu6050.txt"))
        #expect(!FileManager.default.fileExists(atPath: dir + "/iiomotion/gyroscope-mpu6050.txt"))
    }

    @Test("--write-kernel on a driver whose calibbias units are unknown: refused naming the driver, the stored calibration unchanged")
    func writeKernelRefused() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let mm = SimHarness.product("motion-monitor")
        let calibration = "version 1\\nkind accelerometer\\nbias 0.1 0 0\\nmatrix 1 0 0 0 1 0 0 0 1\\n"
        let script = """
        mkdir -p \(dir)/iiomotion
        printf '\(calibration)' > \(dir)/iiomotion/accelerometer-bmi160.txt
        \(mm) calibrate --write-kernel --stored; echo "STATUS=$?"
        \(mm) calibrate --restore-kernel; echo "STATUS=$?"
        """
        let r = try SimHarness.run(SimHarness.product("iio-sim"), ["--fixture", "bmi160", "--", "/bin/sh", "-c", script],
                                   environment: ["XDG_STATE_HOME": dir])
        #expect(r.stderr.contains("the units of bmi160's calibbias files are not known to IIOMotion"), "\(r)")
        #expect(r.out.contains("STATUS=69"), "refused as unavailable: \(r)")
        #expect(r.out.contains("no calibbias values were written by motion-monitor") && r.out.contains("STATUS=0"), "\(r)")
        #expect(!(try String(contentsOfFile: dir + "/iiomotion/accelerometer-bmi160.txt", encoding: .utf8)).contains("kernel-"))
    }

    @Test("--write-kernel on adxl345 (6.1: OFS × 4 in data counts, 8 bits): offsets in steps of 4 counts, readings right, too large refused, --restore-kernel")
    func writeKernelADXL345() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // adxl345 as 6.1's adxl345_core shows it: no buffer, raw in full-resolution counts of
        // 38300 µm/s², calibbias the OFS registers × 4 (here found at 2, -1, 0).
        let fixture = """
        {"description": "adxl345 as 6.1's adxl345_core.c publishes it (no buffer)", "triggers": [],
         "devices": [{"name": "adxl345", "channels": [{"id": "accel_x"}, {"id": "accel_y"}, {"id": "accel_z"}],
           "attributes": {"in_accel_scale": "0.038300", "in_accel_sampling_frequency": "100.000000000",
             "in_accel_x_calibbias": "8", "in_accel_y_calibbias": "-4", "in_accel_z_calibbias": "0"}}]}
        """
        try fixture.write(toFile: dir + "/adxl345.json", atomically: true, encoding: .utf8)
        let g = MotionScript.g
        let offset = [60.0, -45.0, 25.0]  // mg, what the chip reads at rest beside gravity
        let r = try CalibrationRuns.kernelRun(dir: dir, fixture: dir + "/adxl345.json", accelOffsetMG: offset, device: "adxl345",
                                              accelFiles: true, gyroFiles: false, tooLarge: "30 0 0")
        // 60 mg = 15.4 counts → 16 (4 to a register step); -45 mg = -11.5 → -12; 25 mg = 6.4 → 8.
        #expect(try CalibrationRuns.values(r, "FOUND") == [8, -4, 0] as [Double])
        #expect(try CalibrationRuns.values(r, "WRITTEN") == [8 - 16, -4 + 12, 0 - 8] as [Double], "\(r)")
        #expect(r.out.contains("STATUS=0") && r.out.contains("RESTORE=0"), "\(r)")
        // The registers took all but the rounding: uncalibrated readings are off by less than
        // half a step (2 counts, 7.8 mg) plus a data count's rounding; calibrated ones are right
        // to a data count's rounding (3.9 mg / 2).
        let raw = try CalibrationRuns.mean(r.out, prefix: "RAW ", least: 1)
        let cal = try CalibrationRuns.mean(r.out, prefix: "CAL ", least: 1)
        let truth = Vec3(0, 0, g)
        for i in 0..<3 {
            #expect(abs(raw[i] - truth[i]) / g * 1000 < 7.9 + 2, "uncalibrated \(i): \((raw[i] - truth[i]) / g * 1000) mg")
            #expect(abs(raw[i] - truth[i]) / g * 1000 < abs(offset[i]) - 10, "the registers took the offset out \(i)")
            #expect(abs(cal[i] - truth[i]) / g * 1000 < 2.0, "calibrated \(i): \((cal[i] - truth[i]) / g * 1000) mg")
        }
        // 30 m/s² needs 783 counts: more than the 8-bit register holds (508), refused before writing.
        #expect(r.out.contains("BIG=65") || r.out.contains("BIG=69") || r.out.contains("BIG=74"), "\(r)")
        #expect(r.stderr.contains("outside what the register holds (-512…508"), "\(r)")
        #expect(try CalibrationRuns.values(r, "UNTOUCHED") == [8 - 16, -4 + 12, 0 - 8] as [Double], "\(r)")
        #expect(try CalibrationRuns.values(r, "RESTORED") == [8, -4, 0] as [Double], "\(r)")
    }

    @Test("--write-kernel on inv_icm42600 (6.1: SI values of 12-bit registers, 0.5 mg and 1/32 °/s): accelerometer and gyroscope, readings right, too large refused, --restore-kernel")
    func writeKernelICM42600() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // An ICM-42605 as 6.1's inv_icm42600 publishes it: two devices, calibbias in m/s² (micro)
        // and rad/s (nano); here found at 1, -2, 0 and 1, 0, -2 counts.
        let fixture = """
        {"description": "icm42605 as 6.1's inv_icm42600 publishes it (polled)", "triggers": [],
         "devices": [
          {"name": "icm42605-accel", "channels": [{"id": "accel_x"}, {"id": "accel_y"}, {"id": "accel_z"}],
           "attributes": {"in_accel_scale": "0.004788403", "in_accel_x_calibbias": "0.004903",
             "in_accel_y_calibbias": "-0.009807", "in_accel_z_calibbias": "0.000000"}},
          {"name": "icm42605-gyro", "channels": [{"id": "anglvel_x"}, {"id": "anglvel_y"}, {"id": "anglvel_z"}],
           "attributes": {"in_anglvel_scale": "0.001065264", "in_anglvel_x_calibbias": "0.000545415",
             "in_anglvel_y_calibbias": "0.000000000", "in_anglvel_z_calibbias": "-0.001090831"}}]}
        """
        try fixture.write(toFile: dir + "/icm42605.json", atomically: true, encoding: .utf8)
        let g = MotionScript.g
        let offset = [30.0, -50.0, 20.0]
        let r = try CalibrationRuns.kernelRun(dir: dir, fixture: dir + "/icm42605.json", accelOffsetMG: offset, device: "icm42605-accel",
                                              accelFiles: true, gyroFiles: true, tooLarge: "30 0 0", gyroDevice: "icm42605-gyro")
        let accelUnit = g * 0.0005, gyroUnit = Double.pi / 180 / 32
        func counts(_ tag: String) throws -> [Int] {
            let v = try CalibrationRuns.values(r, tag)
            try #require(v.count == 6, "\(tag): \(r)")
            return v.enumerated().map { Int(($0.element / ($0.offset < 3 ? accelUnit : gyroUnit)).rounded()) }
        }
        #expect(try counts("FOUND") == [1, -2, 0, 1, 0, -2], "\(r)")
        // 30, -50, 20 mg are 60, -100, 40 counts; 0.01, -0.02, 0.005 rad/s are 18, -37, 9.
        #expect(try counts("WRITTEN") == [1 - 60, -2 + 100, 0 - 40, 1 - 18, 0 + 37, -2 - 9], "\(r)")
        #expect(r.out.contains("STATUS=0") && r.out.contains("RESTORE=0"), "\(r)")
        let raw = try CalibrationRuns.mean(r.out, prefix: "RAW ", least: 1)
        let cal = try CalibrationRuns.mean(r.out, prefix: "CAL ", least: 1)
        let truth = Vec3(0, 0, g)
        for i in 0..<3 {
            #expect(abs(raw[i] - truth[i]) / g * 1000 < 1, "uncalibrated \(i), the registers took the offset: \((raw[i] - truth[i]) / g * 1000) mg")
            #expect(abs(cal[i] - truth[i]) / g * 1000 < 0.5, "calibrated \(i): \((cal[i] - truth[i]) / g * 1000) mg")
        }
        let rate = try CalibrationRuns.mean(r.out, prefix: "GYRO ", least: 1)
        for i in 0..<3 { #expect(abs(rate[i]) < 0.0006, "calibrated rotation rate \(i): \(rate[i]) rad/s") }
        // 30 m/s² is 6118 counts: more than the 12-bit register holds.
        #expect(r.stderr.contains("outside what the register holds (-2048…2047"), "\(r)")
        #expect(try counts("UNTOUCHED") == [1 - 60, -2 + 100, 0 - 40, 1 - 18, 0 + 37, -2 - 9], "\(r)")
        #expect(try counts("RESTORED") == [1, -2, 0, 1, 0, -2], "\(r)")
        #expect(r.out.contains("RESTORED 0.004903 -0.009807 0.000000 0.000545415 0.000000000 -0.001090831"), "as found, text and all: \(r)")
    }

    @Test("--write-kernel when the second axis cannot be written: the first is put back as found, the user is told, nothing is stored as written")
    func writeKernelPartial() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let mm = SimHarness.product("motion-monitor")
        let calibration = "version 1\\nkind accelerometer\\nbias 0.1 -0.2 0.05\\nmatrix 1 0 0 0 1 0 0 0 1\\n"
        let files = ["x", "y", "z"].map { "/sys/bus/iio/devices/iio:device0/in_accel_\($0)_calibbias" }.joined(separator: " ")
        let script = """
        mkdir -p \(dir)/iiomotion
        printf '\(calibration)' > \(dir)/iiomotion/accelerometer-mpu6050.txt
        echo FOUND $(for f in \(files); do echo "$(cat $f)"; done)
        \(mm) calibrate --write-kernel --stored; echo "STATUS=$?"
        echo AFTER $(for f in \(files); do echo "$(cat $f)"; done)
        """
        let r = try SimHarness.run(SimHarness.product("iio-sim"),
                                   ["--fixture", "mpu6050", "--read-only", "mpu6050/in_accel_y_calibbias", "--", "/bin/sh", "-c", script],
                                   environment: ["XDG_STATE_HOME": dir])
        #expect(r.out.contains("FOUND -2838 1702 1366\n"), "\(r)")
        #expect(r.out.contains("STATUS=77"), "refused, as a write without permission: \(r)")
        #expect(r.stderr.contains("in_accel_y_calibbias of iio:device0 (mpu6050) cannot be written"), "\(r)")
        #expect(r.stderr.contains("put back as found: in_accel_x_calibbias = -2838"), "the user is told x was put back: \(r)")
        #expect(r.out.contains("AFTER -2838 1702 1366\n"), "x restored, y and z untouched: \(r)")
        let text = try String(contentsOfFile: dir + "/iiomotion/accelerometer-mpu6050.txt", encoding: .utf8)
        #expect(!text.contains("kernel-") && text.contains("bias 0.1 -0.2 0.05"), "the stored calibration is unchanged: \(text)")
    }

    @Test("Which readings are calibrated: the JSON lines' first record, --once --json, --list --json, and the comment line of a log appended to")
    func calibrationSaid() throws {
        let dir = try SimHarness.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let mm = SimHarness.product("motion-monitor")
        let calibration = "version 1\\nkind accelerometer\\nbias 0.1 0 0\\nmatrix 1 0 0 0 1 0 0 0 1\\n"
        let script = """
        mkdir -p \(dir)/iiomotion
        printf '\(calibration)' > \(dir)/iiomotion/accelerometer-bmi160.txt
        \(mm) --json --interval 0 --count 2 --sensor all | sed 's/^/JSON /'
        \(mm) --json --interval 0 --count 2 --sensor accelerometer --uncalibrated | sed 's/^/UNCAL /'
        \(mm) --once --json --sensor accelerometer | sed 's/^/ONCE /'
        \(mm) --list --json | sed 's/^/LIST /'
        \(mm) --csv \(dir)/log.csv --sensor accelerometer --count 2 --quiet; echo "FIRST=$?"
        \(mm) --csv \(dir)/log.csv --append --sensor accelerometer --count 2 --quiet --uncalibrated; echo "SECOND=$?"
        rm \(dir)/iiomotion/accelerometer-bmi160.txt
        \(mm) --csv \(dir)/log.csv --append --sensor accelerometer --count 2 --quiet; echo "THIRD=$?"
        \(mm) --json --interval 0 --count 2 --sensor accelerometer | sed 's/^/NONE /'
        \(mm) plot \(dir)/log.csv -o \(dir)/log.svg; echo "PLOT=$?"
        """
        let r = try SimHarness.run(SimHarness.product("iio-sim"), ["--fixture", "bmi160", "--", "/bin/sh", "-c", script],
                                   environment: ["XDG_STATE_HOME": dir])
        let lines = r.out.split(separator: "\n").map(String.init)
        func first(_ tag: String) -> String? { lines.first { $0.hasPrefix(tag + " ") }.map { String($0.dropFirst(tag.count + 1)) } }
        let since = #""created":"1970-01-01 00:00:00 UTC""#
        #expect(first("JSON") == #"{"calibration":{"accelerometer":{"calibrated":true,"# + since + #"},"gyroscope":{"calibrated":false}}}"#, "\(r)")
        #expect(lines.filter { $0.hasPrefix("JSON ") }.dropFirst().allSatisfy { $0.contains(#""sensor":"#) }, "readings follow the record: \(r)")
        #expect(first("UNCAL") == #"{"calibration":{"accelerometer":{"calibrated":false,"# + since + #","uncalibrated":true}}}"#, "\(r)")
        #expect(first("ONCE") == #"{"calibration":{"accelerometer":{"calibrated":true,"# + since + "}}}", "\(r)")
        #expect(lines.filter { $0.hasPrefix("ONCE ") }.count == 2, "the record, then the reading: \(r)")
        // --list --json: every device's accelerometer and gyroscope, with the file in force.
        let list = try #require(first("LIST"), "\(r)")
        let parsed = try JSONSerialization.jsonObject(with: Data(list.utf8))
        let devices = try #require(parsed as? [[String: Any]], "\(list)")
        let cal = try #require(devices.first?["calibration"] as? [String: [String: Any]], "\(list)")
        #expect(cal["accelerometer"]?["calibrated"] as? Bool == true, "\(list)")
        #expect(cal["accelerometer"]?["file"] as? String == dir + "/iiomotion/accelerometer-bmi160.txt", "\(list)")
        #expect(cal["gyroscope"]?["calibrated"] as? Bool == false, "\(list)")
        // Without any calibration there is no record (the readings are the kernel's, as always).
        #expect(first("NONE")?.hasPrefix(#"{"sensor":"accelerometer""#) == true, "\(r)")
        // The log: a comment line for each run's rows, appended ones included.
        #expect(r.out.contains("FIRST=0") && r.out.contains("SECOND=0") && r.out.contains("THIRD=0"), "\(r)")
        let log = try String(contentsOfFile: dir + "/log.csv", encoding: .utf8).split(separator: "\n").map(String.init)
        let comments = log.enumerated().filter { $0.element.hasPrefix("#") }
        #expect(comments.map(\.element) == ["# accelerometer calibrated 1970-01-01 00:00:00 UTC",
                                             "# accelerometer uncalibrated (--uncalibrated)", "# accelerometer uncalibrated"], "\(log)")
        #expect(comments.map(\.offset) == [1, 4, 7], "each comment heads its run's two rows: \(log)")
        #expect(r.out.contains("PLOT=0"), "plot reads a log with comment lines: \(r)")
    }
}

private enum CalibrationRuns {
    static var notReadyReason: String {
        if !SimHarness.monitorNotReadyReason.isEmpty { return SimHarness.monitorNotReadyReason }
        return FileManager.default.isExecutableFile(atPath: "/usr/bin/script") ? "" : "script (util-linux) is not installed"
    }
    static var ready: Bool { SimHarness.monitorReady("motion-monitor calibrate tests", extra: notReadyReason) }

    static let offsetMG = [30.0, -50.0, 20.0]
    static let scale = [1.01, 0.99, 1.002]
    static let misalignment = "1,0.004,0;0,1,-0.003;0.002,0,1"
    static let gyroBias = Vec3(0.01, -0.02, 0.005)

    static func simArguments(bump: Int?) -> [String] {
        ["--fixture", "bmi160", "--motion", "faces:hold=3.5,move=1" + (bump.map { ",bump=\($0)" } ?? ""),
         "--accel-offset", offsetMG.map { "\($0)" }.joined(separator: ","),
         "--accel-scale", scale.map { "\($0)" }.joined(separator: ","),
         "--accel-misalignment", misalignment,
         "--gyro-bias", "\(gyroBias.x),\(gyroBias.y),\(gyroBias.z)",
         "--accel-noise", "0.01", "--gyro-noise", "0.001"]
    }

    /// A run of `calibrate --write-kernel --stored` under iio-sim with `fixture` lying still z up:
    /// a calibration whose bias is the simulator's accelerometer offset (and gyroscope bias) is
    /// stored, written into the registers, readings are taken uncalibrated (RAW) and calibrated
    /// (CAL), a calibration too large for the registers (`tooLarge`, m/s²) is refused (BIG=,
    /// UNTOUCHED), and --restore-kernel puts the registers back (RESTORE=, RESTORED). FOUND and
    /// WRITTEN list the accelerometer's calibbias, then the gyroscope's.
    static func kernelRun(dir: String, fixture: String, accelOffsetMG: [Double], device: String, accelFiles: Bool,
                          gyroFiles: Bool, tooLarge: String, gyroDevice: String? = nil) throws -> SimHarness.Result {
        let mm = SimHarness.product("motion-monitor")
        let g = MotionScript.g
        var files: [String] = []
        if accelFiles { files += ["x", "y", "z"].map { "/sys/bus/iio/devices/iio:device0/in_accel_\($0)_calibbias" } }
        if gyroFiles {
            let n = gyroDevice == nil ? 0 : 1
            files += ["x", "y", "z"].map { "/sys/bus/iio/devices/iio:device\(n)/in_anglvel_\($0)_calibbias" }
        }
        let list = files.joined(separator: " ")
        let bias = accelOffsetMG.map { "\($0 / 1000 * g)" }.joined(separator: " ")
        let gbias = "\(gyroBias.x) \(gyroBias.y) \(gyroBias.z)"
        func calibration(_ kind: String, _ b: String) -> String { "version 1\\nkind \(kind)\\nbias \(b)\\nmatrix 1 0 0 0 1 0 0 0 1\\n" }
        var store = "printf '\(calibration("accelerometer", bias))' > \(dir)/iiomotion/accelerometer-\(device).txt\n"
        if gyroFiles { store += "printf '\(calibration("gyroscope", gbias))' > \(dir)/iiomotion/gyroscope-\(gyroDevice ?? device).txt\n" }
        let script = """
        mkdir -p \(dir)/iiomotion
        \(store)
        show() { echo "$1" $(for f in \(list); do echo "$(cat $f)"; done); }
        show FOUND
        \(mm) calibrate --write-kernel --stored; echo "STATUS=$?"
        show WRITTEN
        for i in 1 2 3; do \(mm) --once --json --si --sensor accelerometer --uncalibrated | sed 's/^/RAW /'; done
        for i in 1 2 3; do \(mm) --once --json --si --sensor accelerometer | sed 's/^/CAL /'; done
        \(mm) --once --json --si --sensor gyroscope | sed 's/^/GYRO /'
        cp \(dir)/iiomotion/accelerometer-\(device).txt \(dir)/written.txt
        printf '\(calibration("accelerometer", tooLarge))' > \(dir)/iiomotion/accelerometer-\(device).txt
        \(mm) calibrate --write-kernel --stored; echo "BIG=$?"
        show UNTOUCHED
        cp \(dir)/written.txt \(dir)/iiomotion/accelerometer-\(device).txt
        \(mm) calibrate --restore-kernel; echo "RESTORE=$?"
        show RESTORED
        """
        return try SimHarness.run(SimHarness.product("iio-sim"),
                                  ["--fixture", fixture, "--motion", "still:up=z",
                                   "--accel-offset", accelOffsetMG.map { "\($0)" }.joined(separator: ","),
                                   "--gyro-bias", "\(gyroBias.x),\(gyroBias.y),\(gyroBias.z)", "--", "/bin/sh", "-c", script],
                                  environment: ["XDG_STATE_HOME": dir])
    }

    /// The numbers after `tag` on its line of the output.
    static func values(_ r: SimHarness.Result, _ tag: String) throws -> [Double] {
        let line = try #require(r.out.split(separator: "\n").first { $0.hasPrefix(tag + " ") }, "no \(tag) line: \(r)")
        return line.split(separator: " ").dropFirst().compactMap { Double($0) }
    }

    /// A calibration file's bias and matrix.
    static func file(_ path: String) throws -> (bias: [Double], matrix: [[Double]]) {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        func numbers(_ key: String) -> [Double] {
            text.split(separator: "\n").first { $0.hasPrefix(key + " ") }.map { $0.split(separator: " ").dropFirst().compactMap { Double($0) } } ?? []
        }
        let b = numbers("bias"), m = numbers("matrix")
        try #require(b.count == 3 && m.count == 9, "\(path):\n\(text)")
        return (b, [Array(m[0..<3]), Array(m[3..<6]), Array(m[6..<9])])
    }

    /// The diagonal of a 3×3 matrix's inverse (each axis's gain).
    static func inverseDiagonal(_ m: [[Double]]) -> [Double]? {
        let det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
        guard det != 0 else { return nil }
        return [(m[1][1] * m[2][2] - m[1][2] * m[2][1]) / det, (m[0][0] * m[2][2] - m[0][2] * m[2][0]) / det,
                (m[0][0] * m[1][1] - m[0][1] * m[1][0]) / det]
    }

    /// The mean x, y, z of the JSON lines after `prefix`.
    static func mean(_ out: String, prefix: String, least: Int = 10) throws -> Vec3 {
        var sum = Vec3.zero, n = 0.0
        for line in out.split(separator: "\n") where line.hasPrefix(prefix) {
            guard let object = try JSONSerialization.jsonObject(with: Data(line.dropFirst(prefix.count).utf8)) as? [String: Any],
                  let x = object["x"] as? Double, let y = object["y"] as? Double, let z = object["z"] as? Double else { continue }
            sum += Vec3(x, y, z)
            n += 1
        }
        try #require(n >= Double(least), "\(Int(n)) \(prefix)readings in:\n\(out.suffix(3000))")
        return sum / n
    }
}
